// Unguessable ids for server-side objects (uploads, jobs).
#ifndef TESSERA_SERVICES_COMMON_RANDOM_ID_H_
#define TESSERA_SERVICES_COMMON_RANDOM_ID_H_

#include <string>

namespace tessera {

// `prefix` followed by 128 random bits as 32 lowercase hex digits. Thread-safe.
std::string RandomId(const std::string& prefix = "");

}  // namespace tessera

#endif  // TESSERA_SERVICES_COMMON_RANDOM_ID_H_

// JSON string literals for the hand-written JSON summaries (CLI and services).
#ifndef TESSERA_COMMON_JSON_H_
#define TESSERA_COMMON_JSON_H_

#include <string>

#include "absl/strings/string_view.h"

namespace tessera {

// `s` as a quoted JSON string: quotes, backslashes and control characters escaped.
std::string JsonQuote(absl::string_view s);

}  // namespace tessera

#endif  // TESSERA_COMMON_JSON_H_

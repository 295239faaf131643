// PUT /v1/uploads/registration?filename=F and PUT /v1/uploads/reconstruction?filename=F:
// the request body goes, as it arrives, to that service's UploadFile as
// FileChunks of 1 MiB (the first with the filename and total_bytes from
// Content-Length), so a file of any size passes through a bounded buffer and
// is never held whole. A body without Content-Length is refused with 411 (the
// service needs the total up front to refuse what it cannot store before any
// byte is written). The answer is the UploadedFile as JSON.
#ifndef TESSERA_SERVICES_GATEWAY_UPLOAD_ROUTE_H_
#define TESSERA_SERVICES_GATEWAY_UPLOAD_ROUTE_H_

#include <cstddef>
#include <string>

#include <httplib.h>

#include "services/gateway/gateway_context.h"

namespace tessera::gateway {

inline constexpr size_t kUploadChunkBytes = size_t{1} << 20;

// `target`: "registration" or "reconstruction".
void ServeUpload(const GatewayContext& gateway, const std::string& target, const httplib::Request& request,
                 httplib::Response& response, const httplib::ContentReader* body);

}  // namespace tessera::gateway

#endif  // TESSERA_SERVICES_GATEWAY_UPLOAD_ROUTE_H_

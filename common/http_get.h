// A minimal blocking HTTP/1.0 GET, for scraping our own /metrics endpoint in
// the demo, tests and health probes. Not a general HTTP client: no TLS, no
// redirects, no chunked encoding (HTTP/1.0 responses are delimited by close).
#ifndef TESSERA_COMMON_HTTP_GET_H_
#define TESSERA_COMMON_HTTP_GET_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tessera {

struct HttpResponse {
  int status_code = 0;
  std::string headers;
  std::string body;
};

absl::StatusOr<HttpResponse> HttpGet(const std::string& host, int port, const std::string& path,
                                     absl::Duration timeout = absl::Seconds(10));

}  // namespace tessera

#endif  // TESSERA_COMMON_HTTP_GET_H_

#include "common/http_get.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

absl::Status WaitFor(int fd, short events, absl::Time deadline) {
  const int ms = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
  if (ms <= 0) return absl::DeadlineExceededError("HTTP request timed out");
  pollfd p{fd, events, 0};
  int r = poll(&p, 1, ms);
  if (r == 0) return absl::DeadlineExceededError("HTTP request timed out");
  if (r < 0) return absl::UnavailableError(absl::StrCat("poll: ", std::strerror(errno)));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HttpResponse> HttpGet(const std::string& host, int port, const std::string& path,
                                     absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port_str = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), port_str.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(absl::StrCat("resolving ", host, ": ", gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addrs(found, freeaddrinfo);
  Fd fd(socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  if (connect(fd.get(), found->ai_addr, found->ai_addrlen) != 0) {
    return absl::UnavailableError(absl::StrCat("connecting to ", host, ":", port, ": ", std::strerror(errno)));
  }
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", host, "\r\nConnection: close\r\n\r\n");
  for (size_t sent = 0; sent < request.size();) {
    if (auto s = WaitFor(fd.get(), POLLOUT, deadline); !s.ok()) return s;
    ssize_t n = send(fd.get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0) return absl::UnavailableError(absl::StrCat("send: ", std::strerror(errno)));
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buf[16384];
  while (true) {
    if (auto s = WaitFor(fd.get(), POLLIN, deadline); !s.ok()) return s;
    ssize_t n = recv(fd.get(), buf, sizeof(buf), 0);
    if (n < 0) return absl::UnavailableError(absl::StrCat("recv: ", std::strerror(errno)));
    if (n == 0) break;
    raw.append(buf, static_cast<size_t>(n));
  }
  const size_t header_end = raw.find("\r\n\r\n");
  if (raw.compare(0, 5, "HTTP/") != 0 || header_end == std::string::npos) {
    return absl::DataLossError("malformed HTTP response");
  }
  HttpResponse response;
  response.headers = raw.substr(0, header_end);
  response.body = raw.substr(header_end + 4);
  const size_t sp = response.headers.find(' ');
  if (sp == std::string::npos ||
      !absl::SimpleAtoi(response.headers.substr(sp + 1, 3), &response.status_code)) {
    return absl::DataLossError("malformed HTTP status line");
  }
  return response;
}

}  // namespace tessera

// Test helpers for FingerprintService: an in-process server on loopback with
// its own metrics registry, xyt records made from minutiae, bulk enrolment
// and the process's CPU time. Header-only, for tests and benches.
#ifndef TESSERA_SERVICES_FINGERPRINT_SERVICE_TESTING_H_
#define TESSERA_SERVICES_FINGERPRINT_SERVICE_TESTING_H_

#include <sys/resource.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "services/fingerprint/fingerprint_service.h"
#include "services/server/service_host.h"
#include "tessera/v1/fingerprint.grpc.pb.h"

namespace tessera {
namespace fingerprint {
namespace testing {

// A FingerprintService hosted on loopback (gRPC port 0, no metrics server).
class TestServer {
 public:
  static absl::StatusOr<std::unique_ptr<TestServer>> Start(FingerprintServiceOptions options,
                                                           const std::string& device = "cpu") {
    std::unique_ptr<TestServer> s(new TestServer);
    ServerOptions server;
    server.grpc_port = 0;
    server.metrics_port = -1;
    server.device = device;
    TESSERA_ASSIGN_OR_RETURN(s->service_, FingerprintServiceImpl::Create(server, std::move(options)));
    s->host_ = std::make_unique<ServiceHost>(server);
    s->host_->AddService(s->service_.get());
    TESSERA_RETURN_IF_ERROR(s->host_->Start().status());
    s->stub_ = v1::FingerprintService::NewStub(s->host_->InProcessChannel());
    return s;
  }
  ~TestServer() {
    host_->Drain();
    host_.reset();
  }
  v1::FingerprintService::Stub& stub() { return *stub_; }
  FingerprintServiceImpl& service() { return *service_; }
  ServiceHost& host() { return *host_; }

 private:
  TestServer() = default;
  std::unique_ptr<FingerprintServiceImpl> service_;
  std::unique_ptr<ServiceHost> host_;
  std::unique_ptr<v1::FingerprintService::Stub> stub_;
};

// NIST xyt text (top-left origin, degrees) of `points`.
inline std::string XytRecord(const std::vector<MinutiaPoint>& points) {
  std::string text;
  for (const MinutiaPoint& m : points) {
    int deg = static_cast<int>(std::lround(m.theta * 180.0 / M_PI)) % 360;
    if (deg < 0) deg += 360;
    absl::StrAppend(&text, static_cast<int>(std::lround(m.x)), " ", static_cast<int>(std::lround(m.y)), " ", deg,
                    " 60\n");
  }
  return text;
}

inline v1::FingerprintTemplate XytTemplate(const std::vector<MinutiaPoint>& points) {
  v1::FingerprintTemplate t;
  t.set_data(XytRecord(points));
  t.set_format(v1::TEMPLATE_FORMAT_XYT);
  return t;
}

// Enrolls templates[i] as "<prefix><i>" through FingerprintGallery (the
// EnrollStream path without the wire).
inline absl::Status EnrollAll(FingerprintServiceImpl& service, const std::vector<std::vector<MinutiaPoint>>& templates,
                              const std::string& prefix = "t") {
  std::vector<EnrollItem> items;
  for (size_t i = 0; i < templates.size(); ++i) {
    items.push_back({absl::StrCat(prefix, i), XytRecord(templates[i]), TemplateFormat::kXyt, 0});
  }
  TESSERA_ASSIGN_OR_RETURN(std::vector<absl::Status> statuses, service.gallery().EnrollBatch(items));
  for (size_t i = 0; i < statuses.size(); ++i) {
    if (!statuses[i].ok()) return Annotate(statuses[i], absl::StrCat("template ", i));
  }
  return absl::OkStatus();
}

// User + system CPU seconds of this process (all threads).
inline double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}

}  // namespace testing
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_SERVICE_TESTING_H_

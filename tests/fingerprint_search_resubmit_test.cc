// Issue 39: SchedulerService.Submit of a fingerprint.search spec under a known
// request_id returns the existing job after it succeeded, failed (its
// deadline passed while it searched: DEADLINE_EXCEEDED), was cancelled while
// searching, and after a restart on the same job store and state directory;
// another spec under the id is ALREADY_EXISTS naming it
// (services/jobs/testing/resubmission.h). The gallery (the server's, which
// outlives a scheduler restart) is 2000 synthetic templates on the CPU.
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/status.h"
#include "kernels/fingerprint/test_templates.h"
#include "services/fingerprint/search_engine.h"
#include "services/jobs/testing/resubmission.h"
#include "services/scheduler/scheduler_service.h"
#include "tessera/v1/fingerprint.pb.h"

namespace tessera {
namespace {

using jobs::testing::KindRequest;
using jobs::testing::SubmitAnswer;

constexpr int kGallery = 2000;
constexpr int kSlowProbes = 400;  // x 2000 templates: seconds on one core

class FingerprintSearchKind : public jobs::testing::ResubmitKind {
 public:
  static absl::StatusOr<std::unique_ptr<FingerprintSearchKind>> Create(const std::string& /*data_dir*/) {
    std::unique_ptr<FingerprintSearchKind> kind(new FingerprintSearchKind());
    fingerprint::SearcherOptions options;
    options.device = "cpu";
    options.chunk_templates = 25;  // cancel and deadline are looked at every 25 templates
    TESSERA_ASSIGN_OR_RETURN(kind->searcher_, fingerprint::CreateSearcher(options));
    kind->points_ = fingerprint::testing::SyntheticTemplates(kGallery, 39);
    std::vector<std::shared_ptr<const fingerprint::StoredTemplate>> entries;
    for (int i = 0; i < kGallery; ++i) {
      auto t = std::make_shared<fingerprint::StoredTemplate>();
      t->id = absl::StrCat("e", i);
      t->minutiae = kind->points_[i];
      t->seq = i + 1;
      entries.push_back(std::move(t));
    }
    TESSERA_RETURN_IF_ERROR(kind->searcher_->Add(entries));
    return kind;
  }
  ~FingerprintSearchKind() override { Stop(); }

  absl::StatusOr<std::shared_ptr<const jobs::Engine>> CreateEngine(const std::string&) override {
    return std::make_shared<fingerprint::SearchEngine>(searcher_.get(),
                                                       fingerprint::SearchLimits{100, kSlowProbes, 1 << 20});
  }
  absl::Status Attach(scheduler::Scheduler* scheduler, const std::string&) override {
    service_ = std::make_unique<SchedulerServiceImpl>(scheduler);
    return absl::OkStatus();
  }
  void DestroyService() override { service_.reset(); }

  // kFails is kSlow with a deadline 300 ms after its first submit (a resubmit
  // repeats the request: the same deadline).
  absl::StatusOr<SubmitAnswer> Submit(KindRequest which, const std::string& request_id) override {
    v1::SearchBatchRequest search;
    const bool slow = which == KindRequest::kSlow || which == KindRequest::kFails;
    for (int p = 0; p < (slow ? kSlowProbes : 2); ++p) *search.add_probes() = Probe(points_[(7 * p + 3) % kGallery]);
    search.set_top_k(which == KindRequest::kChanged ? 5 : 4);
    v1::SubmitJobRequest request;
    request.set_request_id(request_id);
    request.mutable_spec()->set_kind("fingerprint.search");
    request.mutable_spec()->mutable_spec()->PackFrom(search);
    if (which == KindRequest::kFails) {
      auto [at, inserted] = deadlines_.try_emplace(request_id, absl::ToUnixMillis(absl::Now() + absl::Milliseconds(300)));
      request.set_deadline_unix_ms(at->second);
    }
    grpc::ServerContext context;
    v1::JobInfo info;
    TESSERA_RETURN_IF_ERROR(FromGrpcStatus(service_->Submit(&context, &request, &info)));
    return SubmitAnswer{info.job_id(), info.state()};
  }
  absl::Status Cancel(const std::string& job_id) override {
    v1::JobInfo status;
    return jobs::testing::CallJobRpc(*service_, &SchedulerServiceImpl::Cancel, job_id, &status);
  }
  // Two probes, each found first as itself.
  absl::Status ReadResult(const std::string& job_id) override {
    v1::JobResult result;
    TESSERA_RETURN_IF_ERROR(jobs::testing::CallJobRpc(*service_, &SchedulerServiceImpl::GetResult, job_id, &result));
    v1::SearchBatchResponse response;
    if (!result.result().UnpackTo(&response) || response.results_size() != 2 ||
        response.results(0).candidates_size() != 4 || response.results(0).candidates(0).id() != "e3") {
      return absl::InternalError(absl::StrCat("result: ", result.ShortDebugString().substr(0, 300)));
    }
    return absl::OkStatus();
  }

 private:
  FingerprintSearchKind() = default;

  // NIST xyt text: x y degrees quality, a line per minutia.
  static v1::FingerprintTemplate Probe(const std::vector<fingerprint::MinutiaPoint>& points) {
    v1::FingerprintTemplate t;
    t.set_format(v1::TEMPLATE_FORMAT_XYT);
    for (const fingerprint::MinutiaPoint& m : points) {
      const int deg = (static_cast<int>(std::lround(m.theta * 180.0 / M_PI)) % 360 + 360) % 360;
      t.mutable_data()->append(absl::StrCat(std::lround(m.x), " ", std::lround(m.y), " ", deg, " 60\n"));
    }
    return t;
  }

  std::unique_ptr<fingerprint::GallerySearcher> searcher_;
  std::vector<std::vector<fingerprint::MinutiaPoint>> points_;
  std::unique_ptr<SchedulerServiceImpl> service_;
  std::map<std::string, int64_t> deadlines_;  // request id -> its kFails deadline
};

TESSERA_RESUBMISSION_TESTS(FingerprintSearchResubmitTest, FingerprintSearchKind, "fp")

}  // namespace
}  // namespace tessera

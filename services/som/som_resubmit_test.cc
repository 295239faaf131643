// Issue 39: SomAtlasService.CreateAtlas under a known request_id returns the
// existing job after it succeeded (its atlas exists now: the original bug
// answered "atlas ... already exists", code 6), failed (feature names that
// do not fit the corpus, found when the job reads it), was cancelled while
// training, and after a restart on the same job store and state directory;
// another request under the id is ALREADY_EXISTS naming it
// (services/jobs/testing/resubmission.h). Small synthetic corpora on the CPU.
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/status.h"
#include "services/jobs/testing/resubmission.h"
#include "services/som/corpus.h"
#include "services/som/som_service.h"
#include "services/som/synthetic.h"
#include "services/som/testing/topic_corpus.h"
#include "services/som/training_engine.h"
#include "tessera/v1/som.grpc.pb.h"

namespace tessera {
namespace {

using jobs::testing::KindRequest;
using jobs::testing::SubmitAnswer;

som::SparseBinaryMatrix Corpus(int64_t docs, int64_t features, uint64_t seed) {
  som::SyntheticCorpusOptions o = som::testing::TopicCorpus(docs, features, /*grid=*/4, seed);
  o.mean_nnz = 6;
  o.features_per_topic = 10;
  return som::GenerateSyntheticCorpus(o);
}

class SomKind : public jobs::testing::ResubmitKind {
 public:
  // Writes the corpora under `data` (<dir>/data); atlases go to <dir>/atlases.
  static absl::StatusOr<std::unique_ptr<SomKind>> Create(const std::string& data) {
    const std::string dir = std::filesystem::path(data).parent_path().string();
    std::unique_ptr<SomKind> kind(new SomKind(dir));
    TESSERA_RETURN_IF_ERROR(som::WriteCsrBinary(dir + "/data/small.csr", Corpus(200, 60, 9)));
    TESSERA_RETURN_IF_ERROR(som::WriteCsrBinary(dir + "/data/large.csr", Corpus(3000, 300, 11)));
    std::vector<std::string> short_names;
    for (int k = 0; k < 10; ++k) short_names.push_back(absl::StrCat("x", k));
    TESSERA_RETURN_IF_ERROR(som::WriteLines(dir + "/data/short_names.txt", short_names));
    return kind;
  }
  ~SomKind() override { Stop(); }

  absl::StatusOr<std::shared_ptr<const jobs::Engine>> CreateEngine(const std::string& state_dir) override {
    ServerOptions options;
    options.data_roots = {dir_ + "/data"};
    options.atlas_dir = dir_ + "/atlases";
    options.device = "cpu";
    TESSERA_ASSIGN_OR_RETURN(service_, SomAtlasServiceImpl::Create(options));
    TESSERA_ASSIGN_OR_RETURN(som::TrainingEngineOptions engine_options, service_->TrainingEngineOptions(state_dir));
    return som::NewTrainingEngine(std::move(engine_options));
  }
  absl::Status Attach(scheduler::Scheduler* scheduler, const std::string& state_dir) override {
    return service_->AttachScheduler(scheduler, state_dir);
  }
  void DestroyService() override { service_.reset(); }

  // Each request id trains the atlas "atlas-<request id>".
  absl::StatusOr<SubmitAnswer> Submit(KindRequest which, const std::string& request_id) override {
    v1::CreateAtlasRequest request;
    request.set_request_id(request_id);
    request.set_atlas_id("atlas-" + request_id);
    request.mutable_corpus()->set_path(which == KindRequest::kSlow ? "large.csr" : "small.csr");
    v1::AtlasOptions* o = request.mutable_options();
    o->set_width(which == KindRequest::kChanged ? 4 : 3);
    o->set_height(3);
    o->set_epochs(4);
    o->set_radius_decay_epochs(2);
    o->set_device("cpu");
    if (which == KindRequest::kFails) request.mutable_corpus()->set_feature_names_path("short_names.txt");
    if (which == KindRequest::kSlow) {  // never ends unless cancelled
      o->set_width(32);
      o->set_height(32);
      o->set_epochs(100000);
      o->set_radius_decay_epochs(100000);
      o->set_convergence_tolerance(0);
    }
    grpc::ServerContext context;
    v1::CreateAtlasResponse response;
    TESSERA_RETURN_IF_ERROR(FromGrpcStatus(service_->CreateAtlas(&context, &request, &response)));
    if (response.atlas_id() != request.atlas_id()) {
      return absl::InternalError(absl::StrCat("answered atlas '", response.atlas_id(), "'"));
    }
    atlases_[response.job().job_id()] = response.atlas_id();
    return SubmitAnswer{response.job().job_id(), response.job().state()};
  }
  absl::Status Cancel(const std::string& job_id) override {
    v1::JobStatus status;
    return jobs::testing::CallJobRpc(*service_, &SomAtlasServiceImpl::CancelJob, job_id, &status);
  }
  // The atlas the job trained is served.
  absl::Status ReadResult(const std::string& job_id) override {
    grpc::ServerContext context;
    v1::AtlasRequest request;
    request.set_atlas_id(atlases_[job_id]);
    v1::AtlasSummary summary;
    TESSERA_RETURN_IF_ERROR(FromGrpcStatus(service_->GetAtlas(&context, &request, &summary)));
    if (summary.width() != 3 || summary.documents() != 200) {
      return absl::InternalError(absl::StrCat("atlas ", summary.ShortDebugString()));
    }
    return absl::OkStatus();
  }

 private:
  explicit SomKind(std::string dir) : dir_(std::move(dir)) {}
  const std::string dir_;
  std::unique_ptr<SomAtlasServiceImpl> service_;
  std::map<std::string, std::string> atlases_;  // job id -> atlas id
};

TESSERA_RESUBMISSION_TESTS(SomResubmitTest, SomKind, "som")

}  // namespace
}  // namespace tessera

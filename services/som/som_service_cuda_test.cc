// SomAtlasService on the CUDA backend (skipped without a GPU): an atlas
// trained as a job (through the scheduler's som.train engine) on the GPU,
// saved and served; projections on CUDA and on
// the CPU reference agree exactly (the feature-major BMU kernels are
// bit-identical), training documents land in their recorded cells, and the
// GPU-trained map's quality matches a CPU-trained one within 1e-4 relative.
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/testing/gpu_test.h"
#include "services/scheduler/testing/in_process_scheduler.h"
#include "services/server/service_host.h"
#include "services/som/som_service.h"
#include "services/som/synthetic.h"
#include "services/som/testing/topic_corpus.h"
#include "services/som/training_engine.h"
#include "tessera/v1/som.grpc.pb.h"

namespace tessera {
namespace {

std::chrono::system_clock::time_point In(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

TEST(SomAtlasServiceCuda, TrainsOnTheGpuAndProjectsLikeTheCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string root = std::string(tmp != nullptr ? tmp : "/tmp") + "/som_cuda";
  ServerOptions options;
  options.grpc_port = 0;
  options.metrics_port = -1;
  options.device = "cuda";
  options.atlas_dir = root + "/atlases";
  auto service = SomAtlasServiceImpl::Create(options);
  ASSERT_TRUE(service.ok()) << service.status();
  // As `tessera serve` (role all): the som.train engine, a scheduler with an
  // in-process worker, the service attached to it.
  const std::string state_dir = root + "/state";
  auto engine_options = (*service)->TrainingEngineOptions(state_dir);
  ASSERT_TRUE(engine_options.ok()) << engine_options.status();
  auto engine = som::NewTrainingEngine(*std::move(engine_options));
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto jobs = scheduler::testing::InProcessScheduler::Start(state_dir, {*engine});
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_TRUE((*service)->AttachScheduler(&(*jobs)->scheduler(), state_dir).ok());
  ServiceHost host(options);
  host.AddService(service->get());
  auto ports = host.Start();
  ASSERT_TRUE(ports.ok()) << ports.status();
  auto stub = v1::SomAtlasService::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", ports->grpc_port), grpc::InsecureChannelCredentials()));

  const som::SparseBinaryMatrix corpus =
      som::GenerateSyntheticCorpus(som::testing::TopicCorpus(20000, 3000, /*grid=*/8, /*seed=*/21));
  v1::UploadedCorpus uploaded;
  {
    grpc::ClientContext context;
    context.set_deadline(In(60));
    auto writer = stub->UploadCorpus(&context, &uploaded);
    v1::CorpusChunk chunk;
    chunk.set_num_features(corpus.cols());
    for (int64_t r = 0; r < corpus.rows(); ++r) {
      v1::SparseDocument* d = chunk.add_rows();
      for (int32_t v : corpus.row(r)) d->add_features(v);
      d->set_id(absl::StrCat("doc", r));
      if (chunk.rows_size() == 5000) {
        ASSERT_TRUE(writer->Write(chunk));
        chunk.Clear();
      }
    }
    if (chunk.rows_size() > 0) {
      ASSERT_TRUE(writer->Write(chunk));
    }
    writer->WritesDone();
    grpc::Status s = writer->Finish();
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  // The same map on each backend.
  std::map<std::string, double> qe;
  for (const char* device : {"cuda", "cpu"}) {
    v1::CreateAtlasRequest request;
    request.mutable_corpus()->set_corpus_id(uploaded.corpus_id());
    request.set_atlas_id(absl::StrCat("map-", device));
    request.mutable_options()->set_width(16);
    request.mutable_options()->set_height(12);
    request.mutable_options()->set_epochs(10);
    request.mutable_options()->set_convergence_tolerance(0);
    request.mutable_options()->set_holdout_fraction(0.05);
    request.mutable_options()->set_device(device);
    v1::CreateAtlasResponse created;
    grpc::ClientContext context;
    ASSERT_TRUE(stub->CreateAtlas(&context, request, &created).ok());
    grpc::ClientContext watch_context;
    watch_context.set_deadline(In(300));
    v1::JobRef job;
    job.set_job_id(created.job().job_id());
    auto reader = stub->WatchJob(&watch_context, job);
    v1::AtlasProgress p, last;
    while (reader->Read(&p)) last = p;
    ASSERT_TRUE(reader->Finish().ok());
    ASSERT_EQ(last.state(), v1::JOB_STATE_SUCCEEDED) << device << ": " << last.message();
    v1::AtlasSummary summary;
    grpc::ClientContext get_context;
    v1::AtlasRequest atlas;
    atlas.set_atlas_id(request.atlas_id());
    ASSERT_TRUE(stub->GetAtlas(&get_context, atlas, &summary).ok());
    qe[device] = summary.training_quality().qe_euclidean();
  }
  EXPECT_NEAR(qe["cuda"], qe["cpu"], 1e-4 * qe["cpu"]);

  // Training documents of the GPU map, by cell.
  std::map<std::string, int> recorded;
  for (int node = 0; node < 16 * 12; ++node) {
    v1::GetCellRequest request;
    request.set_atlas_id("map-cuda");
    request.set_node(node);
    request.set_page_size(10000);
    v1::CellResponse cell;
    grpc::ClientContext context;
    ASSERT_TRUE(stub->GetCell(&context, request, &cell).ok());
    for (const std::string& id : cell.document_ids()) recorded[id] = node;
  }
  ASSERT_EQ(static_cast<int64_t>(recorded.size()), corpus.rows() - corpus.rows() / 20);

  v1::ProjectRequest project;
  project.set_atlas_id("map-cuda");
  for (int64_t r = 0; r < 2000; ++r) {
    v1::SparseDocument* d = project.add_documents();
    for (int32_t v : corpus.row(r)) d->add_features(v);
    d->set_id(absl::StrCat("doc", r));
  }
  v1::ProjectResponse on[2];
  for (int k = 0; k < 2; ++k) {
    project.set_device(k == 0 ? "cuda" : "cpu");
    grpc::ClientContext context;
    grpc::Status s = stub->Project(&context, project, &on[k]);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(on[k].documents_size(), 2000);
  }
  int checked = 0;
  for (int d = 0; d < 2000; ++d) {
    const v1::ProjectedDocument& gpu = on[0].documents(d);
    const v1::ProjectedDocument& cpu = on[1].documents(d);
    ASSERT_EQ(gpu.node(), cpu.node()) << "doc " << d;
    ASSERT_EQ(gpu.second_node(), cpu.second_node()) << "doc " << d;
    ASSERT_EQ(gpu.distance(), cpu.distance()) << "doc " << d;
    auto it = recorded.find(gpu.id());
    if (it == recorded.end()) continue;  // held out
    EXPECT_EQ(gpu.node(), it->second) << gpu.id();
    ++checked;
  }
  EXPECT_GT(checked, 1800);
}

}  // namespace
}  // namespace tessera

// End-to-end tests of tessera.v1.SomAtlasService over the scheduler: an
// in-process ServiceHost on loopback (port 0) driven over a real channel, the
// service submitting to a scheduler with an in-process worker running the
// som.train engine and a SQLite store (services/scheduler/testing), training
// small atlases of synthetic topic-structured corpora on the CPU backend.
#include "services/som/som_service.h"

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "services/jobs/engine.h"
#include "services/scheduler/testing/in_process_scheduler.h"
#include "services/scheduler/testing/service_testing.h"
#include "services/server/service_host.h"
#include "services/som/atlas.h"
#include "services/som/corpus.h"
#include "services/som/synthetic.h"
#include "services/som/testing/topic_corpus.h"
#include "services/som/trainer.h"
#include "services/som/training_engine.h"
#include "tessera/v1/jobs.pb.h"
#include "tessera/v1/som.grpc.pb.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using scheduler::testing::Exists;
using scheduler::testing::In;
using scheduler::testing::TmpDir;

// Long enough (24x24 map, 4000 documents: about 2 s on the CPU) to stop it
// safely two epochs in.
constexpr int kStoppedJobEpochs = 150;

// A fresh directory for one test: <tmp>/<name> holding data/ (the data root).
std::string MakeRoot(const std::string& name) {
  const std::string dir = TmpDir() + "/" + name;
  mkdir(dir.c_str(), 0755);
  mkdir((dir + "/data").c_str(), 0755);
  return dir;
}

som::SparseBinaryMatrix SmallCorpus(int64_t docs, int64_t features, uint64_t seed) {
  som::SyntheticCorpusOptions o = som::testing::TopicCorpus(docs, features, /*grid=*/4, seed);
  o.mean_nnz = 6;
  o.features_per_topic = 10;
  return som::GenerateSyntheticCorpus(o);
}

std::vector<std::string> Names(const char* prefix, int64_t n) {
  std::vector<std::string> out;
  for (int64_t k = 0; k < n; ++k) out.push_back(absl::StrCat(prefix, k));
  return out;
}

// What `tessera serve` (role all) hosts for SOM atlases: the service on
// <root>/atlases (data root <root>/data), a som.train engine made from its
// options, a scheduler over a store in <root>/state with the service attached
// to it, and a host on a loopback port. Destroying and re-creating it on the
// same root is a restart.
class TestServer {
 public:
  TestServer(const std::string& root, SomServiceOptions service_options = {},
             scheduler::testing::InProcessSchedulerOptions scheduler_options = {}) {
    ServerOptions options = scheduler::testing::LoopbackServerOptions();
    options.data_roots = {root + "/data"};
    options.atlas_dir = root + "/atlases";
    options.max_volume_bytes = 64 << 20;
    if (service_options.max_nodes == (int64_t{1} << 20)) service_options.max_nodes = 4096;
    state_dir_ = root + "/state";
    auto service = SomAtlasServiceImpl::Create(options, service_options);
    status_ = service.status();
    if (!service.ok()) return;
    service_ = *std::move(service);
    absl::StatusOr<som::TrainingEngineOptions> engine_options = service_->TrainingEngineOptions(state_dir_);
    status_ = engine_options.status();
    if (!engine_options.ok()) return;
    auto engine = som::NewTrainingEngine(*std::move(engine_options));
    status_ = engine.status();
    if (!engine.ok()) return;
    auto jobs = scheduler::testing::InProcessScheduler::Start(state_dir_, {*engine}, scheduler_options);
    status_ = jobs.status();
    if (!jobs.ok()) return;
    jobs_ = *std::move(jobs);
    status_ = service_->AttachScheduler(&jobs_->scheduler(), state_dir_);
    if (!status_.ok()) return;
    auto hosted = scheduler::testing::StartLoopbackHost(options, service_.get());
    status_ = hosted.status();
    if (!hosted.ok()) return;
    host_ = std::move(hosted->host);
    channel_ = std::move(hosted->channel);
    stub_ = v1::SomAtlasService::NewStub(channel_);
  }
  ~TestServer() {
    host_.reset();  // first: stops the server
    jobs_.reset();  // stops the scheduler (running jobs are re-queued); its engine calls the service
    service_.reset();
  }

  const absl::Status& status() const { return status_; }
  v1::SomAtlasService::Stub& stub() { return *stub_; }
  SomAtlasServiceImpl& service() { return *service_; }
  scheduler::Scheduler& scheduler() { return jobs_->scheduler(); }
  const std::string& state_dir() const { return state_dir_; }

  grpc::Status Upload(const som::SparseBinaryMatrix& m, const std::vector<std::string>& names,
                      const std::vector<std::string>& ids, int64_t rows_per_chunk, v1::UploadedCorpus* out,
                      int64_t num_features = -1) {
    grpc::ClientContext context;
    context.set_deadline(In(std::chrono::seconds(60)));
    auto writer = stub_->UploadCorpus(&context, out);
    v1::CorpusChunk chunk;
    chunk.set_num_features(num_features >= 0 ? num_features : m.cols());
    for (const std::string& n : names) chunk.add_feature_names(n);
    for (int64_t r = 0; r < m.rows(); ++r) {
      v1::SparseDocument* d = chunk.add_rows();
      for (int32_t v : m.row(r)) d->add_features(v);
      if (r < static_cast<int64_t>(ids.size())) d->set_id(ids[r]);
      if (chunk.rows_size() == rows_per_chunk) {
        if (!writer->Write(chunk)) break;
        chunk.Clear();
      }
    }
    if (chunk.rows_size() > 0 || chunk.feature_names_size() > 0 || m.rows() == 0) writer->Write(chunk);
    writer->WritesDone();
    return writer->Finish();
  }

  grpc::Status Create(const v1::CreateAtlasRequest& request, v1::CreateAtlasResponse* out) {
    grpc::ClientContext context;
    context.set_deadline(In(std::chrono::seconds(30)));
    return stub_->CreateAtlas(&context, request, out);
  }

  std::vector<v1::AtlasProgress> Watch(const std::string& job_id, grpc::Status* status = nullptr) {
    grpc::ClientContext context;
    context.set_deadline(In(std::chrono::seconds(120)));
    v1::JobRef request;
    request.set_job_id(job_id);
    auto reader = stub_->WatchJob(&context, request);
    std::vector<v1::AtlasProgress> out;
    v1::AtlasProgress p;
    while (reader->Read(&p)) out.push_back(p);
    grpc::Status s = reader->Finish();
    if (status != nullptr) *status = s;
    return out;
  }

  grpc::Status GetAtlas(const std::string& id, v1::AtlasSummary* out) {
    grpc::ClientContext context;
    v1::AtlasRequest request;
    request.set_atlas_id(id);
    return stub_->GetAtlas(&context, request, out);
  }

  grpc::Status Project(const v1::ProjectRequest& request, v1::ProjectResponse* out) {
    grpc::ClientContext context;
    context.set_deadline(In(std::chrono::seconds(30)));
    return stub_->Project(&context, request, out);
  }

  grpc::Status Cell(const v1::GetCellRequest& request, v1::CellResponse* out) {
    grpc::ClientContext context;
    return stub_->GetCell(&context, request, out);
  }

  // The whole codebook stream: header dims and the floats.
  grpc::Status Codebook(const v1::GetCodebookRequest& request, std::vector<int64_t>* dims, std::vector<float>* data,
                        int* chunks) {
    grpc::ClientContext context;
    context.set_deadline(In(std::chrono::seconds(30)));
    auto reader = stub_->GetCodebook(&context, request);
    v1::ArrayChunk chunk;
    std::string bytes;
    *chunks = 0;
    while (reader->Read(&chunk)) {
      if (*chunks == 0) dims->assign(chunk.header().dims().begin(), chunk.header().dims().end());
      EXPECT_EQ(chunk.offset(), static_cast<int64_t>(bytes.size()));
      bytes += chunk.data();
      ++*chunks;
    }
    data->resize(bytes.size() / 4);
    std::memcpy(data->data(), bytes.data(), data->size() * 4);
    return reader->Finish();
  }

  grpc::Status GetJob(const std::string& job_id, v1::JobStatus* out) {
    grpc::ClientContext context;
    v1::JobRef request;
    request.set_job_id(job_id);
    return stub_->GetJob(&context, request, out);
  }

 private:
  absl::Status status_;
  std::string state_dir_;
  std::unique_ptr<SomAtlasServiceImpl> service_;
  std::unique_ptr<scheduler::testing::InProcessScheduler> jobs_;
  std::unique_ptr<ServiceHost> host_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::SomAtlasService::Stub> stub_;
};

v1::CreateAtlasRequest AtlasRequestFor(const std::string& corpus_id, const std::string& atlas_id, int width,
                                       int height, int epochs) {
  v1::CreateAtlasRequest r;
  r.mutable_corpus()->set_corpus_id(corpus_id);
  r.set_atlas_id(atlas_id);
  v1::AtlasOptions* o = r.mutable_options();
  o->set_width(width);
  o->set_height(height);
  o->set_epochs(epochs);
  o->set_radius_decay_epochs(std::max(1, epochs - 2));
  o->set_device("cpu");
  return r;
}

// Trains `request` to the end and returns the final progress message.
v1::AtlasProgress TrainToEnd(TestServer& server, const v1::CreateAtlasRequest& request) {
  v1::CreateAtlasResponse created;
  grpc::Status s = server.Create(request, &created);
  EXPECT_TRUE(s.ok()) << s.error_message();
  std::vector<v1::AtlasProgress> progress = server.Watch(created.job().job_id());
  EXPECT_FALSE(progress.empty());
  return progress.empty() ? v1::AtlasProgress() : progress.back();
}

TEST(SomAtlasService, UploadTrainWatchAndQuery) {
  const std::string root = MakeRoot("end_to_end");
  // The scheduler records every progress report (by default at most one per
  // 100 ms here): WatchJob then sends every epoch as it ends.
  scheduler::testing::InProcessSchedulerOptions every_report;
  every_report.progress_interval = absl::ZeroDuration();
  TestServer server(root, {}, every_report);
  ASSERT_TRUE(server.status().ok()) << server.status();
  const int64_t docs = 600, features = 200;
  const som::SparseBinaryMatrix corpus = SmallCorpus(docs, features, 3);
  const std::vector<std::string> names = Names("feat", features), ids = Names("doc", docs);
  v1::UploadedCorpus uploaded;
  grpc::Status s = server.Upload(corpus, names, ids, 128, &uploaded);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(uploaded.documents(), docs);
  EXPECT_EQ(uploaded.features(), features);
  EXPECT_EQ(uploaded.nonzeros(), corpus.nnz());
  EXPECT_THAT(uploaded.corpus_id(), HasSubstr("corpus-"));

  v1::CreateAtlasRequest request = AtlasRequestFor(uploaded.corpus_id(), "topics", 6, 5, 8);
  request.mutable_options()->set_holdout_fraction(0.1);
  request.mutable_options()->set_convergence_tolerance(0);  // all 8 epochs
  v1::CreateAtlasResponse created;
  s = server.Create(request, &created);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(created.atlas_id(), "topics");
  EXPECT_THAT(created.job().job_id(), HasSubstr("job-"));
  std::vector<v1::AtlasProgress> progress = server.Watch(created.job().job_id());
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.front().state(), v1::JOB_STATE_QUEUED);  // from its first event
  EXPECT_EQ(progress.back().state(), v1::JOB_STATE_SUCCEEDED) << progress.back().message();
  EXPECT_EQ(progress.back().atlas_id(), "topics");
  EXPECT_EQ(progress.back().epoch(), 8);
  EXPECT_EQ(progress.back().fraction(), 1.0);
  for (const v1::AtlasProgress& p : progress) {
    EXPECT_EQ(p.job_id(), created.job().job_id());
    EXPECT_EQ(p.atlas_id(), "topics");
  }
  // Per-epoch reports: epochs in order, the radius shrinking, QE measured.
  int last_epoch = 0, epoch_messages = 0;
  double last_radius = std::numeric_limits<double>::infinity();
  for (const v1::AtlasProgress& p : progress) {
    if (p.stage() != "epoch" || p.state() != v1::JOB_STATE_RUNNING) continue;
    ++epoch_messages;
    EXPECT_GT(p.epoch(), last_epoch);
    EXPECT_LE(p.radius(), last_radius);
    EXPECT_GT(p.qe(), 0);
    EXPECT_GE(p.topographic_error(), 0);
    EXPECT_EQ(p.max_epochs(), 8);
    last_epoch = p.epoch();
    last_radius = p.radius();
  }
  EXPECT_EQ(epoch_messages, 8);  // every epoch, however fast
  // The job is the scheduler's: its state and last progress.
  v1::JobStatus job;
  s = server.GetJob(created.job().job_id(), &job);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(job.last_progress().message(), "succeeded");
  absl::StatusOr<v1::JobInfo> info = server.scheduler().Get(created.job().job_id());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->kind(), "som.train");
  EXPECT_EQ(info->attempts(), 1);

  v1::AtlasSummary summary;
  s = server.GetAtlas("topics", &summary);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(summary.width(), 6);
  EXPECT_EQ(summary.height(), 5);
  EXPECT_EQ(summary.features(), features);
  EXPECT_EQ(summary.documents(), docs - 60);
  EXPECT_EQ(summary.held_out_quality().documents(), 60);
  EXPECT_GT(summary.held_out_quality().qe_euclidean(), 0);
  EXPECT_GT(summary.training_quality().qe_euclidean(), 0);
  EXPECT_EQ(summary.epochs(), 8);
  EXPECT_EQ(summary.history_size(), 8);
  EXPECT_TRUE(Exists(summary.directory() + "/manifest.json")) << summary.directory();

  {
    grpc::ClientContext context;
    v1::ListAtlasesResponse list;
    ASSERT_TRUE(server.stub().ListAtlases(&context, v1::ListAtlasesRequest(), &list).ok());
    ASSERT_EQ(list.atlases_size(), 1);
    EXPECT_EQ(list.atlases(0).atlas_id(), "topics");
    EXPECT_EQ(list.atlases(0).history_size(), 0);
  }

  // Every cell: its documents (one page each), hit counts adding up, top
  // features strongest first with their names.
  const int nodes = 30;
  std::map<std::string, int> recorded;  // document id -> node
  int64_t hits = 0;
  for (int node = 0; node < nodes; ++node) {
    v1::GetCellRequest cell_request;
    cell_request.set_atlas_id("topics");
    cell_request.set_node(node);
    cell_request.set_page_size(10000);
    cell_request.set_top_features(5);
    v1::CellResponse cell;
    s = server.Cell(cell_request, &cell);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(cell.x(), node % 6);
    EXPECT_EQ(cell.y(), node / 6);
    EXPECT_EQ(cell.hit_count(), cell.document_ids_size());
    EXPECT_TRUE(cell.next_page_token().empty());
    hits += cell.hit_count();
    for (const std::string& id : cell.document_ids()) recorded[id] = node;
    ASSERT_EQ(cell.top_features_size(), 5);
    for (int k = 0; k < 5; ++k) {
      EXPECT_EQ(cell.top_features(k).name(), names[cell.top_features(k).feature()]);
      if (k > 0) {
        EXPECT_GE(cell.top_features(k - 1).weight(), cell.top_features(k).weight());
      }
    }
  }
  EXPECT_EQ(hits, docs - 60);
  EXPECT_EQ(static_cast<int64_t>(recorded.size()), docs - 60);

  // Paging through the fullest cell one document at a time.
  {
    std::map<int, int> per_node;
    for (const auto& [id, node] : recorded) ++per_node[node];
    int fullest = 0;
    for (const auto& [node, count] : per_node) {
      if (count > per_node[fullest]) fullest = node;
    }
    v1::GetCellRequest cell_request;
    cell_request.set_atlas_id("topics");
    cell_request.mutable_xy()->set_x(fullest % 6);
    cell_request.mutable_xy()->set_y(fullest / 6);
    cell_request.set_page_size(1);
    int pages = 0;
    std::string token;
    do {
      cell_request.set_page_token(token);
      v1::CellResponse cell;
      s = server.Cell(cell_request, &cell);
      ASSERT_TRUE(s.ok()) << s.error_message();
      ASSERT_EQ(cell.document_ids_size(), 1);
      EXPECT_EQ(recorded[cell.document_ids(0)], fullest);
      token = cell.next_page_token();
      ++pages;
    } while (!token.empty() && pages < 10000);
    EXPECT_EQ(pages, per_node[fullest]);
  }

  // Training documents project to their recorded cells; by index or by name.
  v1::ProjectRequest project;
  project.set_atlas_id("topics");
  std::vector<int> expected;
  for (int64_t r = 0; r < docs && expected.size() < 40; ++r) {
    auto it = recorded.find(ids[r]);
    if (it == recorded.end()) continue;  // held out
    v1::SparseDocument* d = project.add_documents();
    d->set_id(ids[r]);
    for (int32_t v : corpus.row(r)) {
      if (expected.size() % 2 == 0) {
        d->add_features(v);
      } else {
        d->add_feature_names(names[v]);
      }
    }
    expected.push_back(it->second);
  }
  v1::ProjectResponse projected;
  s = server.Project(project, &projected);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(projected.documents_size(), static_cast<int>(expected.size()));
  for (size_t k = 0; k < expected.size(); ++k) {
    const v1::ProjectedDocument& p = projected.documents(static_cast<int>(k));
    EXPECT_EQ(p.id(), project.documents(static_cast<int>(k)).id());
    EXPECT_EQ(p.node(), expected[k]) << p.id();
    EXPECT_EQ(p.x(), p.node() % 6);
    EXPECT_EQ(p.y(), p.node() / 6);
    EXPECT_NE(p.second_node(), p.node());
    EXPECT_GE(p.second_node(), 0);
    EXPECT_GT(p.distance(), 0);
    EXPECT_TRUE(std::isfinite(p.distance()));
  }
  EXPECT_EQ(projected.quality().documents(), static_cast<int64_t>(expected.size()));

  // The codebook: the whole of it in small chunks, then a subset; both agree
  // with each other and with the cells' top feature weights.
  std::vector<int64_t> dims;
  std::vector<float> full;
  int chunks = 0;
  v1::GetCodebookRequest codebook;
  codebook.set_atlas_id("topics");
  codebook.set_chunk_bytes(4096);
  s = server.Codebook(codebook, &dims, &full, &chunks);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(dims, (std::vector<int64_t>{nodes, features}));
  ASSERT_EQ(full.size(), static_cast<size_t>(nodes * features));
  EXPECT_EQ(chunks, static_cast<int>((nodes * features * 4 + 4095) / 4096));
  codebook.add_features(7);
  codebook.add_features(2);
  codebook.set_chunk_bytes(0);
  std::vector<float> subset;
  s = server.Codebook(codebook, &dims, &subset, &chunks);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(dims, (std::vector<int64_t>{nodes, 2}));
  ASSERT_EQ(subset.size(), static_cast<size_t>(2 * nodes));
  for (int i = 0; i < nodes; ++i) {
    EXPECT_EQ(subset[i], full[7 * nodes + i]);
    EXPECT_EQ(subset[nodes + i], full[2 * nodes + i]);
  }
  v1::GetCellRequest cell_request;
  cell_request.set_atlas_id("topics");
  cell_request.set_node(13);
  v1::CellResponse cell;
  ASSERT_TRUE(server.Cell(cell_request, &cell).ok());
  ASSERT_GT(cell.top_features_size(), 0);
  EXPECT_EQ(cell.top_features(0).weight(), full[cell.top_features(0).feature() * nodes + 13]);
  for (int v = 0; v < features; ++v) EXPECT_LE(full[v * nodes + 13], cell.top_features(0).weight());
}

TEST(SomAtlasService, AtlasesSurviveARestartAndBrokenOnesAreSkipped) {
  const std::string root = MakeRoot("restart");
  const som::SparseBinaryMatrix corpus = SmallCorpus(300, 80, 5);
  v1::AtlasSummary before;
  v1::ProjectRequest project;
  project.set_atlas_id("kept");
  for (int r = 0; r < 10; ++r) {
    v1::SparseDocument* d = project.add_documents();
    for (int32_t v : corpus.row(r)) d->add_features(v);
  }
  v1::ProjectResponse projected_before;
  {
    TestServer server(root);
    ASSERT_TRUE(server.status().ok()) << server.status();
    v1::UploadedCorpus uploaded;
    ASSERT_TRUE(server.Upload(corpus, {}, {}, 1000, &uploaded).ok());
    v1::AtlasProgress end = TrainToEnd(server, AtlasRequestFor(uploaded.corpus_id(), "kept", 4, 4, 5));
    ASSERT_EQ(end.state(), v1::JOB_STATE_SUCCEEDED) << end.message();
    ASSERT_TRUE(server.GetAtlas("kept", &before).ok());
    ASSERT_TRUE(server.Project(project, &projected_before).ok());
  }
  // Debris a restart must survive: a directory without a loadable atlas, a
  // truncated manifest, a name that is no atlas id, a stray file.
  mkdir((root + "/atlases/empty").c_str(), 0755);
  mkdir((root + "/atlases/broken").c_str(), 0755);
  std::ofstream(root + "/atlases/broken/manifest.json") << "{\"format\": ";
  mkdir((root + "/atlases/.hidden").c_str(), 0755);
  std::ofstream(root + "/atlases/stray.txt") << "x";

  TestServer server(root);
  ASSERT_TRUE(server.status().ok()) << server.status();
  v1::AtlasSummary after;
  grpc::Status s = server.GetAtlas("kept", &after);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(after.width(), 4);
  EXPECT_EQ(after.documents(), 300);
  EXPECT_EQ(after.features(), 80);
  EXPECT_EQ(after.epochs(), before.epochs());
  EXPECT_EQ(after.history_size(), before.history_size());
  EXPECT_DOUBLE_EQ(after.training_quality().qe_euclidean(), before.training_quality().qe_euclidean());
  EXPECT_EQ(after.created(), before.created());
  v1::ProjectResponse projected_after;
  ASSERT_TRUE(server.Project(project, &projected_after).ok());
  ASSERT_EQ(projected_after.documents_size(), projected_before.documents_size());
  for (int k = 0; k < projected_after.documents_size(); ++k) {
    EXPECT_EQ(projected_after.documents(k).node(), projected_before.documents(k).node());
    EXPECT_DOUBLE_EQ(projected_after.documents(k).distance(), projected_before.documents(k).distance());
  }
  EXPECT_EQ(server.GetAtlas("broken", &after).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::ClientContext context;
  v1::ListAtlasesResponse list;
  ASSERT_TRUE(server.stub().ListAtlases(&context, v1::ListAtlasesRequest(), &list).ok());
  ASSERT_EQ(list.atlases_size(), 1);

  // Deleting removes the files too: gone after another restart.
  {
    grpc::ClientContext delete_context;
    v1::AtlasRequest request;
    request.set_atlas_id("kept");
    v1::DeleteAtlasResponse deleted;
    s = server.stub().DeleteAtlas(&delete_context, request, &deleted);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_FALSE(Exists(root + "/atlases/kept"));
    EXPECT_EQ(server.GetAtlas("kept", &after).error_code(), grpc::StatusCode::NOT_FOUND);
    grpc::ClientContext again;
    EXPECT_EQ(server.stub().DeleteAtlas(&again, request, &deleted).error_code(), grpc::StatusCode::NOT_FOUND);
  }
}

TEST(SomAtlasService, TrainsFromServerFilesWithNamesAndIds) {
  const std::string root = MakeRoot("files");
  const som::SparseBinaryMatrix corpus = SmallCorpus(200, 60, 9);
  const std::vector<std::string> names = Names("go:", 60), ids = Names("gene", 200);
  ASSERT_TRUE(som::WriteCsrBinary(root + "/data/c.csr", corpus).ok());
  ASSERT_TRUE(som::WriteLibsvm(root + "/data/c.svm", corpus).ok());
  ASSERT_TRUE(som::WriteLines(root + "/data/names.txt", names).ok());
  ASSERT_TRUE(som::WriteLines(root + "/data/ids.txt", ids).ok());
  ASSERT_TRUE(som::WriteLines(root + "/data/short_names.txt", Names("x", 10)).ok());
  TestServer server(root);
  ASSERT_TRUE(server.status().ok()) << server.status();

  for (const char* file : {"c.csr", "c.svm"}) {
    SCOPED_TRACE(file);
    v1::CreateAtlasRequest request = AtlasRequestFor("", absl::StrCat("from-", file), 3, 3, 4);
    request.mutable_corpus()->set_path(file);  // relative to the data root
    request.mutable_corpus()->set_feature_names_path("names.txt");
    request.mutable_corpus()->set_document_ids_path(root + "/data/ids.txt");
    v1::CreateAtlasResponse created;
    grpc::Status s = server.Create(request, &created);
    ASSERT_TRUE(s.ok()) << s.error_message();
    const std::vector<v1::AtlasProgress> progress = server.Watch(created.job().job_id());
    ASSERT_FALSE(progress.empty());
    const v1::AtlasProgress& end = progress.back();
    ASSERT_EQ(end.state(), v1::JOB_STATE_SUCCEEDED) << end.message();
    // Epochs faster than the scheduler records progress: in order, each at
    // most once, the last one there (from the atlas's history).
    int last_epoch = 0;
    for (const v1::AtlasProgress& p : progress) {
      if (p.stage() != "epoch") continue;
      EXPECT_GT(p.epoch(), last_epoch);
      EXPECT_GT(p.qe(), 0);
      EXPECT_EQ(p.max_epochs(), 4);
      last_epoch = p.epoch();
    }
    EXPECT_EQ(last_epoch, 4);
    v1::AtlasSummary summary;
    ASSERT_TRUE(server.GetAtlas(request.atlas_id(), &summary).ok());
    EXPECT_EQ(summary.features(), 60);
    EXPECT_EQ(summary.documents(), 200);
    int64_t hits = 0;
    for (int node = 0; node < 9; ++node) {
      v1::GetCellRequest cell_request;
      cell_request.set_atlas_id(request.atlas_id());
      cell_request.set_node(node);
      v1::CellResponse cell;
      ASSERT_TRUE(server.Cell(cell_request, &cell).ok());
      hits += cell.hit_count();
      for (int k = 0; k < cell.document_ids_size(); ++k) {
        EXPECT_EQ(cell.document_ids(k), ids[cell.document_indices(k)]);
      }
      for (const v1::FeatureWeight& f : cell.top_features()) EXPECT_EQ(f.name(), names[f.feature()]);
    }
    EXPECT_EQ(hits, 200);
  }

  // Problems found while reading fail the job, saying what is wrong.
  v1::CreateAtlasRequest request = AtlasRequestFor("", "wrong-names", 3, 3, 4);
  request.mutable_corpus()->set_path("c.csr");
  request.mutable_corpus()->set_feature_names_path("short_names.txt");
  v1::AtlasProgress end = TrainToEnd(server, request);
  EXPECT_EQ(end.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(end.message(), HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(end.message(), HasSubstr("10 feature names"));
  EXPECT_FALSE(Exists(root + "/atlases/wrong-names"));
}

// A client retrying CreateAtlas with its request_id gets the same job and
// atlas, not a second training.
TEST(SomAtlasService, CreateAtlasWithARequestIdIsIdempotent) {
  const std::string root = MakeRoot("request-id");
  ASSERT_TRUE(som::WriteCsrBinary(root + "/data/c.csr", SmallCorpus(200, 60, 9)).ok());
  TestServer server(root);
  ASSERT_TRUE(server.status().ok()) << server.status();
  v1::CreateAtlasRequest request = AtlasRequestFor("", "", 3, 3, 4);  // the server names the atlas
  request.mutable_corpus()->set_path("c.csr");
  request.set_request_id("client-7");
  v1::CreateAtlasResponse first, again;
  ASSERT_TRUE(server.Create(request, &first).ok());
  grpc::Status s = server.Create(request, &again);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(again.job().job_id(), first.job().job_id());
  EXPECT_EQ(again.atlas_id(), first.atlas_id());
  v1::CreateAtlasRequest other = request;
  other.mutable_options()->set_width(9);  // another request under the same id
  s = server.Create(other, &again);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS) << s.error_message();
  // The request id works as a job id too.
  const std::vector<v1::AtlasProgress> progress = server.Watch("client-7");
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back().state(), v1::JOB_STATE_SUCCEEDED) << progress.back().message();
  // After it succeeded (its atlas exists now): still the same job (issue 39).
  s = server.Create(request, &again);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(again.job().job_id(), first.job().job_id());
  EXPECT_EQ(again.atlas_id(), first.atlas_id());
  EXPECT_EQ(again.job().state(), v1::JOB_STATE_SUCCEEDED);
  v1::AtlasSummary summary;
  ASSERT_TRUE(server.GetAtlas(first.atlas_id(), &summary).ok());
  EXPECT_EQ(summary.width(), 3);
  request.set_request_id("bad id!");
  EXPECT_EQ(server.Create(request, &again).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// fp16 codebooks are served widened to fp32 and project like any other.
TEST(SomAtlasService, Fp16Atlases) {
  const std::string root = MakeRoot("fp16");
  TestServer server(root);
  ASSERT_TRUE(server.status().ok()) << server.status();
  const som::SparseBinaryMatrix corpus = SmallCorpus(200, 50, 12);
  v1::UploadedCorpus uploaded;
  ASSERT_TRUE(server.Upload(corpus, {}, {}, 1000, &uploaded).ok());
  v1::CreateAtlasRequest request = AtlasRequestFor(uploaded.corpus_id(), "half", 4, 3, 4);
  request.mutable_options()->set_weight_type("fp16");
  request.mutable_options()->set_init("random");
  v1::AtlasProgress end = TrainToEnd(server, request);
  ASSERT_EQ(end.state(), v1::JOB_STATE_SUCCEEDED) << end.message();
  v1::AtlasSummary summary;
  ASSERT_TRUE(server.GetAtlas("half", &summary).ok());
  EXPECT_EQ(summary.weight_type(), "fp16");
  EXPECT_EQ(summary.init(), "random");
  std::vector<int64_t> dims;
  std::vector<float> codebook;
  int chunks = 0;
  v1::GetCodebookRequest codebook_request;
  codebook_request.set_atlas_id("half");
  ASSERT_TRUE(server.Codebook(codebook_request, &dims, &codebook, &chunks).ok());
  ASSERT_EQ(codebook.size(), 12u * 50u);
  for (float w : codebook) EXPECT_TRUE(std::isfinite(w));
  // Document d<r> (no ids uploaded) projects to its recorded cell.
  std::map<std::string, int> recorded;
  for (int node = 0; node < 12; ++node) {
    v1::GetCellRequest cell_request;
    cell_request.set_atlas_id("half");
    cell_request.set_node(node);
    cell_request.set_page_size(1000);
    v1::CellResponse cell;
    ASSERT_TRUE(server.Cell(cell_request, &cell).ok());
    for (const std::string& id : cell.document_ids()) recorded[id] = node;
  }
  ASSERT_EQ(recorded.size(), 200u);
  v1::ProjectRequest project;
  project.set_atlas_id("half");
  for (int r = 0; r < 200; ++r) {
    v1::SparseDocument* d = project.add_documents();
    for (int32_t v : corpus.row(r)) d->add_features(v);
  }
  v1::ProjectResponse projected;
  ASSERT_TRUE(server.Project(project, &projected).ok());
  for (int r = 0; r < 200; ++r) EXPECT_EQ(projected.documents(r).node(), recorded[absl::StrCat("d", r)]) << r;
}

// Queries from several clients at once, while another atlas trains and the
// queried one is deleted under them: every answer is the reference answer or
// NOT_FOUND after the delete, never a crash or a mix.
TEST(SomAtlasService, ConcurrentQueriesWhileTrainingAndDeleting) {
  const std::string root = MakeRoot("concurrent");
  TestServer server(root);
  ASSERT_TRUE(server.status().ok()) << server.status();
  const som::SparseBinaryMatrix corpus = SmallCorpus(1500, 120, 14);
  v1::UploadedCorpus uploaded;
  ASSERT_TRUE(server.Upload(corpus, {}, {}, 1000, &uploaded).ok());
  ASSERT_EQ(TrainToEnd(server, AtlasRequestFor(uploaded.corpus_id(), "queried", 6, 6, 4)).state(),
            v1::JOB_STATE_SUCCEEDED);
  v1::ProjectRequest project;
  project.set_atlas_id("queried");
  for (int r = 0; r < 200; ++r) {
    v1::SparseDocument* d = project.add_documents();
    for (int32_t v : corpus.row(r)) d->add_features(v);
  }
  v1::ProjectResponse reference;
  ASSERT_TRUE(server.Project(project, &reference).ok());
  v1::CreateAtlasRequest busy = AtlasRequestFor(uploaded.corpus_id(), "busy", 16, 16, 30);
  busy.mutable_options()->set_convergence_tolerance(0);
  v1::CreateAtlasResponse created;
  ASSERT_TRUE(server.Create(busy, &created).ok());

  std::atomic<int> answered{0}, gone{0}, wrong{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      for (int k = 0; k < 15; ++k) {
        v1::ProjectResponse got;
        grpc::Status s = server.Project(project, &got);
        if (s.error_code() == grpc::StatusCode::NOT_FOUND) {
          ++gone;
          continue;
        }
        bool same = s.ok() && got.documents_size() == reference.documents_size();
        for (int d = 0; same && d < got.documents_size(); ++d) {
          same = got.documents(d).node() == reference.documents(d).node() &&
                 got.documents(d).distance() == reference.documents(d).distance();
        }
        ++(same ? answered : wrong);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  {
    grpc::ClientContext context;
    v1::AtlasRequest request;
    request.set_atlas_id("queried");
    v1::DeleteAtlasResponse deleted;
    EXPECT_TRUE(server.stub().DeleteAtlas(&context, request, &deleted).ok());
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(answered.load() + gone.load(), 60);
  EXPECT_EQ(server.Watch(created.job().job_id()).back().state(), v1::JOB_STATE_SUCCEEDED);
}

TEST(SomAtlasService, CancelStopsARunningTraining) {
  const std::string root = MakeRoot("cancel");
  TestServer server(root);
  ASSERT_TRUE(server.status().ok()) << server.status();
  const som::SparseBinaryMatrix corpus = SmallCorpus(3000, 300, 11);
  v1::UploadedCorpus uploaded;
  ASSERT_TRUE(server.Upload(corpus, {}, {}, 1000, &uploaded).ok());
  v1::CreateAtlasRequest request = AtlasRequestFor(uploaded.corpus_id(), "endless", 32, 32, 100000);
  request.mutable_options()->set_radius_decay_epochs(100000);
  request.mutable_options()->set_convergence_tolerance(0);  // never converges
  v1::CreateAtlasResponse created;
  ASSERT_TRUE(server.Create(request, &created).ok());

  // Wait for two epochs, then cancel.
  grpc::ClientContext context;
  context.set_deadline(In(std::chrono::seconds(120)));
  v1::JobRef job;
  job.set_job_id(created.job().job_id());
  auto reader = server.stub().WatchJob(&context, job);
  v1::AtlasProgress p;
  int epoch = 0;
  while (reader->Read(&p) && epoch < 2) epoch = p.epoch();
  ASSERT_GE(epoch, 2);
  // A job queued behind it, cancelled before it runs, frees its atlas id at once.
  v1::CreateAtlasResponse waiting;
  ASSERT_TRUE(server.Create(AtlasRequestFor(uploaded.corpus_id(), "waiting", 4, 4, 2), &waiting).ok());
  EXPECT_EQ(waiting.job().state(), v1::JOB_STATE_QUEUED);
  {
    grpc::ClientContext cancel_context;
    v1::JobRef queued;
    queued.set_job_id(waiting.job().job_id());
    v1::JobStatus status;
    ASSERT_TRUE(server.stub().CancelJob(&cancel_context, queued, &status).ok());
    EXPECT_EQ(status.state(), v1::JOB_STATE_CANCELLED);
  }
  grpc::Status again = server.Create(AtlasRequestFor(uploaded.corpus_id(), "waiting", 4, 4, 2), &waiting);
  ASSERT_TRUE(again.ok()) << again.error_message();
  const auto cancelled_at = std::chrono::steady_clock::now();
  {
    grpc::ClientContext cancel_context;
    v1::JobStatus status;
    ASSERT_TRUE(server.stub().CancelJob(&cancel_context, job, &status).ok());
  }
  v1::AtlasProgress last = p;
  while (reader->Read(&p)) last = p;
  ASSERT_TRUE(reader->Finish().ok());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - cancelled_at).count();
  EXPECT_EQ(last.state(), v1::JOB_STATE_CANCELLED) << last.message();
  EXPECT_LT(seconds, 30);
  EXPECT_LT(last.epoch(), 1000);

  grpc::ClientContext get_context;
  v1::JobStatus status;
  ASSERT_TRUE(server.stub().GetJob(&get_context, job, &status).ok());
  EXPECT_EQ(status.state(), v1::JOB_STATE_CANCELLED);
  v1::AtlasSummary summary;
  EXPECT_EQ(server.GetAtlas("endless", &summary).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_FALSE(Exists(root + "/atlases/endless"));
  // The re-queued job ran once the worker was free.
  v1::AtlasProgress waited = server.Watch(waiting.job().job_id()).back();
  EXPECT_EQ(waited.state(), v1::JOB_STATE_SUCCEEDED) << waited.message();
  EXPECT_TRUE(server.GetAtlas("waiting", &summary).ok());
  // The name is free again.
  request.mutable_options()->set_epochs(2);
  v1::AtlasProgress end = TrainToEnd(server, request);
  EXPECT_EQ(end.state(), v1::JOB_STATE_SUCCEEDED) << end.message();
}

TEST(SomAtlasService, BadUploadsAreRefused) {
  const std::string root = MakeRoot("bad_uploads");
  SomServiceOptions options;
  options.max_corpus_bytes = 64 << 10;
  TestServer server(root, options);
  ASSERT_TRUE(server.status().ok()) << server.status();
  const som::SparseBinaryMatrix corpus = SmallCorpus(50, 40, 1);
  v1::UploadedCorpus out;

  EXPECT_EQ(server.Upload(som::SparseBinaryMatrix(40), {}, {}, 10, &out).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // Index at the feature count, negative, repeated.
  grpc::Status s = server.Upload(corpus, {}, {}, 10, &out, /*num_features=*/10);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("out of range"));
  for (std::vector<int32_t> bad : {std::vector<int32_t>{3, -1}, std::vector<int32_t>{4, 9, 4}}) {
    som::SparseBinaryMatrix m(40, {0, static_cast<int64_t>(bad.size())}, bad);
    EXPECT_EQ(server.Upload(m, {}, {}, 10, &out).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  EXPECT_EQ(server.Upload(corpus, Names("f", 39), {}, 10, &out).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(server.Upload(corpus, {}, {"a\nb"}, 10, &out).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // Feature-name files read "id<TAB>...<TAB>name" lines: no tabs in uploaded names.
  std::vector<std::string> tabbed = Names("f", 40);
  tabbed[3] = "GO:1\tnucleus";
  s = server.Upload(corpus, tabbed, {}, 10, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("tab"));
  // Larger than the server's 64 KiB per corpus.
  s = server.Upload(SmallCorpus(5000, 40, 2), {}, {}, 500, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  // Still fine afterwards.
  s = server.Upload(corpus, {}, {}, 10, &out);
  EXPECT_TRUE(s.ok()) << s.error_message();
  // A map whose codebook exceeds the limit (10x10 x 40 features x 4 bytes fits; 60x60 does not).
  v1::CreateAtlasResponse created;
  s = server.Create(AtlasRequestFor(out.corpus_id(), "huge", 60, 60, 2), &created);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("codebook"));
}

TEST(SomAtlasService, BadRequestsGetClearStatuses) {
  const std::string root = MakeRoot("bad_requests");
  TestServer server(root);
  ASSERT_TRUE(server.status().ok()) << server.status();
  const som::SparseBinaryMatrix corpus = SmallCorpus(100, 30, 4);
  v1::UploadedCorpus uploaded;
  ASSERT_TRUE(server.Upload(corpus, Names("n", 30), {}, 100, &uploaded).ok());
  std::ofstream(root + "/outside.svm") << "1 1:1\n";

  struct Case {
    const char* what;
    std::function<void(v1::CreateAtlasRequest&)> edit;
    grpc::StatusCode code;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<Case> cases = {
      {"unknown corpus", [](auto& r) { r.mutable_corpus()->set_corpus_id("corpus-nope"); },
       grpc::StatusCode::NOT_FOUND},
      {"no corpus", [](auto& r) { r.clear_corpus(); }, grpc::StatusCode::INVALID_ARGUMENT},
      {"zero width", [](auto& r) { r.mutable_options()->set_width(0); }, grpc::StatusCode::INVALID_ARGUMENT},
      {"negative height", [](auto& r) { r.mutable_options()->set_height(-3); }, grpc::StatusCode::INVALID_ARGUMENT},
      {"map over the limit", [](auto& r) { r.mutable_options()->set_width(100); r.mutable_options()->set_height(100); },
       grpc::StatusCode::INVALID_ARGUMENT},
      {"NaN holdout", [nan](auto& r) { r.mutable_options()->set_holdout_fraction(nan); },
       grpc::StatusCode::INVALID_ARGUMENT},
      {"negative holdout", [](auto& r) { r.mutable_options()->set_holdout_fraction(-0.1); },
       grpc::StatusCode::INVALID_ARGUMENT},
      {"holdout of everything", [](auto& r) { r.mutable_options()->set_holdout_fraction(1.0); },
       grpc::StatusCode::INVALID_ARGUMENT},
      {"negative epochs", [](auto& r) { r.mutable_options()->set_epochs(-1); }, grpc::StatusCode::INVALID_ARGUMENT},
      {"bad init", [](auto& r) { r.mutable_options()->set_init("spiral"); }, grpc::StatusCode::INVALID_ARGUMENT},
      {"bad device", [](auto& r) { r.mutable_options()->set_device("tpu"); }, grpc::StatusCode::INVALID_ARGUMENT},
      {"NaN radius", [nan](auto& r) { r.mutable_options()->set_radius_start(nan); },
       grpc::StatusCode::INVALID_ARGUMENT},
      {"bad atlas id", [](auto& r) { r.set_atlas_id("../escape"); }, grpc::StatusCode::INVALID_ARGUMENT},
      {"hidden atlas id", [](auto& r) { r.set_atlas_id(".x"); }, grpc::StatusCode::INVALID_ARGUMENT},
      {"path outside the roots", [root](auto& r) { r.mutable_corpus()->set_path(root + "/outside.svm"); },
       grpc::StatusCode::PERMISSION_DENIED},
      {"escaping relative path", [](auto& r) { r.mutable_corpus()->set_path("../outside.svm"); },
       grpc::StatusCode::PERMISSION_DENIED},
      {"missing file", [](auto& r) { r.mutable_corpus()->set_path("missing.csr"); }, grpc::StatusCode::NOT_FOUND},
      {"names with an upload", [](auto& r) { r.mutable_corpus()->set_feature_names_path("names.txt"); },
       grpc::StatusCode::INVALID_ARGUMENT},
  };
  for (const Case& c : cases) {
    v1::CreateAtlasRequest request = AtlasRequestFor(uploaded.corpus_id(), "bad", 4, 4, 2);
    c.edit(request);
    v1::CreateAtlasResponse created;
    grpc::Status s = server.Create(request, &created);
    EXPECT_EQ(s.error_code(), c.code) << c.what << ": " << s.error_message();
    EXPECT_FALSE(s.error_message().empty()) << c.what;
  }

  // A good atlas, then the same id again.
  v1::AtlasProgress end = TrainToEnd(server, AtlasRequestFor(uploaded.corpus_id(), "good", 3, 3, 2));
  ASSERT_EQ(end.state(), v1::JOB_STATE_SUCCEEDED) << end.message();
  v1::CreateAtlasResponse created;
  EXPECT_EQ(server.Create(AtlasRequestFor(uploaded.corpus_id(), "good", 3, 3, 2), &created).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);

  // Queries.
  v1::ProjectRequest project;
  project.set_atlas_id("nope");
  project.add_documents()->add_features(1);
  v1::ProjectResponse projected;
  EXPECT_EQ(server.Project(project, &projected).error_code(), grpc::StatusCode::NOT_FOUND);
  project.set_atlas_id("good");
  project.mutable_documents(0)->add_features(30);  // out of range
  grpc::Status s = server.Project(project, &projected);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("document 0"));
  project.mutable_documents(0)->clear_features();
  project.mutable_documents(0)->add_features(-2);
  EXPECT_EQ(server.Project(project, &projected).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  project.mutable_documents(0)->clear_features();
  project.mutable_documents(0)->add_features(3);
  project.mutable_documents(0)->add_feature_names("n3");  // feature 3 twice
  EXPECT_EQ(server.Project(project, &projected).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  project.mutable_documents(0)->clear_feature_names();
  project.mutable_documents(0)->add_feature_names("no such name");
  EXPECT_EQ(server.Project(project, &projected).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  project.mutable_documents(0)->clear_feature_names();
  s = server.Project(project, &projected);
  EXPECT_TRUE(s.ok()) << s.error_message();

  v1::GetCellRequest cell_request;
  v1::CellResponse cell;
  cell_request.set_atlas_id("good");
  cell_request.set_node(9);
  EXPECT_EQ(server.Cell(cell_request, &cell).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  cell_request.mutable_xy()->set_x(3);
  EXPECT_EQ(server.Cell(cell_request, &cell).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  cell_request.set_node(0);
  cell_request.set_page_token("zz");
  EXPECT_EQ(server.Cell(cell_request, &cell).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  cell_request.clear_page_token();
  cell_request.set_page_size(-1);
  EXPECT_EQ(server.Cell(cell_request, &cell).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  cell_request.set_page_size(0);
  cell_request.set_atlas_id("nope");
  EXPECT_EQ(server.Cell(cell_request, &cell).error_code(), grpc::StatusCode::NOT_FOUND);

  v1::GetCodebookRequest codebook;
  codebook.set_atlas_id("good");
  codebook.add_features(30);
  std::vector<int64_t> dims;
  std::vector<float> data;
  int chunks = 0;
  EXPECT_EQ(server.Codebook(codebook, &dims, &data, &chunks).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  codebook.set_atlas_id("nope");
  EXPECT_EQ(server.Codebook(codebook, &dims, &data, &chunks).error_code(), grpc::StatusCode::NOT_FOUND);

  v1::JobRef job;
  job.set_job_id("no-such-job");
  v1::JobStatus status;
  grpc::ClientContext get_context, cancel_context;
  EXPECT_EQ(server.stub().GetJob(&get_context, job, &status).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(server.stub().CancelJob(&cancel_context, job, &status).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::Status watched;
  server.Watch("no-such-job", &watched);
  EXPECT_EQ(watched.error_code(), grpc::StatusCode::NOT_FOUND);
  v1::AtlasSummary summary;
  EXPECT_EQ(server.GetAtlas("nope", &summary).error_code(), grpc::StatusCode::NOT_FOUND);
}

// The scheduler's som.train engine, made from the service's options, checks
// requests as CreateAtlas does and saves atlases the running service serves
// at once (listed, projected onto, their cells read).
TEST(SomAtlasService, ServesAtlasesTheTrainingEngineSaves) {
  const std::string root = MakeRoot("engine");
  const som::SparseBinaryMatrix corpus = SmallCorpus(300, 80, 21);
  ASSERT_TRUE(som::WriteCsrBinary(root + "/data/c.csr", corpus).ok());
  TestServer server(root);
  ASSERT_TRUE(server.status().ok()) << server.status();
  v1::UploadedCorpus uploaded;
  ASSERT_TRUE(server.Upload(corpus, {}, {}, 1000, &uploaded).ok());

  absl::StatusOr<som::TrainingEngineOptions> engine_options = server.service().TrainingEngineOptions();
  ASSERT_TRUE(engine_options.ok()) << engine_options.status();
  auto engine = som::NewTrainingEngine(*engine_options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  v1::CreateAtlasRequest request = AtlasRequestFor("", "from-engine", 4, 4, 3);
  request.mutable_corpus()->set_path("c.csr");
  request.mutable_options()->set_holdout_fraction(0.1);
  google::protobuf::Any spec;
  spec.PackFrom(request);
  ASSERT_TRUE((*engine)->Validate(spec).ok()) << (*engine)->Validate(spec);
  std::atomic<bool> cancel{false};
  jobs::EngineContext ctx("job-e", root + "/work", &cancel, absl::InfiniteFuture(), nullptr);
  auto out = (*engine)->Run(spec, ctx);
  ASSERT_TRUE(out.ok()) << out.status();

  grpc::ClientContext list_context;
  v1::ListAtlasesResponse list;
  ASSERT_TRUE(server.stub().ListAtlases(&list_context, v1::ListAtlasesRequest(), &list).ok());
  ASSERT_EQ(list.atlases_size(), 1);
  EXPECT_EQ(list.atlases(0).atlas_id(), "from-engine");
  EXPECT_EQ(list.atlases(0).held_out_quality().documents(), 30);
  v1::ProjectRequest project;
  project.set_atlas_id("from-engine");
  v1::SparseDocument* document = project.add_documents();
  for (int32_t v : corpus.row(0)) document->add_features(v);
  v1::ProjectResponse projected;
  grpc::Status s = server.Project(project, &projected);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(projected.documents_size(), 1);
  v1::GetCellRequest cell_request;
  cell_request.set_atlas_id("from-engine");
  cell_request.set_node(projected.documents(0).node());
  v1::CellResponse cell;
  EXPECT_TRUE(server.Cell(cell_request, &cell).ok());
  // The id is taken for CreateAtlas too.
  v1::CreateAtlasResponse created;
  EXPECT_EQ(server.Create(AtlasRequestFor(uploaded.corpus_id(), "from-engine", 3, 3, 2), &created).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);

  // Uploads are this process's memory: a job naming one is refused (CreateAtlas
  // writes them as files and names those).
  v1::CreateAtlasRequest from_upload = AtlasRequestFor(uploaded.corpus_id(), "from-upload", 3, 3, 2);
  spec.PackFrom(from_upload);
  absl::Status refused = (*engine)->Validate(spec);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("server path"));
}

// A retry of a job whose earlier attempt saved its atlas and died before its
// success was recorded (the id is the same on every attempt) takes that atlas
// as its result; another job with that atlas id still gets ALREADY_EXISTS.
TEST(SomAtlasService, ARetriedJobAdoptsTheAtlasItsEarlierAttemptSaved) {
  const std::string root = MakeRoot("retry");
  const som::SparseBinaryMatrix corpus = SmallCorpus(200, 50, 22);
  ASSERT_TRUE(som::WriteCsrBinary(root + "/data/c.csr", corpus).ok());
  TestServer server(root);
  ASSERT_TRUE(server.status().ok()) << server.status();
  absl::StatusOr<som::TrainingEngineOptions> engine_options = server.service().TrainingEngineOptions();
  ASSERT_TRUE(engine_options.ok()) << engine_options.status();
  auto engine = som::NewTrainingEngine(*engine_options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  v1::CreateAtlasRequest request = AtlasRequestFor("", "retried", 3, 3, 3);
  request.mutable_corpus()->set_path("c.csr");
  google::protobuf::Any spec;
  spec.PackFrom(request);
  std::atomic<bool> cancel{false};
  std::vector<std::string> stages;
  jobs::EngineContext first("job-r", root + "/work", &cancel, absl::InfiniteFuture(), nullptr);
  auto saved = (*engine)->Run(spec, first);
  ASSERT_TRUE(saved.ok()) << saved.status();
  absl::StatusOr<som::Atlas> atlas = som::LoadAtlas(root + "/atlases/retried");
  ASSERT_TRUE(atlas.ok()) << atlas.status();
  EXPECT_EQ(atlas->job_id, "job-r");  // in the manifest

  jobs::EngineContext retry("job-r", root + "/work2", &cancel, absl::InfiniteFuture(),
                            [&](const jobs::JobProgress& p) { stages.push_back(p.stage); });
  auto adopted = (*engine)->Run(spec, retry);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  v1::AtlasSummary before, after;
  ASSERT_TRUE(saved->result.UnpackTo(&before));
  ASSERT_TRUE(adopted->result.UnpackTo(&after));
  EXPECT_EQ(after.atlas_id(), "retried");
  EXPECT_EQ(after.created(), before.created());  // the same atlas, not trained again
  EXPECT_EQ(after.history_size(), 3);
  EXPECT_EQ(stages, std::vector<std::string>{"save"});

  jobs::EngineContext other("job-other", root + "/work3", &cancel, absl::InfiniteFuture(), nullptr);
  EXPECT_EQ((*engine)->Run(spec, other).status().code(), absl::StatusCode::kAlreadyExists);
  v1::AtlasSummary summary;
  EXPECT_TRUE(server.GetAtlas("retried", &summary).ok());
}

// An upload a CreateAtlas names is written once under <state>/som-uploads
// (corpus, names, ids) and the job names those files; they go once no queued
// or running job needs them.
TEST(SomAtlasService, UploadsAreWrittenForTheJobsThatNameThem) {
  const std::string root = MakeRoot("upload_files");
  SomServiceOptions options;
  options.upload_file_grace = absl::ZeroDuration();
  options.upload_sweep_interval = absl::InfiniteDuration();
  TestServer server(root, options);
  ASSERT_TRUE(server.status().ok()) << server.status();
  const som::SparseBinaryMatrix corpus = SmallCorpus(120, 40, 31);
  const std::vector<std::string> names = Names("term ", 40), ids = Names("gene", 120);
  v1::UploadedCorpus uploaded;
  ASSERT_TRUE(server.Upload(corpus, names, ids, 50, &uploaded).ok());
  v1::CreateAtlasResponse created;
  grpc::Status s = server.Create(AtlasRequestFor(uploaded.corpus_id(), "from-upload", 3, 3, 3), &created);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const std::string base = server.state_dir() + "/som-uploads/" + uploaded.corpus_id();

  // The job as stored names the files, not the upload.
  absl::StatusOr<jobs::JobRecord> job = server.scheduler().store().Get(created.job().job_id());
  ASSERT_TRUE(job.ok()) << job.status();
  v1::JobSpec spec;
  v1::CreateAtlasRequest stored;
  ASSERT_TRUE(spec.ParseFromString(job->spec) && spec.spec().UnpackTo(&stored));
  EXPECT_EQ(stored.atlas_id(), "from-upload");
  EXPECT_THAT(stored.corpus().path(), ::testing::EndsWith("som-uploads/" + uploaded.corpus_id() + ".csr"));
  EXPECT_THAT(stored.corpus().feature_names_path(), ::testing::EndsWith(".features.txt"));
  EXPECT_THAT(stored.corpus().document_ids_path(), ::testing::EndsWith(".ids.txt"));
  for (const char* suffix : {".csr", ".features.txt", ".ids.txt"}) EXPECT_TRUE(Exists(base + suffix)) << suffix;
  absl::StatusOr<som::SparseBinaryMatrix> written = som::ReadCsrBinary(base + ".csr");
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->offsets(), corpus.offsets());
  EXPECT_EQ(written->indices(), corpus.indices());

  const std::vector<v1::AtlasProgress> progress = server.Watch(created.job().job_id());
  ASSERT_EQ(progress.back().state(), v1::JOB_STATE_SUCCEEDED) << progress.back().message();
  // The atlas has the upload's names and ids.
  v1::GetCellRequest cell_request;
  cell_request.set_atlas_id("from-upload");
  cell_request.set_node(4);
  cell_request.set_page_size(1000);
  int64_t hits = 0;
  for (int node = 0; node < 9; ++node) {
    cell_request.set_node(node);
    v1::CellResponse cell;
    ASSERT_TRUE(server.Cell(cell_request, &cell).ok());
    for (int k = 0; k < cell.document_ids_size(); ++k) {
      EXPECT_EQ(cell.document_ids(k), ids[cell.document_indices(k)]);
    }
    for (const v1::FeatureWeight& f : cell.top_features()) EXPECT_EQ(f.name(), names[f.feature()]);
    hits += cell.hit_count();
  }
  EXPECT_EQ(hits, 120);

  // A second atlas from the same upload reuses the files.
  s = server.Create(AtlasRequestFor(uploaded.corpus_id(), "again", 2, 2, 2), &created);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(server.Watch(created.job().job_id()).back().state(), v1::JOB_STATE_SUCCEEDED);
  // No job needs them now.
  absl::StatusOr<int> swept = server.service().SweepUploadFiles();
  ASSERT_TRUE(swept.ok()) << swept.status();
  EXPECT_EQ(*swept, 3);
  EXPECT_FALSE(Exists(base + ".csr"));
}

// A training job that finished is still the scheduler's after a restart
// (service and scheduler destroyed and re-created on the same state
// directory): GetJob reports it SUCCEEDED, WatchJob ends with its atlas id,
// its result is the atlas, and the atlas is served.
TEST(SomAtlasService, FinishedJobsSurviveARestart) {
  const std::string root = MakeRoot("job_restart");
  const som::SparseBinaryMatrix corpus = SmallCorpus(300, 80, 25);
  v1::ProjectRequest project;
  project.set_atlas_id("survivor");
  for (int r = 0; r < 10; ++r) {
    v1::SparseDocument* d = project.add_documents();
    for (int32_t v : corpus.row(r)) d->add_features(v);
  }
  std::string job_id;
  v1::ProjectResponse projected_before;
  {
    TestServer server(root);
    ASSERT_TRUE(server.status().ok()) << server.status();
    v1::UploadedCorpus uploaded;
    ASSERT_TRUE(server.Upload(corpus, {}, {}, 1000, &uploaded).ok());
    v1::CreateAtlasResponse created;
    ASSERT_TRUE(server.Create(AtlasRequestFor(uploaded.corpus_id(), "survivor", 4, 4, 4), &created).ok());
    job_id = created.job().job_id();
    ASSERT_EQ(server.Watch(job_id).back().state(), v1::JOB_STATE_SUCCEEDED);
    ASSERT_TRUE(server.Project(project, &projected_before).ok());
  }

  TestServer server(root);
  ASSERT_TRUE(server.status().ok()) << server.status();
  v1::JobStatus status;
  grpc::Status s = server.GetJob(job_id, &status);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(status.job_id(), job_id);
  EXPECT_EQ(status.state(), v1::JOB_STATE_SUCCEEDED);
  const std::vector<v1::AtlasProgress> progress = server.Watch(job_id);
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back().state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(progress.back().atlas_id(), "survivor");
  EXPECT_EQ(progress.back().epoch(), 4);
  absl::StatusOr<v1::JobResult> result = server.scheduler().GetResult(job_id);
  ASSERT_TRUE(result.ok()) << result.status();
  v1::AtlasSummary from_job;
  ASSERT_TRUE(result->result().UnpackTo(&from_job));
  EXPECT_EQ(from_job.atlas_id(), "survivor");
  v1::AtlasSummary served;
  s = server.GetAtlas("survivor", &served);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(served.created(), from_job.created());
  EXPECT_EQ(served.directory(), from_job.directory());
  v1::ProjectResponse projected_after;
  ASSERT_TRUE(server.Project(project, &projected_after).ok());
  ASSERT_EQ(projected_after.documents_size(), projected_before.documents_size());
  for (int k = 0; k < projected_after.documents_size(); ++k) {
    EXPECT_EQ(projected_after.documents(k).node(), projected_before.documents(k).node());
  }
  // The id stays taken.
  v1::UploadedCorpus uploaded;
  ASSERT_TRUE(server.Upload(corpus, {}, {}, 1000, &uploaded).ok());
  v1::CreateAtlasResponse created;
  EXPECT_EQ(server.Create(AtlasRequestFor(uploaded.corpus_id(), "survivor", 3, 3, 2), &created).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);
}

// A training stopped mid-run (its server and scheduler destroyed while it was
// RUNNING) is re-queued, runs again after the restart — from the upload's
// file, the upload itself having gone with the process — and its atlas
// appears once.
TEST(SomAtlasService, AJobStoppedMidRunCompletesAfterARestart) {
  const std::string root = MakeRoot("stopped_mid_run");
  const som::SparseBinaryMatrix corpus = SmallCorpus(4000, 300, 27);
  v1::CreateAtlasRequest request = AtlasRequestFor("", "interrupted", 24, 24, kStoppedJobEpochs);
  request.mutable_options()->set_convergence_tolerance(0);  // every epoch
  std::string job_id;
  {
    TestServer server(root);
    ASSERT_TRUE(server.status().ok()) << server.status();
    v1::UploadedCorpus uploaded;
    ASSERT_TRUE(server.Upload(corpus, {}, {}, 1000, &uploaded).ok());
    request.mutable_corpus()->set_corpus_id(uploaded.corpus_id());
    v1::CreateAtlasResponse created;
    ASSERT_TRUE(server.Create(request, &created).ok());
    job_id = created.job().job_id();
    // Two epochs in, the process goes.
    grpc::ClientContext context;
    context.set_deadline(In(std::chrono::seconds(120)));
    v1::JobRef job;
    job.set_job_id(job_id);
    auto reader = server.stub().WatchJob(&context, job);
    v1::AtlasProgress p;
    while (reader->Read(&p) && p.epoch() < 2 && p.state() != v1::JOB_STATE_SUCCEEDED) {
    }
    ASSERT_EQ(p.state(), v1::JOB_STATE_RUNNING) << p.message();
    ASSERT_GE(p.epoch(), 2);
    context.TryCancel();
    reader->Finish();
  }
  EXPECT_FALSE(Exists(root + "/atlases/interrupted"));  // a stopped attempt saves nothing

  TestServer server(root);
  ASSERT_TRUE(server.status().ok()) << server.status();
  const std::vector<v1::AtlasProgress> progress = server.Watch(job_id);
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back().state(), v1::JOB_STATE_SUCCEEDED) << progress.back().message();
  EXPECT_EQ(progress.back().atlas_id(), "interrupted");
  EXPECT_EQ(progress.back().epoch(), kStoppedJobEpochs);
  // The story in the events: started, re-queued when the scheduler stopped, started again.
  int started = 0, requeued = 0;
  for (const v1::AtlasProgress& m : progress) {
    started += absl::StrContains(m.message(), "started on worker") ? 1 : 0;
    requeued += absl::StrContains(m.message(), "re-queued") ? 1 : 0;
  }
  EXPECT_EQ(started, 2);
  EXPECT_EQ(requeued, 1);
  absl::StatusOr<v1::JobInfo> info = server.scheduler().Get(job_id);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->attempts(), 2);
  // Once: one atlas listed, one directory (no staging debris).
  grpc::ClientContext list_context;
  v1::ListAtlasesResponse list;
  ASSERT_TRUE(server.stub().ListAtlases(&list_context, v1::ListAtlasesRequest(), &list).ok());
  ASSERT_EQ(list.atlases_size(), 1);
  EXPECT_EQ(list.atlases(0).atlas_id(), "interrupted");
  EXPECT_EQ(list.atlases(0).epochs(), kStoppedJobEpochs);
  int entries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(root + "/atlases")) {
    EXPECT_EQ(entry.path().filename(), "interrupted");
    ++entries;
  }
  EXPECT_EQ(entries, 1);
  absl::StatusOr<som::Atlas> atlas = som::LoadAtlas(root + "/atlases/interrupted");
  ASSERT_TRUE(atlas.ok()) << atlas.status();
  EXPECT_EQ(atlas->job_id, job_id);
}

// A process without a scheduler (`tessera serve --role worker`) refuses
// uploads and jobs; it still answers queries.
// GetCell over gRPC, page by page, returns what the scan over all BMUs
// (DocumentsInCell) returns for every cell of a random atlas with many empty
// cells; off-map cells are INVALID_ARGUMENT, unknown atlases NOT_FOUND.
TEST(SomAtlasService, GetCellAnswersFromTheIndexLikeTheScan) {
  const std::string root = MakeRoot("cells");
  som::TrainResult trained;
  som::SomModel& model = trained.model;
  model.grid = som::GridShape{9, 7, som::Topology::kPlanar};
  model.features = 5;
  std::mt19937 rng(16);
  std::uniform_real_distribution<float> w(0.0f, 1.0f);
  model.weights_f32.resize(model.features * model.grid.nodes());
  for (float& x : model.weights_f32) x = w(rng);
  std::vector<int32_t> bmu(500);
  for (int32_t& b : bmu) b = static_cast<int32_t>(w(rng) * w(rng) * w(rng) * model.grid.nodes());
  auto atlas = som::MakeAtlas(std::move(trained), bmu, {}, {}, som::TrainOptions());
  ASSERT_TRUE(atlas.ok()) << atlas.status();
  ASSERT_TRUE(som::SaveAtlas(*atlas, root + "/atlases/random").ok());

  ServerOptions options = scheduler::testing::LoopbackServerOptions();
  options.data_roots = {root + "/data"};
  options.atlas_dir = root + "/atlases";
  auto service = SomAtlasServiceImpl::Create(options);
  ASSERT_TRUE(service.ok()) << service.status();
  auto hosted = scheduler::testing::StartLoopbackHost(options, service->get());
  ASSERT_TRUE(hosted.ok()) << hosted.status();
  auto stub = v1::SomAtlasService::NewStub(hosted->channel);
  int empty = 0;
  for (int64_t node = 0; node < model.grid.nodes(); ++node) {
    const std::vector<int64_t> scan = som::DocumentsInCell(*atlas, node);
    if (scan.empty()) ++empty;
    std::vector<int64_t> served;
    std::string token;
    do {
      v1::GetCellRequest request;
      request.set_atlas_id("random");
      if (node % 2 == 0) {
        request.set_node(static_cast<int32_t>(node));
      } else {
        request.mutable_xy()->set_x(static_cast<int32_t>(node % model.grid.width));
        request.mutable_xy()->set_y(static_cast<int32_t>(node / model.grid.width));
      }
      request.set_page_size(7);
      request.set_page_token(token);
      v1::CellResponse cell;
      grpc::ClientContext context;
      const grpc::Status s = stub->GetCell(&context, request, &cell);
      ASSERT_TRUE(s.ok()) << s.error_message();
      EXPECT_EQ(cell.hit_count(), static_cast<int64_t>(scan.size()));
      served.insert(served.end(), cell.document_indices().begin(), cell.document_indices().end());
      token = cell.next_page_token();
    } while (!token.empty());
    EXPECT_EQ(served, scan) << "node " << node;
  }
  EXPECT_GT(empty, 0) << "the random atlas should have empty cells";
  for (int32_t node : {-1, 63, 1000}) {
    v1::GetCellRequest request;
    request.set_atlas_id("random");
    request.set_node(node);
    v1::CellResponse cell;
    grpc::ClientContext context;
    const grpc::Status s = stub->GetCell(&context, request, &cell);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << node;
    EXPECT_THAT(s.error_message(), HasSubstr("off the 9x7 map"));
  }
  v1::GetCellRequest request;
  request.set_atlas_id("no-such-atlas");
  request.set_node(0);
  v1::CellResponse cell;
  grpc::ClientContext context;
  EXPECT_EQ(stub->GetCell(&context, request, &cell).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST(SomAtlasService, WithoutASchedulerJobCallsAreFailedPrecondition) {
  const std::string root = MakeRoot("worker");
  ServerOptions options = scheduler::testing::LoopbackServerOptions();
  options.data_roots = {root + "/data"};
  options.atlas_dir = root + "/atlases";
  auto service = SomAtlasServiceImpl::Create(options);
  ASSERT_TRUE(service.ok()) << service.status();
  auto hosted = scheduler::testing::StartLoopbackHost(options, service->get());
  ASSERT_TRUE(hosted.ok()) << hosted.status();
  auto stub = v1::SomAtlasService::NewStub(hosted->channel);

  v1::CreateAtlasRequest request = AtlasRequestFor("", "nope", 3, 3, 2);
  request.mutable_corpus()->set_path("c.csr");
  v1::CreateAtlasResponse created;
  grpc::ClientContext create_context;
  grpc::Status s = stub->CreateAtlas(&create_context, request, &created);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("SchedulerService"));
  v1::JobRef job;
  job.set_job_id("job-1");
  v1::JobStatus status;
  grpc::ClientContext get_context, cancel_context, watch_context;
  EXPECT_EQ(stub->GetJob(&get_context, job, &status).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(stub->CancelJob(&cancel_context, job, &status).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  auto reader = stub->WatchJob(&watch_context, job);
  v1::AtlasProgress p;
  while (reader->Read(&p)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  grpc::ClientContext upload_context;
  v1::UploadedCorpus uploaded;
  auto writer = stub->UploadCorpus(&upload_context, &uploaded);
  v1::CorpusChunk chunk;
  chunk.add_rows()->add_features(0);
  writer->Write(chunk);
  writer->WritesDone();
  EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  grpc::ClientContext list_context;
  v1::ListAtlasesResponse list;
  EXPECT_TRUE(stub->ListAtlases(&list_context, v1::ListAtlasesRequest(), &list).ok());
}

TEST(SomAtlasService, WithoutAnAtlasDirectoryCreateIsAPreconditionFailure) {
  ServerOptions options = scheduler::testing::LoopbackServerOptions();
  auto service = SomAtlasServiceImpl::Create(options);
  ASSERT_TRUE(service.ok()) << service.status();
  EXPECT_TRUE((*service)->atlas_dir().empty());
  // An atlas directory that is a file is refused at start-up.
  const std::string file = TmpDir() + "/not_a_dir";
  std::ofstream(file) << "x";
  options.atlas_dir = file;
  EXPECT_EQ(SomAtlasServiceImpl::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

// The trainer's cancellation hook: asked before every epoch.
TEST(TrainSomShouldStop, StopsBetweenEpochsWithCancelled) {
  const som::SparseBinaryMatrix corpus = SmallCorpus(200, 50, 8);
  som::TrainOptions options;
  options.grid = som::GridShape{4, 4, som::Topology::kPlanar};
  options.max_epochs = 50;
  options.convergence_tolerance = 0;
  int epochs = 0;
  options.progress = [&](const som::EpochReport&) { ++epochs; };
  options.should_stop = [&] { return epochs >= 3; };
  absl::StatusOr<som::TrainResult> result = som::TrainSom(corpus, options);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled) << result.status();
  EXPECT_EQ(epochs, 3);
  options.should_stop = [] { return false; };
  options.max_epochs = 2;
  EXPECT_TRUE(som::TrainSom(corpus, options).ok());
}

}  // namespace
}  // namespace tessera

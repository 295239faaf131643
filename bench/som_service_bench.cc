// SomAtlasService end to end over a loopback channel, on a synthetic
// MEDLINE-shape corpus: what the service adds around TrainSom. As `tessera
// serve` runs it: the job goes through a scheduler (SQLite store, in-process
// worker running the som.train engine).
//   upload       documents/s and MB/s of CorpusChunk streams
//   train job    CreateAtlas -> SUCCEEDED wall time, against the epochs' own
//                seconds (the rest: writing the upload as a file, queueing,
//                reading it back, init, assigning documents, held-out pass,
//                SaveAtlas and the verifying LoadAtlas)
//   restart      start-up time of a service (and scheduler) that loads the saved atlas
//   project      documents/s of Project (server device and CPU)
//   cells        GetCell per cell (100 documents, 10 features)
//   codebook     MB/s of GetCodebook
//
//   som_service_bench [--docs=200000] [--edge=32] [--epochs=5] [--device=auto]
// Writes its atlas under $TMPDIR (or /tmp)/som_service_bench; removes it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "common/device.h"
#include "common/status.h"
#include "services/jobs/job_store.h"
#include "services/jobs/sql_database.h"
#include "services/scheduler/in_process_worker.h"
#include "services/scheduler/scheduler.h"
#include "services/server/service_host.h"
#include "services/som/som_service.h"
#include "services/som/training_engine.h"
#include "services/som/synthetic.h"
#include "tessera/v1/som.grpc.pb.h"

namespace tessera {
namespace {

using bench::Clock;
using bench::SecondsSince;

struct Args {
  int64_t docs = 200000;
  int edge = 32;
  int epochs = 5;
  std::string device = "auto";
};

bool Parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq), value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    bool ok = eq != std::string::npos;
    if (name == "--docs") {
      ok = ok && absl::SimpleAtoi(value, &a.docs) && a.docs > 0;
    } else if (name == "--edge") {
      ok = ok && absl::SimpleAtoi(value, &a.edge) && a.edge > 0;
    } else if (name == "--epochs") {
      ok = ok && absl::SimpleAtoi(value, &a.epochs) && a.epochs > 0;
    } else if (name == "--device") {
      a.device = value;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "usage: som_service_bench [--docs=N] [--edge=E] [--epochs=N] [--device=auto|cpu|cuda]\n");
      return false;
    }
  }
  return true;
}

struct Server {
  std::unique_ptr<SomAtlasServiceImpl> service;
  jobs::EngineRegistry engines;
  std::unique_ptr<scheduler::InProcessWorker> worker;
  std::unique_ptr<scheduler::Scheduler> scheduler;
  std::unique_ptr<ServiceHost> host;
  std::unique_ptr<v1::SomAtlasService::Stub> stub;
  ~Server() {
    host.reset();
    scheduler.reset();  // stopped first: its engine calls the service
    worker.reset();
    service.reset();
  }
};

// The service, a som.train engine from its options and a scheduler over a
// SQLite store in `state_dir` with the service attached.
absl::Status StartJobs(Server& server, const std::string& state_dir) {
  const std::string results = state_dir + "/results";
  std::filesystem::create_directories(results);
  TESSERA_ASSIGN_OR_RETURN(som::TrainingEngineOptions engine_options,
                           server.service->TrainingEngineOptions(state_dir));
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const jobs::Engine> engine, som::NewTrainingEngine(engine_options));
  TESSERA_RETURN_IF_ERROR(server.engines.Add(std::move(engine)));
  server.worker = std::make_unique<scheduler::InProcessWorker>("bench/local", &server.engines, results, 1);
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<jobs::SqlDatabase> db, jobs::OpenSqliteDatabase(state_dir + "/jobs.db"));
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<jobs::JobStore> store, jobs::JobStore::Open(std::move(db)));
  scheduler::SchedulerOptions options;
  options.name = "bench";
  std::vector<scheduler::WorkerSlots> workers;
  workers.push_back({std::shared_ptr<scheduler::Worker>(server.worker.get(), [](scheduler::Worker*) {}), 1});
  server.scheduler =
      std::make_unique<scheduler::Scheduler>(options, std::move(store), &server.engines, std::move(workers));
  TESSERA_RETURN_IF_ERROR(server.scheduler->Start());
  return server.service->AttachScheduler(server.scheduler.get(), state_dir);
}

std::unique_ptr<Server> StartServer(const ServerOptions& options, const std::string& state_dir) {
  auto server = std::make_unique<Server>();
  SomServiceOptions service_options;
  service_options.max_corpus_bytes = int64_t{16} << 30;
  auto service = SomAtlasServiceImpl::Create(options, service_options);
  if (!service.ok()) {
    std::fprintf(stderr, "service: %s\n", service.status().ToString().c_str());
    return nullptr;
  }
  server->service = *std::move(service);
  if (absl::Status s = StartJobs(*server, state_dir); !s.ok()) {
    std::fprintf(stderr, "scheduler: %s\n", s.ToString().c_str());
    return nullptr;
  }
  server->host = std::make_unique<ServiceHost>(options);
  server->host->AddService(server->service.get());
  auto ports = server->host->Start();
  if (!ports.ok()) {
    std::fprintf(stderr, "host: %s\n", ports.status().ToString().c_str());
    return nullptr;
  }
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxReceiveMessageSize(options.max_send_message_bytes);
  server->stub = v1::SomAtlasService::NewStub(grpc::CreateCustomChannel(
      absl::StrCat("127.0.0.1:", ports->grpc_port), grpc::InsecureChannelCredentials(), channel_args));
  return server;
}

int Run(const Args& a) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/som_service_bench";
  std::filesystem::remove_all(dir);
  ServerOptions options;
  options.grpc_port = 0;
  options.metrics_port = -1;
  options.device = a.device;
  options.atlas_dir = dir + "/atlases";
  const std::string state_dir = dir + "/state";
  options.max_volume_bytes = int64_t{16} << 30;
  std::printf("som_service_bench: %lld documents x 30766 features, map %dx%d, %d epochs, device %s (%s)\n",
              static_cast<long long>(a.docs), a.edge, a.edge, a.epochs, a.device.c_str(),
              DeviceRegistry::Get().Describe().c_str());
  const som::SparseBinaryMatrix corpus = som::GenerateSyntheticCorpus(som::MedlineShape(a.docs));
  std::unique_ptr<Server> server = StartServer(options, state_dir);
  if (server == nullptr) return 1;

  // Upload.
  Clock::time_point t = Clock::now();
  v1::UploadedCorpus uploaded;
  int64_t wire = 0;
  {
    grpc::ClientContext context;
    auto writer = server->stub->UploadCorpus(&context, &uploaded);
    v1::CorpusChunk chunk;
    chunk.set_num_features(corpus.cols());
    for (int64_t r = 0; r < corpus.rows(); ++r) {
      v1::SparseDocument* d = chunk.add_rows();
      for (int32_t v : corpus.row(r)) d->add_features(v);
      if (chunk.rows_size() == 20000 || r + 1 == corpus.rows()) {
        wire += static_cast<int64_t>(chunk.ByteSizeLong());
        if (!writer->Write(chunk)) break;
        chunk.Clear();
      }
    }
    writer->WritesDone();
    grpc::Status s = writer->Finish();
    if (!s.ok()) {
      std::fprintf(stderr, "upload: %s\n", s.error_message().c_str());
      return 1;
    }
  }
  const double upload_s = SecondsSince(t);
  std::printf("upload     %8.3f s  %10.0f documents/s  %7.1f MB/s (%lld nnz)\n", upload_s, corpus.rows() / upload_s,
              wire / upload_s / 1e6, static_cast<long long>(corpus.nnz()));

  // Train.
  v1::CreateAtlasRequest request;
  request.mutable_corpus()->set_corpus_id(uploaded.corpus_id());
  request.set_atlas_id("bench");
  request.mutable_options()->set_width(a.edge);
  request.mutable_options()->set_height(a.edge);
  request.mutable_options()->set_epochs(a.epochs);
  request.mutable_options()->set_convergence_tolerance(0);
  request.mutable_options()->set_holdout_fraction(0.05);
  t = Clock::now();
  double save_started = 0;
  v1::AtlasProgress last;
  {
    v1::CreateAtlasResponse created;
    grpc::ClientContext context;
    grpc::Status s = server->stub->CreateAtlas(&context, request, &created);
    if (!s.ok()) {
      std::fprintf(stderr, "create: %s\n", s.error_message().c_str());
      return 1;
    }
    grpc::ClientContext watch_context;
    v1::JobRef job;
    job.set_job_id(created.job().job_id());
    auto reader = server->stub->WatchJob(&watch_context, job);
    v1::AtlasProgress p;
    while (reader->Read(&p)) {
      if (p.stage() == "save" && save_started == 0) save_started = SecondsSince(t);
      last = p;
    }
    reader->Finish();
  }
  const double job_s = SecondsSince(t);
  if (last.state() != v1::JOB_STATE_SUCCEEDED) {
    std::fprintf(stderr, "job: %s\n", last.message().c_str());
    return 1;
  }
  v1::AtlasSummary summary;
  {
    grpc::ClientContext context;
    v1::AtlasRequest atlas;
    atlas.set_atlas_id("bench");
    server->stub->GetAtlas(&context, atlas, &summary);
  }
  double epochs_s = 0;
  for (const v1::EpochSummary& e : summary.history()) epochs_s += e.seconds();
  // The scheduler records progress at most every 200 ms: a quick save stage may go unseen.
  if (save_started > 0) {
    std::printf("train job  %8.3f s  epochs %.3f s, assign + held-out + save + verify %.3f s (from the save stage)\n",
                job_s, epochs_s, job_s - save_started);
  } else {
    std::printf("train job  %8.3f s  epochs %.3f s (the save stage was not recorded)\n", job_s, epochs_s);
  }
  std::printf("           training QE %.4f TE %.4f, held-out QE %.4f on %lld documents\n",
              summary.training_quality().qe_euclidean(), summary.training_quality().topographic_error(),
              summary.held_out_quality().qe_euclidean(),
              static_cast<long long>(summary.held_out_quality().documents()));

  // Restart on the same directory.
  server.reset();
  t = Clock::now();
  server = StartServer(options, state_dir);
  if (server == nullptr) return 1;
  std::printf("restart    %8.3f s  (loads the atlas)\n", SecondsSince(t));

  // Project.
  v1::ProjectRequest project;
  project.set_atlas_id("bench");
  const int64_t n = std::min<int64_t>(corpus.rows(), 20000);
  for (int64_t r = 0; r < n; ++r) {
    v1::SparseDocument* d = project.add_documents();
    for (int32_t v : corpus.row(r)) d->add_features(v);
  }
  for (const char* device : {"", "cpu"}) {
    project.set_device(device);
    v1::ProjectResponse projected;
    grpc::ClientContext context;
    t = Clock::now();
    grpc::Status s = server->stub->Project(&context, project, &projected);
    const double seconds = SecondsSince(t);
    if (!s.ok()) {
      std::fprintf(stderr, "project: %s\n", s.error_message().c_str());
      return 1;
    }
    std::printf("project    %8.3f s  %10.0f documents/s (%lld documents, device %s)\n", seconds, n / seconds,
                static_cast<long long>(n), *device ? device : a.device.c_str());
  }

  // Cells.
  const int cells = std::min(a.edge * a.edge, 256);
  t = Clock::now();
  for (int node = 0; node < cells; ++node) {
    v1::GetCellRequest cell_request;
    cell_request.set_atlas_id("bench");
    cell_request.set_node(node);
    v1::CellResponse cell;
    grpc::ClientContext context;
    server->stub->GetCell(&context, cell_request, &cell);
  }
  std::printf("cells      %8.3f ms per GetCell (%d cells)\n", 1e3 * SecondsSince(t) / cells, cells);

  // Codebook.
  {
    v1::GetCodebookRequest codebook;
    codebook.set_atlas_id("bench");
    grpc::ClientContext context;
    t = Clock::now();
    auto reader = server->stub->GetCodebook(&context, codebook);
    v1::ArrayChunk chunk;
    int64_t bytes = 0;
    while (reader->Read(&chunk)) bytes += static_cast<int64_t>(chunk.data().size());
    reader->Finish();
    const double seconds = SecondsSince(t);
    std::printf("codebook   %8.3f s  %7.1f MB/s (%lld bytes)\n", seconds, bytes / seconds / 1e6,
                static_cast<long long>(bytes));
  }
  server.reset();
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  tessera::Args args;
  if (!tessera::Parse(argc, argv, args)) return 2;
  return tessera::Run(args);
}

// tessera.v1.SomAtlasService (protos/tessera/v1/som.proto): SOM atlases
// trained as jobs and queried over gRPC. Corpora come from uploads (a bounded
// CorpusStore with a TTL) or files under the data roots; training runs
// the training pipeline (atlas_training.h, shared with `tessera som train` and
// the scheduler's som.train engine) on a small worker pool with a bounded
// queue, jobs live in an in-memory JobRegistry (services/jobs), and every
// finished atlas is saved, held-out quality included, under the atlas
// directory (one sub-directory per atlas id) before its job is reported
// SUCCEEDED. At start-up the service loads every atlas found there (one that
// does not load is logged and skipped); an atlas asked for by id that is not
// loaded is looked up there too, so atlases other writers save into the
// directory (the som.train engine, `tessera som train --out`) are served.
//
//   absl::StatusOr<std::unique_ptr<tessera::SomAtlasServiceImpl>> som =
//       tessera::SomAtlasServiceImpl::Create(server_options);
//   host.AddService(som->get());   // must outlive the host
//
// Destroying the service cancels every job and waits for the workers.
#ifndef TESSERA_SERVICES_SOM_SOM_SERVICE_H_
#define TESSERA_SERVICES_SOM_SOM_SERVICE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <grpcpp/server_context.h>
#include <grpcpp/support/sync_stream.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/jobs/job_registry.h"
#include "services/jobs/worker_pool.h"
#include "services/server/server_options.h"
#include "services/som/atlas.h"
#include "services/som/atlas_request.h"
#include "services/som/corpus_store.h"
#include "services/som/training_engine.h"
#include "tessera/v1/som.grpc.pb.h"

namespace tessera {

struct SomServiceOptions {
  // Where atlases live. Empty: ServerOptions::atlas_dir, else
  // "<first data root>/atlases"; with neither, CreateAtlas is
  // FAILED_PRECONDITION. Created on the first save when missing.
  std::string atlas_dir;
  int workers = 1;                                // trainings run at once
  int max_queued_jobs = 8;                        // more waiting: RESOURCE_EXHAUSTED
  int max_finished_jobs = 64;
  absl::Duration finished_job_ttl = absl::Hours(1);
  int64_t max_nodes = int64_t{1} << 20;           // largest map (cells): 1024 x 1024
  // One corpus (upload or file) and one codebook; 0: ServerOptions::max_volume_bytes.
  int64_t max_corpus_bytes = 0;
  int64_t upload_store_bytes = 0;                 // 0: 4 x max_corpus_bytes
  absl::Duration upload_ttl = absl::Minutes(30);  // after last use
  absl::Duration watch_interval = absl::Milliseconds(100);
  int64_t codebook_chunk_bytes = 1 << 20;         // default GetCodebook chunk
};

class SomAtlasServiceImpl final : public v1::SomAtlasService::Service {
 public:
  // Uses options.data_roots (canonicalized; each must exist),
  // options.atlas_dir, options.max_volume_bytes (also the largest codebook),
  // options.max_send_message_bytes and options.device (the default device of
  // jobs and projections). INVALID_ARGUMENT when the atlas directory exists
  // and is not a directory.
  static absl::StatusOr<std::unique_ptr<SomAtlasServiceImpl>> Create(const ServerOptions& options,
                                                                     SomServiceOptions service_options = {});
  ~SomAtlasServiceImpl() override;

  grpc::Status UploadCorpus(grpc::ServerContext* context, grpc::ServerReader<v1::CorpusChunk>* reader,
                            v1::UploadedCorpus* response) override;
  grpc::Status CreateAtlas(grpc::ServerContext* context, const v1::CreateAtlasRequest* request,
                           v1::CreateAtlasResponse* response) override;
  grpc::Status WatchJob(grpc::ServerContext* context, const v1::SomJobRequest* request,
                        grpc::ServerWriter<v1::AtlasProgress>* writer) override;
  grpc::Status GetJob(grpc::ServerContext* context, const v1::SomJobRequest* request,
                      v1::JobStatus* response) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const v1::SomJobRequest* request,
                         v1::JobStatus* response) override;
  grpc::Status ListAtlases(grpc::ServerContext* context, const v1::ListAtlasesRequest* request,
                           v1::ListAtlasesResponse* response) override;
  grpc::Status GetAtlas(grpc::ServerContext* context, const v1::AtlasRequest* request,
                        v1::AtlasSummary* response) override;
  grpc::Status Project(grpc::ServerContext* context, const v1::ProjectRequest* request,
                       v1::ProjectResponse* response) override;
  grpc::Status GetCell(grpc::ServerContext* context, const v1::GetCellRequest* request,
                       v1::CellResponse* response) override;
  grpc::Status GetCodebook(grpc::ServerContext* context, const v1::GetCodebookRequest* request,
                           grpc::ServerWriter<v1::ArrayChunk>* writer) override;
  grpc::Status DeleteAtlas(grpc::ServerContext* context, const v1::AtlasRequest* request,
                           v1::DeleteAtlasResponse* response) override;

  const std::string& atlas_dir() const { return atlas_dir_; }
  // What CreateAtlas requests may ask for on this service.
  const som::AtlasRequestLimits& request_limits() const { return limits_; }
  jobs::JobRegistry& registry() { return registry_; }
  som::CorpusStore& uploads() { return uploads_; }

  // Serves `atlas`, saved as "<atlas dir>/<id>" by someone else (the
  // som.train engine's on_saved), at once — replacing a loaded atlas of that
  // id. NOT_FOUND when the directory has no atlas (deleted meanwhile).
  absl::Status AdoptAtlas(const std::string& id, som::Atlas atlas);

  // Options for a som.train engine (training_engine.h) that checks requests
  // as CreateAtlas does, saves into this service's atlas directory and has
  // this service serve each atlas it saves (AdoptAtlas). `share_uploads`:
  // jobs may name this service's uploads (not durable). The service must
  // outlive the engine.
  som::TrainingEngineOptions TrainingEngineOptions(bool share_uploads = false);

  // A loaded atlas and what queries need besides it.
  struct Entry {
    som::Atlas atlas;                                        // held-out quality in atlas.held_out_quality
    std::string id;
    std::string directory;
    std::unordered_map<std::string, int32_t> feature_index;  // name -> feature
  };
  struct JobSpec;   // a validated CreateAtlasRequest (defined in the .cc)
  struct EpochLog;  // a job's atlas id and every epoch's report, for WatchJob

 private:
  SomAtlasServiceImpl(const ServerOptions& options, som::AtlasRequestLimits limits,
                      SomServiceOptions service_options);

  void LoadAtlasDirectory();
  // A loaded atlas, else one found in the atlas directory (then loaded).
  absl::StatusOr<std::shared_ptr<const Entry>> FindAtlas(const std::string& id) const;
  absl::StatusOr<std::shared_ptr<const Entry>> LoadFromDirectory(const std::string& id) const;
  std::shared_ptr<EpochLog> LogOfJob(const std::string& job_id) const;

  absl::Status UploadCorpusImpl(const grpc::ServerContext& context, grpc::ServerReader<v1::CorpusChunk>* reader,
                                v1::UploadedCorpus* response);
  absl::Status CreateAtlasImpl(const v1::CreateAtlasRequest& request, v1::CreateAtlasResponse* response);
  absl::StatusOr<std::shared_ptr<JobSpec>> PrepareJob(const v1::CreateAtlasRequest& request);
  absl::Status WatchJobImpl(const grpc::ServerContext& context, const v1::SomJobRequest& request,
                            grpc::ServerWriter<v1::AtlasProgress>* writer);
  absl::Status ProjectImpl(const v1::ProjectRequest& request, v1::ProjectResponse* response);
  absl::Status GetCellImpl(const v1::GetCellRequest& request, v1::CellResponse* response);
  absl::Status GetCodebookImpl(const grpc::ServerContext& context, const v1::GetCodebookRequest& request,
                               grpc::ServerWriter<v1::ArrayChunk>* writer);
  absl::Status DeleteAtlasImpl(const v1::AtlasRequest& request, v1::DeleteAtlasResponse* response);
  void RunJob(const std::shared_ptr<jobs::Job>& job, const std::shared_ptr<const JobSpec>& spec);
  absl::StatusOr<std::shared_ptr<const Entry>> TrainAndSave(jobs::Job& job, const JobSpec& spec);

  const som::AtlasRequestLimits limits_;
  const std::string atlas_dir_;
  const int64_t max_corpus_bytes_;
  const int max_send_message_bytes_;
  const std::string default_device_;
  const SomServiceOptions service_options_;
  som::CorpusStore uploads_;

  // Held while an atlas directory is loaded on a lookup, adopted or deleted,
  // so those never interleave (not held by queries on loaded atlases).
  mutable std::mutex disk_mu_;
  mutable std::mutex atlases_mu_;
  mutable std::map<std::string, std::shared_ptr<const Entry>> atlases_;
  std::map<std::string, std::string> pending_;      // atlas id -> its queued or running job
  std::map<std::string, std::shared_ptr<EpochLog>> job_logs_;  // by job id

  jobs::JobRegistry registry_;
  std::mutex submit_mu_;   // job creation + queueing, so a failed queueing is undone atomically
  jobs::WorkerPool pool_;  // last: its threads use the members above
};

}  // namespace tessera

#endif  // TESSERA_SERVICES_SOM_SOM_SERVICE_H_

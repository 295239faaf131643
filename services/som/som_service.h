// tessera.v1.SomAtlasService (protos/tessera/v1/som.proto): SOM atlases
// trained as jobs and queried over gRPC. The job RPCs are a thin adapter over
// the scheduler (services/scheduler/scheduler.h), which runs the "som.train"
// engine (training_engine.h): there is one way to run a training, and its
// jobs are the scheduler's — durable in its store, visible to SchedulerService
// and `tessera job`, still there (with their atlases) after a restart.
//
//   CreateAtlas  the request checked as the engine checks it (with this
//                service's uploads), the atlas id chosen (RandomId "atlas-..."
//                when empty) and refused when an atlas or a queued or running
//                som.train job has it, then Scheduler::Submit. The returned
//                job_id is the scheduler's.
//   WatchJob     Scheduler::Watch from the job's first event, as AtlasProgress:
//                each state change (queued, started, re-queued, ...), each
//                recorded epoch (stage "epoch": epoch, radius, qe,
//                topographic_error, epoch_seconds) and stage, and last the
//                final state. The scheduler records progress at most every
//                progress interval, so of epochs closer together than that
//                only the latest is sent while the job runs; when it has
//                SUCCEEDED the epochs after the last one sent come from the
//                atlas's history before the final message. A re-queued job's
//                next attempt counts its epochs from 1 again.
//   GetJob       Scheduler::Get / Cancel as JobStatus.
//   CancelJob
//
// Uploads (UploadCorpus) are held in memory (a bounded CorpusStore with a
// TTL). A job must not depend on one process's memory, so CreateAtlas writes
// the upload it names once to <state dir>/som-uploads/<corpus id>.csr (with
// .features.txt / .ids.txt when it has names / ids; atomically, fsync'ed)
// and submits the request with those paths instead; the engine takes that
// folder as a data root (TrainingEngineOptions(state_dir)). Upload files that
// no queued or running som.train job names are deleted after a grace period.
//
// Atlases: every atlas found in the atlas directory (one sub-directory per
// atlas id) is loaded at start-up (one that does not load is logged and
// skipped); an atlas asked for by id that is not loaded is looked up there
// too, so atlases other writers save into the directory (`tessera som train
// --out`, another replica) are served; the engine made from
// TrainingEngineOptions has each atlas it saves served at once (AdoptAtlas).
//
//   TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<tessera::SomAtlasServiceImpl> som,
//                            tessera::SomAtlasServiceImpl::Create(server_options));
//   // engines (som.train from som->TrainingEngineOptions(state_dir)), then
//   // the scheduler over them, started:
//   TESSERA_RETURN_IF_ERROR(som->AttachScheduler(scheduler.get(), state_dir));
//   host.AddService(som.get());   // the service and the scheduler must outlive the host
//
// Without a scheduler (a `tessera serve --role worker` process, whose jobs a
// scheduler sends through WorkerService) UploadCorpus and the job RPCs answer
// FAILED_PRECONDITION naming SchedulerService; the queries still work.
#ifndef TESSERA_SERVICES_SOM_SOM_SERVICE_H_
#define TESSERA_SERVICES_SOM_SOM_SERVICE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <grpcpp/server_context.h>
#include <grpcpp/support/sync_stream.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/jobs/job_core.h"
#include "services/scheduler/scheduler.h"
#include "services/server/server_options.h"
#include "services/som/atlas.h"
#include "services/som/atlas_request.h"
#include "services/som/cell_index.h"
#include "services/som/corpus_store.h"
#include "services/som/resident_codebook.h"
#include "services/som/training_engine.h"
#include "tessera/v1/som.grpc.pb.h"

namespace tessera {

struct SomServiceOptions {
  // Where atlases live. Empty: ServerOptions::atlas_dir, else
  // "<first data root>/atlases"; with neither, CreateAtlas is
  // FAILED_PRECONDITION. Created on the first save when missing.
  std::string atlas_dir;
  int64_t max_nodes = int64_t{1} << 20;           // largest map (cells): 1024 x 1024
  // One corpus (upload or file) and one codebook; 0: ServerOptions::max_volume_bytes.
  int64_t max_corpus_bytes = 0;
  int64_t upload_store_bytes = 0;                 // 0: 4 x max_corpus_bytes
  absl::Duration upload_ttl = absl::Minutes(30);  // after last use
  int64_t codebook_chunk_bytes = 1 << 20;         // default GetCodebook chunk
  // Upload files under <state dir>/som-uploads that no queued or running
  // som.train job names are deleted once untouched this long (looked at, at
  // most every upload_sweep_interval, by CreateAtlas).
  absl::Duration upload_file_grace = absl::Hours(1);
  absl::Duration upload_sweep_interval = absl::Minutes(10);
};

// <state_dir>/som-uploads: where SomAtlasService writes the uploads a
// CreateAtlas names. The som.train engine of a process whose jobs may name
// them takes it as a data root; CreateSomUploadDir makes it (and returns its
// canonical path).
std::string SomUploadDir(const std::string& state_dir);
absl::StatusOr<std::string> CreateSomUploadDir(const std::string& state_dir);

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

  // The scheduler CreateAtlas submits to (started; it must run a som.train
  // engine made from TrainingEngineOptions(state_dir)), and its state
  // directory. Once, before serving; the scheduler must outlive the
  // service's last call.
  absl::Status AttachScheduler(scheduler::Scheduler* scheduler, const std::string& state_dir);

  grpc::Status UploadCorpus(grpc::ServerContext* context, grpc::ServerReader<v1::CorpusChunk>* reader,
                            v1::UploadedCorpus* response) override;
  grpc::Status CreateAtlas(grpc::ServerContext* context, const v1::CreateAtlasRequest* request,
                           v1::CreateAtlasResponse* response) override;
  grpc::Status WatchJob(grpc::ServerContext* context, const v1::JobRef* request,
                        grpc::ServerWriter<v1::AtlasProgress>* writer) override;
  grpc::Status GetJob(grpc::ServerContext* context, const v1::JobRef* request,
                      v1::JobStatus* response) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const v1::JobRef* request,
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
  som::CorpusStore& uploads() { return uploads_; }

  // Serves `atlas`, saved as "<atlas dir>/<id>" by someone else (the
  // som.train engine's on_saved), at once — replacing a loaded atlas of that
  // id. NOT_FOUND when the directory has no atlas (deleted meanwhile).
  absl::Status AdoptAtlas(const std::string& id, som::Atlas atlas);

  // Options for a som.train engine (training_engine.h) that checks requests
  // as CreateAtlas does, saves into this service's atlas directory and has
  // this service serve each atlas it saves (AdoptAtlas). With a state
  // directory, its data roots include SomUploadDir(state_dir) (created), where
  // CreateAtlas writes uploads. The service must outlive the engine.
  absl::StatusOr<som::TrainingEngineOptions> TrainingEngineOptions(const std::string& state_dir = "");

  // Deletes the upload files no queued or running som.train job names and
  // untouched for upload_file_grace; returns how many. (CreateAtlas calls it
  // now and then.) FAILED_PRECONDITION without a scheduler.
  absl::StatusOr<int> SweepUploadFiles() { return jobs_.SweepUploads(); }

  // A loaded atlas and what queries need besides it, built once when the
  // atlas is loaded or adopted and freed with the entry (when the atlas is
  // unloaded, deleted or replaced and no call holds it any more).
  struct Entry {
    som::Atlas atlas;                                        // held-out quality in atlas.held_out_quality
    std::string id;
    std::string directory;
    std::unordered_map<std::string, int32_t> feature_index;  // name -> feature
    som::CellIndex cells;                                    // GetCell: documents per node
    // CUDA Project: the codebook on the GPU, uploaded on first use (of atlas.model).
    std::unique_ptr<som::ResidentCodebook> device_codebook;
  };

 private:
  SomAtlasServiceImpl(const ServerOptions& options, som::AtlasRequestLimits limits,
                      SomServiceOptions service_options);

  void LoadAtlasDirectory();
  // A loaded atlas, else one found in the atlas directory (then loaded).
  absl::StatusOr<std::shared_ptr<const Entry>> FindAtlas(const std::string& id) const;
  absl::StatusOr<std::shared_ptr<const Entry>> LoadFromDirectory(const std::string& id) const;

  // The queued and running som.train jobs with their requests.
  struct PendingJob {
    jobs::JobRecord job;
    v1::CreateAtlasRequest request;
    std::string atlas_id;  // the request's, or the engine's default for the job
  };
  absl::StatusOr<std::vector<PendingJob>> PendingJobs() const;

  absl::Status UploadCorpusImpl(const grpc::ServerContext& context, grpc::ServerReader<v1::CorpusChunk>* reader,
                                v1::UploadedCorpus* response);
  absl::Status CreateAtlasImpl(const jobs::JobCaller& caller, const v1::CreateAtlasRequest& request,
                               v1::CreateAtlasResponse* response);
  // A new CreateAtlas's checks and files (under the job core's submit lock):
  // the request as the engine checks it, the atlas id chosen and refused
  // when an atlas or a pending job has it, the upload written.
  absl::StatusOr<std::unique_ptr<google::protobuf::Message>> PrepareCreateAtlas(
      const v1::CreateAtlasRequest& request);
  // Writes the upload `corpus_id` (once) under the upload directory and
  // points `source` at the files.
  absl::Status WriteUploadFiles(const std::string& corpus_id, const som::StoredCorpus& corpus,
                                v1::CorpusSource* source);
  absl::Status WatchJobImpl(const grpc::ServerContext& context, const v1::JobRef& request,
                            grpc::ServerWriter<v1::AtlasProgress>* writer);
  absl::Status ProjectImpl(const v1::ProjectRequest& request, v1::ProjectResponse* response);
  absl::Status GetCellImpl(const v1::GetCellRequest& request, v1::CellResponse* response);
  absl::Status GetCodebookImpl(const grpc::ServerContext& context, const v1::GetCodebookRequest& request,
                               grpc::ServerWriter<v1::ArrayChunk>* writer);
  absl::Status DeleteAtlasImpl(const v1::AtlasRequest& request, v1::DeleteAtlasResponse* response);

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

  // Submits one at a time (serialize_submits), so no atlas id is submitted
  // twice by this service and no file is swept between its writing and its
  // job's submit.
  jobs::JobCore jobs_;
};

}  // namespace tessera

#endif  // TESSERA_SERVICES_SOM_SOM_SERVICE_H_

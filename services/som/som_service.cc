#include "services/som/som_service.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/device.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/status.h"
#include "services/common/chunked_upload.h"
#include "services/common/data_roots.h"
#include "services/common/random_id.h"
#include "services/jobs/job_proto.h"
#include "services/jobs/watch.h"
#include "services/server/call_checks.h"
#include "kernels/som/bmu.h"
#include "kernels/som/documents.h"
#include "kernels/som/quality.h"
#include "services/som/atlas_job_progress.h"
#include "services/som/atlas_training.h"
#include "services/som/som_proto.h"

namespace tessera {

using jobs::IsTerminal;
using jobs::Job;
using jobs::JobSnapshot;
using som::Atlas;
using som::SparseBinaryMatrix;
using som::StoredCorpus;

namespace {

namespace fs = std::filesystem;

constexpr char kJobKind[] = "som-atlas";
constexpr int kMaxPageSize = 10000;
constexpr int kMaxTopFeatures = 1000;

absl::Status CheckLine(absl::string_view what, const std::string& s) {
  if (s.find_first_of("\r\n") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", absl::CEscape(s), "' contains a line break"));
  }
  return absl::OkStatus();
}

std::shared_ptr<const SomAtlasServiceImpl::Entry> MakeEntry(Atlas atlas, std::string id, std::string directory) {
  auto entry = std::make_shared<SomAtlasServiceImpl::Entry>();
  entry->atlas = std::move(atlas);
  entry->id = std::move(id);
  entry->directory = std::move(directory);
  const std::vector<std::string>& names = entry->atlas.feature_names;
  entry->feature_index.reserve(names.size());
  for (size_t v = 0; v < names.size(); ++v) entry->feature_index.emplace(names[v], static_cast<int32_t>(v));
  return entry;
}

// Fills a corpus row by row from an upload, checking as it goes.
class CorpusBuilder {
 public:
  absl::Status AddChunk(const v1::CorpusChunk& chunk) {
    if (chunk.num_features() != 0) {
      if (chunk.num_features() < 0 || chunk.num_features() > std::numeric_limits<int32_t>::max()) {
        return absl::InvalidArgumentError(
            absl::StrCat("num_features ", chunk.num_features(), " must be in 1..", std::numeric_limits<int32_t>::max()));
      }
      if (num_features_ != 0 && num_features_ != chunk.num_features()) {
        return absl::InvalidArgumentError(
            absl::StrCat("num_features given twice: ", num_features_, " and ", chunk.num_features()));
      }
      num_features_ = chunk.num_features();
    }
    for (const std::string& name : chunk.feature_names()) {
      TESSERA_RETURN_IF_ERROR(CheckLine("feature name", name));
      names_.push_back(name);
      string_bytes_ += static_cast<int64_t>(sizeof(std::string) + name.size());
    }
    for (const v1::SparseDocument& row : chunk.rows()) {
      const int64_t r = static_cast<int64_t>(offsets_.size()) - 1;
      if (!row.feature_names().empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("row ", r, ": uploads give features by index (feature_names is for Project)"));
      }
      columns_.assign(row.features().begin(), row.features().end());
      std::sort(columns_.begin(), columns_.end());
      for (size_t k = 0; k < columns_.size(); ++k) {
        if (columns_[k] < 0) {
          return absl::InvalidArgumentError(absl::StrCat("row ", r, ": feature index ", columns_[k], " is negative"));
        }
        if (k > 0 && columns_[k] == columns_[k - 1]) {
          return absl::InvalidArgumentError(absl::StrCat("row ", r, ": feature ", columns_[k], " appears twice"));
        }
      }
      if (!columns_.empty()) max_index_ = std::max<int64_t>(max_index_, columns_.back());
      indices_.insert(indices_.end(), columns_.begin(), columns_.end());
      offsets_.push_back(static_cast<int64_t>(indices_.size()));
      if (!row.id().empty()) {
        TESSERA_RETURN_IF_ERROR(CheckLine("document id", row.id()));
        ids_.resize(r);  // earlier rows without ids
        ids_.push_back(row.id());
        string_bytes_ += static_cast<int64_t>(sizeof(std::string) + row.id().size());
      }
    }
    return absl::OkStatus();
  }

  int64_t bytes() const {
    return 8 * static_cast<int64_t>(offsets_.size()) + 4 * static_cast<int64_t>(indices_.size()) + string_bytes_ +
           static_cast<int64_t>(sizeof(std::string)) * static_cast<int64_t>(ids_.size());
  }

  absl::StatusOr<std::shared_ptr<StoredCorpus>> Finish() {
    const int64_t rows = static_cast<int64_t>(offsets_.size()) - 1;
    if (rows == 0) return absl::InvalidArgumentError("the corpus has no documents (rows)");
    int64_t cols = num_features_ != 0 ? num_features_
                   : !names_.empty()  ? static_cast<int64_t>(names_.size())
                                      : max_index_ + 1;
    if (cols <= 0) return absl::InvalidArgumentError("the corpus has no features (every row is empty)");
    if (max_index_ >= cols) {
      return absl::InvalidArgumentError(
          absl::StrCat("feature index ", max_index_, " is out of range: the corpus has ", cols, " features"));
    }
    if (!names_.empty() && static_cast<int64_t>(names_.size()) != cols) {
      return absl::InvalidArgumentError(
          absl::StrCat(names_.size(), " feature names for ", cols, " features; give one name per feature or none"));
    }
    if (!ids_.empty()) ids_.resize(rows);
    auto corpus = std::make_shared<StoredCorpus>();
    corpus->matrix = SparseBinaryMatrix(cols, std::move(offsets_), std::move(indices_));
    TESSERA_RETURN_IF_ERROR(corpus->matrix.Validate());
    corpus->feature_names = std::move(names_);
    corpus->document_ids = std::move(ids_);
    return corpus;
  }

 private:
  int64_t num_features_ = 0;
  int64_t max_index_ = -1;
  std::vector<int64_t> offsets_{0};
  std::vector<int32_t> indices_;
  std::vector<int32_t> columns_;
  std::vector<std::string> names_, ids_;
  int64_t string_bytes_ = 0;
};

}  // namespace

// Epochs can end faster than a watcher reads the job's latest progress; the
// log keeps them all so WatchJob sends one message per epoch.
struct SomAtlasServiceImpl::EpochLog {
  std::string atlas_id;
  std::mutex mu;
  std::vector<som::AtlasTrainingProgress> epochs;
};

struct SomAtlasServiceImpl::JobSpec {
  std::string atlas_id;
  std::shared_ptr<EpochLog> log;
  som::AtlasJobRequest request;
};

// ---------------------------------------------------------------- creation

absl::StatusOr<std::unique_ptr<SomAtlasServiceImpl>> SomAtlasServiceImpl::Create(const ServerOptions& options,
                                                                                 SomServiceOptions service_options) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> roots, CanonicalDataRoots(options.data_roots));
  if (options.max_volume_bytes <= 0) return absl::InvalidArgumentError("max_volume_bytes must be positive");
  TESSERA_RETURN_IF_ERROR(ResolveBackend(options.device).status());
  if (service_options.workers < 1) return absl::InvalidArgumentError("workers must be at least 1");
  if (service_options.max_queued_jobs < 0 || service_options.max_finished_jobs < 0) {
    return absl::InvalidArgumentError("job limits must not be negative");
  }
  if (service_options.max_nodes < 1) return absl::InvalidArgumentError("max_nodes must be positive");
  if (service_options.max_corpus_bytes < 0 || service_options.upload_store_bytes < 0 ||
      service_options.codebook_chunk_bytes <= 0) {
    return absl::InvalidArgumentError("corpus, upload store and chunk sizes must be positive");
  }
  if (service_options.max_corpus_bytes == 0) service_options.max_corpus_bytes = options.max_volume_bytes;
  if (service_options.upload_store_bytes == 0) {
    service_options.upload_store_bytes = service_options.max_corpus_bytes > std::numeric_limits<int64_t>::max() / 4
                                             ? std::numeric_limits<int64_t>::max()
                                             : 4 * service_options.max_corpus_bytes;
  }
  std::string atlas_dir = !service_options.atlas_dir.empty() ? service_options.atlas_dir
                          : !options.atlas_dir.empty()       ? options.atlas_dir
                          : !roots.empty()                   ? roots.front() + "/atlases"
                                                             : std::string();
  if (!atlas_dir.empty()) {
    std::error_code ec;
    if (fs::exists(atlas_dir, ec) && !fs::is_directory(atlas_dir, ec)) {
      return absl::InvalidArgumentError(absl::StrCat("atlas directory '", atlas_dir, "' is not a directory"));
    }
  }
  som::AtlasRequestLimits limits;
  limits.data_roots = std::move(roots);
  limits.atlas_dir = std::move(atlas_dir);
  limits.default_device = options.device;
  limits.max_nodes = service_options.max_nodes;
  limits.max_corpus_bytes = service_options.max_corpus_bytes;
  std::unique_ptr<SomAtlasServiceImpl> service(new SomAtlasServiceImpl(options, std::move(limits), service_options));
  service->LoadAtlasDirectory();
  return service;
}

SomAtlasServiceImpl::SomAtlasServiceImpl(const ServerOptions& options, som::AtlasRequestLimits limits,
                                         SomServiceOptions service_options)
    : limits_(std::move(limits)),
      atlas_dir_(limits_.atlas_dir),
      max_corpus_bytes_(service_options.max_corpus_bytes),
      max_send_message_bytes_(options.max_send_message_bytes),
      default_device_(options.device),
      service_options_(service_options),
      uploads_(som::CorpusStore::Options{service_options.upload_store_bytes, service_options.upload_ttl, 256}),
      registry_(jobs::JobRegistryOptions{service_options.max_finished_jobs, service_options.finished_job_ttl}),
      pool_(service_options.workers, service_options.max_queued_jobs) {}

SomAtlasServiceImpl::~SomAtlasServiceImpl() {
  registry_.CancelAll();
  pool_.Shutdown();
}

void SomAtlasServiceImpl::LoadAtlasDirectory() {
  if (atlas_dir_.empty()) {
    TESSERA_LOG(WARNING) << "som: no atlas directory (no --atlas-dir or data root); CreateAtlas is unavailable";
    return;
  }
  std::error_code ec;
  fs::directory_iterator it(atlas_dir_, ec);
  if (ec) {
    if (fs::exists(atlas_dir_)) {
      TESSERA_LOG(WARNING) << "som: cannot list '" << atlas_dir_ << "': " << ec.message();
    }
    return;
  }
  int loaded = 0;
  for (const fs::directory_entry& dir : it) {
    if (!dir.is_directory(ec)) continue;
    const std::string id = dir.path().filename().string();
    const std::string path = dir.path().string();
    if (!som::ValidateAtlasId(id).ok()) {
      TESSERA_LOG(WARNING) << "som: skipping '" << path << "': not a valid atlas id";
      continue;
    }
    absl::StatusOr<Atlas> atlas = som::LoadAtlas(path);
    if (!atlas.ok()) {
      TESSERA_LOG(WARNING) << "som: skipping atlas '" << path << "': " << atlas.status();
      continue;
    }
    std::lock_guard<std::mutex> lock(atlases_mu_);
    atlases_[id] = MakeEntry(*std::move(atlas), id, path);
    ++loaded;
  }
  TESSERA_LOG(INFO) << "som: " << loaded << " atlas(es) loaded from '" << atlas_dir_ << "'";
}

absl::StatusOr<std::shared_ptr<const SomAtlasServiceImpl::Entry>> SomAtlasServiceImpl::FindAtlas(
    const std::string& id) const {
  {
    std::lock_guard<std::mutex> lock(atlases_mu_);
    auto it = atlases_.find(id);
    if (it != atlases_.end()) return it->second;
    if (pending_.count(id) > 0) {
      return absl::NotFoundError(absl::StrCat("no atlas '", id, "' yet (its training job has not finished)"));
    }
  }
  // Saved by another writer of the atlas directory (the scheduler's
  // som.train engine, `tessera som train --out`, another replica).
  if (atlas_dir_.empty() || !som::ValidateAtlasId(id).ok()) {
    return absl::NotFoundError(absl::StrCat("no atlas '", id, "'"));
  }
  return LoadFromDirectory(id);
}

absl::StatusOr<std::shared_ptr<const SomAtlasServiceImpl::Entry>> SomAtlasServiceImpl::LoadFromDirectory(
    const std::string& id) const {
  std::lock_guard<std::mutex> disk(disk_mu_);
  {
    std::lock_guard<std::mutex> lock(atlases_mu_);  // loaded while this waited?
    auto it = atlases_.find(id);
    if (it != atlases_.end()) return it->second;
  }
  const std::string directory = (fs::path(atlas_dir_) / id).string();
  std::error_code ec;
  if (!fs::exists(fs::path(directory) / "manifest.json", ec)) {
    return absl::NotFoundError(absl::StrCat("no atlas '", id, "'"));
  }
  absl::StatusOr<Atlas> atlas = som::LoadAtlas(directory);
  if (!atlas.ok()) {
    return absl::NotFoundError(
        absl::StrCat("no atlas '", id, "': '", directory, "' does not load (", atlas.status().ToString(), ")"));
  }
  std::shared_ptr<const Entry> entry = MakeEntry(*std::move(atlas), id, directory);
  std::lock_guard<std::mutex> lock(atlases_mu_);
  atlases_[id] = entry;
  TESSERA_LOG(INFO) << "som: atlas '" << id << "' loaded from '" << directory << "'";
  return entry;
}

absl::Status SomAtlasServiceImpl::AdoptAtlas(const std::string& id, Atlas atlas) {
  TESSERA_RETURN_IF_ERROR(som::ValidateAtlasId(id));
  if (atlas_dir_.empty()) return absl::FailedPreconditionError("this service has no atlas directory");
  const std::string directory = (fs::path(atlas_dir_) / id).string();
  std::lock_guard<std::mutex> disk(disk_mu_);
  std::error_code ec;
  if (!fs::exists(fs::path(directory) / "manifest.json", ec)) {  // deleted meanwhile
    return absl::NotFoundError(absl::StrCat("no atlas in '", directory, "'"));
  }
  std::lock_guard<std::mutex> lock(atlases_mu_);
  atlases_[id] = MakeEntry(std::move(atlas), id, directory);
  return absl::OkStatus();
}

som::TrainingEngineOptions SomAtlasServiceImpl::TrainingEngineOptions(bool share_uploads) {
  som::TrainingEngineOptions options;
  options.limits = limits_;
  options.uploads = share_uploads ? &uploads_ : nullptr;
  options.on_saved = [this](const std::string& id, Atlas atlas) {
    absl::Status adopted = AdoptAtlas(id, std::move(atlas));
    if (!adopted.ok()) {
      TESSERA_LOG(WARNING) << "som: atlas '" << id << "' saved by a job: " << adopted;
    }
  };
  return options;
}

std::shared_ptr<SomAtlasServiceImpl::EpochLog> SomAtlasServiceImpl::LogOfJob(const std::string& job_id) const {
  std::lock_guard<std::mutex> lock(atlases_mu_);
  auto it = job_logs_.find(job_id);
  return it == job_logs_.end() ? nullptr : it->second;
}

// ---------------------------------------------------------------- uploads

grpc::Status SomAtlasServiceImpl::UploadCorpus(grpc::ServerContext* context,
                                               grpc::ServerReader<v1::CorpusChunk>* reader,
                                               v1::UploadedCorpus* response) {
  return ToGrpcStatus(UploadCorpusImpl(*context, reader, response));
}

absl::Status SomAtlasServiceImpl::UploadCorpusImpl(const grpc::ServerContext& context,
                                                   grpc::ServerReader<v1::CorpusChunk>* reader,
                                                   v1::UploadedCorpus* response) {
  CorpusBuilder builder;
  v1::CorpusChunk chunk;
  while (reader->Read(&chunk)) {
    TESSERA_RETURN_IF_ERROR(CheckNotCancelled(context));
    TESSERA_RETURN_IF_ERROR(builder.AddChunk(chunk));
    if (builder.bytes() > max_corpus_bytes_) {
      return absl::ResourceExhaustedError(absl::StrCat("the corpus exceeds this server's limit of ",
                                                       max_corpus_bytes_, " bytes per corpus"));
    }
    const int64_t free = uploads_.FreeBytes();
    if (builder.bytes() > free) {
      return absl::ResourceExhaustedError(absl::StrCat("the corpus store is full (", free, " of ",
                                                       uploads_.options().max_total_bytes,
                                                       " bytes free); retry once earlier uploads expire"));
    }
  }
  TESSERA_RETURN_IF_ERROR(CheckNotCancelled(context));
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<StoredCorpus> corpus, builder.Finish());
  const SparseBinaryMatrix& m = corpus->matrix;
  response->set_documents(m.rows());
  response->set_features(m.cols());
  response->set_nonzeros(m.nnz());
  TESSERA_ASSIGN_OR_RETURN(som::CorpusStore::Entry entry, uploads_.Put(std::move(corpus)));
  response->set_corpus_id(entry.id);
  response->set_nbytes(entry.nbytes);
  response->set_expires_unix_ms(absl::ToUnixMillis(entry.expires));
  TESSERA_LOG(INFO) << "som: upload " << entry.id << ": " << response->documents() << " documents x "
                    << response->features() << " features, " << response->nonzeros() << " non-zeros";
  return absl::OkStatus();
}

// ---------------------------------------------------------------- create

grpc::Status SomAtlasServiceImpl::CreateAtlas(grpc::ServerContext* /*context*/, const v1::CreateAtlasRequest* request,
                                              v1::CreateAtlasResponse* response) {
  return ToGrpcStatus(CreateAtlasImpl(*request, response));
}

absl::StatusOr<std::shared_ptr<SomAtlasServiceImpl::JobSpec>> SomAtlasServiceImpl::PrepareJob(
    const v1::CreateAtlasRequest& request) {
  auto spec = std::make_shared<JobSpec>();
  TESSERA_ASSIGN_OR_RETURN(spec->request, som::PrepareAtlasJob(request, limits_, &uploads_));
  spec->atlas_id = spec->request.atlas_id.empty() ? RandomId("atlas-") : spec->request.atlas_id;
  return spec;
}

absl::Status SomAtlasServiceImpl::CreateAtlasImpl(const v1::CreateAtlasRequest& request,
                                                  v1::CreateAtlasResponse* response) {
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<JobSpec> spec, PrepareJob(request));
  std::lock_guard<std::mutex> submit(submit_mu_);
  bool created = false;
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Job> job, registry_.GetOrCreate("", kJobKind, &created));
  {
    std::lock_guard<std::mutex> lock(atlases_mu_);
    // A job that ended without running (cancelled while queued) no longer
    // holds its atlas id; its worker leaves the new holder alone.
    auto pending = pending_.find(spec->atlas_id);
    const bool training = pending != pending_.end() && [&] {
      absl::StatusOr<std::shared_ptr<Job>> holder = registry_.Get(pending->second);
      return holder.ok() && !IsTerminal((*holder)->Snapshot().state);
    }();
    absl::Status taken;
    if (atlases_.count(spec->atlas_id) > 0 || training) {
      taken = absl::AlreadyExistsError(absl::StrCat("atlas '", spec->atlas_id, "' already exists",
                                                    training ? " (being trained)" : "",
                                                    "; pick another atlas_id or DeleteAtlas it first"));
    } else {
      taken = som::CheckAtlasIdFree(atlas_dir_, spec->atlas_id);
    }
    if (!taken.ok()) {
      registry_.Remove(job->id());
      return taken;
    }
    pending_[spec->atlas_id] = job->id();
    // Forget the atlas ids of jobs the registry has dropped.
    for (auto it = job_logs_.begin(); it != job_logs_.end();) {
      it = registry_.Get(it->first).ok() ? std::next(it) : job_logs_.erase(it);
    }
    spec->log = std::make_shared<EpochLog>();
    spec->log->atlas_id = spec->atlas_id;
    job_logs_[job->id()] = spec->log;
  }
  std::shared_ptr<const JobSpec> const_spec = spec;
  absl::Status queued = pool_.TrySubmit([this, job, const_spec] { RunJob(job, const_spec); });
  if (!queued.ok()) {
    registry_.Remove(job->id());
    std::lock_guard<std::mutex> lock(atlases_mu_);
    pending_.erase(spec->atlas_id);
    return queued;
  }
  TESSERA_LOG(INFO) << "som: job " << job->id() << " queued: atlas '" << spec->atlas_id << "' "
                    << som::GridToString(spec->request.options.train.grid) << " from " << spec->request.description
                    << " on " << spec->request.options.device;
  *response->mutable_job() = jobs::ToJobStatusProto(job->Snapshot());
  response->set_atlas_id(spec->atlas_id);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- the worker

void SomAtlasServiceImpl::RunJob(const std::shared_ptr<Job>& job, const std::shared_ptr<const JobSpec>& spec) {
  // The atlas id is free again (or taken by the atlas) before the job is
  // reported ended, so a client reacting to the end sees it so.
  const auto settle = [&](std::shared_ptr<const Entry> entry) {
    std::lock_guard<std::mutex> lock(atlases_mu_);
    auto pending = pending_.find(spec->atlas_id);
    if (pending != pending_.end() && pending->second == job->id()) pending_.erase(pending);
    if (entry != nullptr) atlases_[spec->atlas_id] = std::move(entry);
  };
  if (!job->Start()) {  // cancelled while queued
    settle(nullptr);
    return;
  }
  TESSERA_LOG(INFO) << "som: job " << job->id() << " running";
  absl::StatusOr<std::shared_ptr<const Entry>> entry = TrainAndSave(*job, *spec);
  if (entry.ok()) {
    TESSERA_LOG(INFO) << "som: job " << job->id() << " succeeded: atlas '" << spec->atlas_id << "' in "
                      << (*entry)->directory << ", " << (*entry)->atlas.epochs << " epochs, QE "
                      << (*entry)->atlas.final_quality.qe_euclidean;
    settle(*entry);
    job->Succeed(nullptr);
  } else {
    TESSERA_LOG(INFO) << "som: job " << job->id() << " ended: " << entry.status();
    settle(nullptr);
    job->Fail(entry.status());
  }
}

absl::StatusOr<std::shared_ptr<const SomAtlasServiceImpl::Entry>> SomAtlasServiceImpl::TrainAndSave(
    Job& job, const JobSpec& spec) {
  som::AtlasTrainingCallbacks callbacks;
  callbacks.progress = [&job, log = spec.log](const som::AtlasTrainingProgress& p) {
    if (p.stage == "epoch") {
      std::lock_guard<std::mutex> lock(log->mu);
      log->epochs.push_back(p);
    }
    job.SetProgress(som::ToJobProgress(p));
  };
  callbacks.check_continue = [&job] {
    return job.cancel_requested() ? absl::CancelledError("atlas training cancelled") : absl::OkStatus();
  };
  TESSERA_ASSIGN_OR_RETURN(
      som::AtlasTrainingSummary saved,
      som::TrainAndSaveAtlas(spec.request.input, som::TrainingOptionsFor(spec.request, limits_, spec.atlas_id),
                             callbacks));
  return MakeEntry(std::move(saved.atlas), spec.atlas_id, saved.directory);
}

// ---------------------------------------------------------------- jobs

namespace {

v1::AtlasProgress EpochProgress(const std::string& job_id, const std::string& atlas_id,
                                const som::AtlasTrainingProgress& e) {
  const som::EpochReport& r = e.epoch;
  v1::AtlasProgress p;
  p.set_job_id(job_id);
  p.set_atlas_id(atlas_id);
  p.set_state(v1::JOB_STATE_RUNNING);
  p.set_stage(e.stage);
  p.set_epoch(r.epoch + 1);
  p.set_max_epochs(e.max_epochs);
  p.set_radius(r.radius);
  p.set_qe(r.qe);
  p.set_topographic_error(r.topographic_error);
  p.set_epoch_seconds(r.seconds);
  p.set_fraction(e.fraction);
  p.set_message(e.message);
  return p;
}

v1::AtlasProgress ToAtlasProgress(const JobSnapshot& s, const std::string& atlas_id) {
  const v1::Progress generic = jobs::ToProgressProto(s);
  v1::AtlasProgress p;
  p.set_job_id(s.id);
  p.set_atlas_id(atlas_id);
  p.set_state(generic.state());
  p.set_stage(s.progress.stage);
  p.set_fraction(generic.fraction());
  p.set_message(generic.message());
  const auto metric = [&](const char* name) {
    auto it = s.progress.metrics.find(name);
    return it == s.progress.metrics.end() ? 0.0 : it->second;
  };
  p.set_epoch(static_cast<int32_t>(metric("epoch")));
  p.set_max_epochs(static_cast<int32_t>(s.progress.total_steps));
  p.set_radius(metric("radius"));
  p.set_qe(metric("qe"));
  p.set_topographic_error(metric("topographic_error"));
  p.set_epoch_seconds(metric("epoch_seconds"));
  return p;
}

}  // namespace

grpc::Status SomAtlasServiceImpl::WatchJob(grpc::ServerContext* context, const v1::SomJobRequest* request,
                                           grpc::ServerWriter<v1::AtlasProgress>* writer) {
  return ToGrpcStatus(WatchJobImpl(*context, *request, writer));
}

absl::Status SomAtlasServiceImpl::WatchJobImpl(const grpc::ServerContext& context, const v1::SomJobRequest& request,
                                               grpc::ServerWriter<v1::AtlasProgress>* writer) {
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Job> job, registry_.Get(request.job_id()));
  const std::shared_ptr<EpochLog> log = LogOfJob(job->id());
  const std::string atlas_id = log != nullptr ? log->atlas_id : std::string();
  size_t sent_epochs = 0;
  return jobs::WatchJobSnapshots(context, *job, service_options_.watch_interval, [&](const JobSnapshot& s) {
    // Every epoch not sent yet, then the job's own state unless an epoch just said it.
    std::vector<v1::AtlasProgress> batch;
    if (log != nullptr) {
      std::lock_guard<std::mutex> lock(log->mu);
      for (; sent_epochs < log->epochs.size(); ++sent_epochs) {
        batch.push_back(EpochProgress(job->id(), atlas_id, log->epochs[sent_epochs]));
      }
    }
    if (log == nullptr || IsTerminal(s.state) || s.progress.stage != "epoch" || s.cancel_requested) {
      batch.push_back(ToAtlasProgress(s, atlas_id));
    }
    for (const v1::AtlasProgress& p : batch) {
      if (!writer->Write(p)) return false;
    }
    return true;
  });
}

grpc::Status SomAtlasServiceImpl::GetJob(grpc::ServerContext* /*context*/, const v1::SomJobRequest* request,
                                         v1::JobStatus* response) {
  absl::StatusOr<v1::JobStatus> status = jobs::GetJobStatus(registry_, request->job_id());
  if (!status.ok()) return ToGrpcStatus(status.status());
  *response = *std::move(status);
  return grpc::Status::OK;
}

grpc::Status SomAtlasServiceImpl::CancelJob(grpc::ServerContext* /*context*/, const v1::SomJobRequest* request,
                                            v1::JobStatus* response) {
  absl::StatusOr<v1::JobStatus> status = jobs::RequestJobCancel(registry_, request->job_id(), "som");
  if (!status.ok()) return ToGrpcStatus(status.status());
  *response = *std::move(status);
  return grpc::Status::OK;
}

// ---------------------------------------------------------------- atlases

grpc::Status SomAtlasServiceImpl::ListAtlases(grpc::ServerContext* /*context*/,
                                              const v1::ListAtlasesRequest* /*request*/,
                                              v1::ListAtlasesResponse* response) {
  std::vector<std::shared_ptr<const Entry>> entries;
  {
    std::lock_guard<std::mutex> lock(atlases_mu_);
    for (const auto& [id, entry] : atlases_) entries.push_back(entry);
  }
  for (const auto& e : entries) {
    *response->add_atlases() = som::ToAtlasSummary(e->atlas, e->id, e->directory, false);
  }
  return grpc::Status::OK;
}

grpc::Status SomAtlasServiceImpl::GetAtlas(grpc::ServerContext* /*context*/, const v1::AtlasRequest* request,
                                           v1::AtlasSummary* response) {
  absl::StatusOr<std::shared_ptr<const Entry>> e = FindAtlas(request->atlas_id());
  if (!e.ok()) return ToGrpcStatus(e.status());
  *response = som::ToAtlasSummary((*e)->atlas, (*e)->id, (*e)->directory, true);
  return grpc::Status::OK;
}

namespace {

// On the CPU the atlas's host codebook is searched in place, not copied per
// request as ProjectDocuments does (126 MB for 32x32 x 30,766 features); the
// same feature-major BMU search, so the same cells.
absl::StatusOr<som::Projection> ProjectOnAtlas(const Atlas& atlas, const SparseBinaryMatrix& docs, Backend backend) {
  // Both paths only read the model; its view is non-const for the kernels' sake.
  som::SomModel& model = const_cast<som::SomModel&>(atlas.model);
  if (backend != Backend::kCpu) return som::ProjectDocuments(model, docs, backend);
  const Stream cpu = Stream::Cpu();
  som::DocumentParts parts;
  parts.tiles = false;  // only the tiled CUDA kernels read tiles
  TESSERA_ASSIGN_OR_RETURN(som::DocumentSet set, som::DocumentSet::Create(docs.view(), cpu, parts));
  const size_t n = static_cast<size_t>(docs.rows());
  som::Projection p;
  p.bmu.resize(n);
  p.second.resize(n);
  p.score.resize(n);
  TESSERA_RETURN_IF_ERROR(som::FindBmus(cpu, som::BmuAlgorithm::kFeatureMajor, set, model.view(),
                                        som::BmuOutput{p.bmu.data(), p.second.data(), p.score.data()}));
  TESSERA_RETURN_IF_ERROR(cpu.Synchronize());
  p.quality = som::ComputeQuality(docs.offsets().data(), docs.rows(), p.bmu.data(), p.second.data(), p.score.data(),
                                  model.sq_norms.data(), model.grid);
  return p;
}

}  // namespace

grpc::Status SomAtlasServiceImpl::Project(grpc::ServerContext* /*context*/, const v1::ProjectRequest* request,
                                          v1::ProjectResponse* response) {
  return ToGrpcStatus(ProjectImpl(*request, response));
}

absl::Status SomAtlasServiceImpl::ProjectImpl(const v1::ProjectRequest& request, v1::ProjectResponse* response) {
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const Entry> e, FindAtlas(request.atlas_id()));
  const std::string device = request.device().empty() ? default_device_ : request.device();
  if (device != "auto" && device != "cpu" && device != "cuda" && device != "gpu") {
    return absl::InvalidArgumentError(absl::StrCat("device '", device, "' is not one of auto, cpu, cuda"));
  }
  TESSERA_ASSIGN_OR_RETURN(Backend backend, ResolveBackend(device));
  const Atlas& atlas = e->atlas;
  SparseBinaryMatrix docs(atlas.model.features);
  std::vector<int32_t> columns;
  for (int k = 0; k < request.documents_size(); ++k) {
    const v1::SparseDocument& d = request.documents(k);
    columns.assign(d.features().begin(), d.features().end());
    for (const std::string& name : d.feature_names()) {
      auto it = e->feature_index.find(name);
      if (it == e->feature_index.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("document ", k, ": atlas '", e->id, "' has no feature named '", name, "'"));
      }
      columns.push_back(it->second);
    }
    absl::Status added = docs.AppendRow(columns);
    if (!added.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("document ", k, " (atlas '", e->id, "' has ",
                                                     atlas.model.features, " features): ", added.message()));
    }
  }
  if (docs.rows() == 0) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(som::Projection p, ProjectOnAtlas(atlas, docs, backend));
  const int width = atlas.model.grid.width;
  for (int64_t k = 0; k < docs.rows(); ++k) {
    v1::ProjectedDocument* out = response->add_documents();
    out->set_id(request.documents(static_cast<int>(k)).id());
    out->set_node(p.bmu[k]);
    out->set_x(p.bmu[k] % width);
    out->set_y(p.bmu[k] / width);
    // ||x - w||^2 = nnz(x) + score (kernels/som/types.h).
    out->set_distance(std::sqrt(std::max(0.0, static_cast<double>(docs.row(k).size()) + p.score[k])));
    const int32_t second = p.second[k];
    out->set_second_node(second >= 0 ? second : -1);
    out->set_second_x(second >= 0 ? second % width : -1);
    out->set_second_y(second >= 0 ? second / width : -1);
  }
  som::ToQualityProto(p.quality, response->mutable_quality());
  return absl::OkStatus();
}

grpc::Status SomAtlasServiceImpl::GetCell(grpc::ServerContext* /*context*/, const v1::GetCellRequest* request,
                                          v1::CellResponse* response) {
  return ToGrpcStatus(GetCellImpl(*request, response));
}

absl::Status SomAtlasServiceImpl::GetCellImpl(const v1::GetCellRequest& request, v1::CellResponse* response) {
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const Entry> e, FindAtlas(request.atlas_id()));
  const Atlas& atlas = e->atlas;
  const som::GridShape& grid = atlas.model.grid;
  int64_t node = 0;
  switch (request.cell_case()) {
    case v1::GetCellRequest::kNode:
      node = request.node();
      if (node < 0 || node >= grid.nodes()) {
        return absl::InvalidArgumentError(
            absl::StrCat("node ", node, " is off the ", grid.width, "x", grid.height, " map (0..", grid.nodes() - 1, ")"));
      }
      break;
    case v1::GetCellRequest::kXy:
      if (request.xy().x() < 0 || request.xy().x() >= grid.width || request.xy().y() < 0 ||
          request.xy().y() >= grid.height) {
        return absl::InvalidArgumentError(absl::StrCat("cell (", request.xy().x(), ", ", request.xy().y(),
                                                       ") is off the ", grid.width, "x", grid.height, " map"));
      }
      node = request.xy().x() + int64_t{grid.width} * request.xy().y();
      break;
    default:
      return absl::InvalidArgumentError("give the cell as node or xy");
  }
  const int page_size = request.page_size() == 0 ? 100 : request.page_size();
  if (page_size < 1 || page_size > kMaxPageSize) {
    return absl::InvalidArgumentError(absl::StrCat("page_size ", request.page_size(), " must be in 0..", kMaxPageSize));
  }
  const int top = request.top_features() == 0 ? 10 : request.top_features();
  if (top < 1 || top > kMaxTopFeatures) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_features ", request.top_features(), " must be in 0..", kMaxTopFeatures));
  }
  const std::vector<int64_t> docs = som::DocumentsInCell(atlas, node);
  int64_t start = 0;
  if (!request.page_token().empty() &&
      (!absl::SimpleAtoi(request.page_token(), &start) || start < 0 || start > static_cast<int64_t>(docs.size()))) {
    return absl::InvalidArgumentError(absl::StrCat("page_token '", request.page_token(), "' is not one this cell gave"));
  }
  response->set_node(static_cast<int32_t>(node));
  response->set_x(static_cast<int32_t>(node % grid.width));
  response->set_y(static_cast<int32_t>(node / grid.width));
  response->set_hit_count(static_cast<int64_t>(docs.size()));
  const int64_t end = std::min<int64_t>(static_cast<int64_t>(docs.size()), start + page_size);
  for (int64_t k = start; k < end; ++k) {
    response->add_document_indices(docs[k]);
    response->add_document_ids(docs[k] < static_cast<int64_t>(atlas.document_ids.size()) ? atlas.document_ids[docs[k]]
                                                                                           : absl::StrCat("d", docs[k]));
  }
  if (end < static_cast<int64_t>(docs.size())) response->set_next_page_token(absl::StrCat(end));
  for (const som::FeatureWeight& f : som::TopFeatures(atlas, node, top)) {
    v1::FeatureWeight* out = response->add_top_features();
    out->set_feature(f.feature);
    out->set_name(f.feature < static_cast<int32_t>(atlas.feature_names.size()) ? atlas.feature_names[f.feature]
                                                                                 : absl::StrCat("f", f.feature));
    out->set_weight(f.weight);
  }
  return absl::OkStatus();
}

grpc::Status SomAtlasServiceImpl::GetCodebook(grpc::ServerContext* context, const v1::GetCodebookRequest* request,
                                              grpc::ServerWriter<v1::ArrayChunk>* writer) {
  return ToGrpcStatus(GetCodebookImpl(*context, *request, writer));
}

absl::Status SomAtlasServiceImpl::GetCodebookImpl(const grpc::ServerContext& context,
                                                  const v1::GetCodebookRequest& request,
                                                  grpc::ServerWriter<v1::ArrayChunk>* writer) {
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const Entry> e, FindAtlas(request.atlas_id()));
  if (request.chunk_bytes() < 0) return absl::InvalidArgumentError("chunk_bytes must not be negative");
  const som::SomModel& model = e->atlas.model;
  const int64_t nodes = model.grid.nodes();
  for (int32_t v : request.features()) {
    if (v < 0 || v >= model.features) {
      return absl::InvalidArgumentError(
          absl::StrCat("feature ", v, " is out of range: atlas '", e->id, "' has ", model.features, " features"));
    }
  }
  const int64_t largest = std::max<int64_t>(1024, int64_t{max_send_message_bytes_} - 4096);
  const int64_t chunk_bytes = std::clamp<int64_t>(
      request.chunk_bytes() > 0 ? request.chunk_bytes() : service_options_.codebook_chunk_bytes, 1, largest);
  const bool all = request.features().empty();
  const int64_t count = all ? model.features : request.features_size();
  v1::VolumeHeader header;
  header.add_dims(nodes);
  header.add_dims(count);
  header.set_dtype(v1::DTYPE_FLOAT32);
  header.set_description(absl::StrCat("SOM codebook of atlas '", e->id, "' (", model.grid.width, "x",
                                      model.grid.height, "), feature-major: dims [nodes, features]"));
  const bool have_f32 = static_cast<int64_t>(model.weights_f32.size()) == model.features * nodes;
  if (all && have_f32) {
    return SendChunkedArray(context, writer, header, model.weights_f32.data(), 4 * count * nodes, chunk_bytes);
  }
  std::vector<float> selected(static_cast<size_t>(count * nodes));
  for (int64_t k = 0; k < count; ++k) {
    const int64_t v = all ? k : request.features(static_cast<int>(k));
    float* out = selected.data() + k * nodes;
    if (have_f32) {
      std::copy_n(model.weights_f32.data() + v * nodes, nodes, out);
    } else {
      for (int64_t i = 0; i < nodes; ++i) out[i] = model.Weight(v, i);
    }
  }
  return SendChunkedArray(context, writer, header, selected.data(), 4 * count * nodes, chunk_bytes);
}

grpc::Status SomAtlasServiceImpl::DeleteAtlas(grpc::ServerContext* /*context*/, const v1::AtlasRequest* request,
                                              v1::DeleteAtlasResponse* response) {
  return ToGrpcStatus(DeleteAtlasImpl(*request, response));
}

absl::Status SomAtlasServiceImpl::DeleteAtlasImpl(const v1::AtlasRequest& request, v1::DeleteAtlasResponse* response) {
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const Entry> e, FindAtlas(request.atlas_id()));
  // Not while the atlas is being loaded from its directory.
  std::lock_guard<std::mutex> disk(disk_mu_);
  // Files first: an atlas that could not be removed stays listed.
  std::error_code ec;
  fs::remove_all(e->directory, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("could not remove '", e->directory, "': ", ec.message()));
  }
  {
    std::lock_guard<std::mutex> lock(atlases_mu_);
    auto it = atlases_.find(e->id);
    if (it != atlases_.end() && it->second == e) atlases_.erase(it);
  }
  TESSERA_LOG(INFO) << "som: atlas '" << e->id << "' deleted";
  response->set_atlas_id(e->id);
  return absl::OkStatus();
}

}  // namespace tessera

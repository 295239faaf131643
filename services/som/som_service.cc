#include "services/som/som_service.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <set>
#include <system_error>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/device.h"
#include "common/durable_file.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/status.h"
#include "services/common/chunked_upload.h"
#include "services/common/data_roots.h"
#include "services/common/random_id.h"
#include "services/scheduler/job_info.h"
#include "services/jobs/job_rpcs.h"
#include "services/server/call_checks.h"
#include "kernels/som/bmu.h"
#include "kernels/som/documents.h"
#include "kernels/som/quality.h"
#include "services/som/corpus.h"
#include "services/som/som_proto.h"

namespace tessera {

using jobs::JobRecord;
using jobs::IsEnded;
using jobs::ProgressOf;
using jobs::ToJobStatus;
using som::Atlas;
using som::SparseBinaryMatrix;
using som::StoredCorpus;

namespace {

namespace fs = std::filesystem;

constexpr jobs::ServiceJobKind kJob{"som.train", "SOM training"};  // som::kTrainingEngineKind
constexpr char kUploadPrefix[] = "corpus-";  // CorpusStore ids; the names of upload files
constexpr jobs::UploadDir kUploads{"som-uploads", "SOM upload directory", kUploadPrefix};
constexpr int kMaxPageSize = 10000;
constexpr int kMaxTopFeatures = 1000;

// The server files a stored som.train job names.
std::vector<std::string> NamedFiles(const jobs::JobRecord& job) {
  std::vector<std::string> files;
  v1::CreateAtlasRequest request;
  if (!jobs::UnpackJobSpec(job, &request)) return files;
  const v1::CorpusSource& source = request.corpus();
  if (source.source_case() == v1::CorpusSource::kPath) files.push_back(source.path());
  files.push_back(source.feature_names_path());
  files.push_back(source.document_ids_path());
  return files;
}

absl::Status CheckLine(absl::string_view what, const std::string& s) {
  if (s.find_first_of("\r\n") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", absl::CEscape(s), "' contains a line break"));
  }
  return absl::OkStatus();
}

// INVALID_ARGUMENT when the atlas's BMUs do not fit its map (LoadAtlas and
// MakeAtlas already refuse such atlases).
absl::StatusOr<std::shared_ptr<const SomAtlasServiceImpl::Entry>> MakeEntry(Atlas atlas, std::string id,
                                                                            std::string directory) {
  auto entry = std::make_shared<SomAtlasServiceImpl::Entry>();
  entry->atlas = std::move(atlas);
  entry->id = std::move(id);
  entry->directory = std::move(directory);
  const std::vector<std::string>& names = entry->atlas.feature_names;
  entry->feature_index.reserve(names.size());
  for (size_t v = 0; v < names.size(); ++v) entry->feature_index.emplace(names[v], static_cast<int32_t>(v));
  absl::StatusOr<som::CellIndex> cells = som::CellIndex::Build(entry->atlas.bmu, entry->atlas.nodes());
  if (!cells.ok()) return Annotate(cells.status(), absl::StrCat("atlas '", entry->id, "'"));
  entry->cells = *std::move(cells);
  // The entry is heap-allocated and never moved: the reference stays valid.
  entry->device_codebook = std::make_unique<som::ResidentCodebook>(entry->atlas.model);
  return std::shared_ptr<const SomAtlasServiceImpl::Entry>(std::move(entry));
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
      if (name.find('\t') != std::string::npos) {
        // Feature-name files (how a job reads an upload) take a tab-separated
        // line as "<id> <name>" (corpus_files.h).
        return absl::InvalidArgumentError(
            absl::StrCat("feature name '", absl::CEscape(name), "' contains a tab"));
      }
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

// ---------------------------------------------------------------- creation

absl::StatusOr<std::unique_ptr<SomAtlasServiceImpl>> SomAtlasServiceImpl::Create(const ServerOptions& options,
                                                                                 SomServiceOptions service_options) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> roots, CanonicalDataRoots(options.data_roots));
  if (options.max_volume_bytes <= 0) return absl::InvalidArgumentError("max_volume_bytes must be positive");
  TESSERA_RETURN_IF_ERROR(ResolveBackend(options.device).status());
  if (service_options.upload_file_grace < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("upload_file_grace must not be negative");
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
      // Submits one at a time: an atlas id is checked against the pending
      // jobs, then submitted.
      jobs_({kJob,
             {kUploads, service_options.upload_file_grace, service_options.upload_sweep_interval, NamedFiles},
             /*serialize_submits=*/true}) {}

// The jobs are the scheduler's: they outlive the service.
SomAtlasServiceImpl::~SomAtlasServiceImpl() = default;

std::string SomUploadDir(const std::string& state_dir) { return kUploads.Path(state_dir); }

absl::StatusOr<std::string> CreateSomUploadDir(const std::string& state_dir) { return kUploads.Create(state_dir); }

absl::Status SomAtlasServiceImpl::AttachScheduler(scheduler::Scheduler* scheduler, const std::string& state_dir) {
  return jobs_.Attach(scheduler, state_dir);
}

absl::StatusOr<std::vector<SomAtlasServiceImpl::PendingJob>> SomAtlasServiceImpl::PendingJobs() const {
  TESSERA_ASSIGN_OR_RETURN(std::vector<JobRecord> records, jobs_.Pending());
  std::vector<PendingJob> out;
  out.reserve(records.size());
  for (JobRecord& job : records) {
    PendingJob pending;
    if (!jobs::UnpackJobSpec(job, &pending.request)) continue;
    pending.atlas_id =
        pending.request.atlas_id().empty() ? som::AtlasIdForJob(job.job_id) : pending.request.atlas_id();
    pending.job = std::move(job);
    out.push_back(std::move(pending));
  }
  return out;
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
    absl::StatusOr<std::shared_ptr<const Entry>> entry = MakeEntry(*std::move(atlas), id, path);
    if (!entry.ok()) {
      TESSERA_LOG(WARNING) << "som: skipping atlas '" << path << "': " << entry.status();
      continue;
    }
    std::lock_guard<std::mutex> lock(atlases_mu_);
    atlases_[id] = *std::move(entry);
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
  }
  // Saved by another writer of the atlas directory (`tessera som train
  // --out`, another replica).
  absl::StatusOr<std::shared_ptr<const Entry>> entry =
      atlas_dir_.empty() || !som::ValidateAtlasId(id).ok()
          ? absl::NotFoundError(absl::StrCat("no atlas '", id, "'"))
          : LoadFromDirectory(id);
  if (entry.ok() || entry.status().code() != absl::StatusCode::kNotFound || !jobs_.scheduler().ok()) {
    return entry;
  }
  // Not yet, perhaps.
  absl::StatusOr<std::vector<PendingJob>> pending = PendingJobs();
  if (pending.ok()) {
    for (const PendingJob& p : *pending) {
      if (p.atlas_id != id) continue;
      return absl::NotFoundError(absl::StrCat("no atlas '", id, "' yet (its training job ", p.job.job_id, " is ",
                                              jobs::JobStateName(p.job.state), ")"));
    }
  }
  return entry;
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
  absl::StatusOr<std::shared_ptr<const Entry>> made = MakeEntry(*std::move(atlas), id, directory);
  if (!made.ok()) {
    return absl::NotFoundError(
        absl::StrCat("no atlas '", id, "': '", directory, "' does not load (", made.status().ToString(), ")"));
  }
  std::shared_ptr<const Entry> entry = *std::move(made);
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
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const Entry> entry, MakeEntry(std::move(atlas), id, directory));
  std::lock_guard<std::mutex> lock(atlases_mu_);
  atlases_[id] = std::move(entry);
  return absl::OkStatus();
}

absl::StatusOr<som::TrainingEngineOptions> SomAtlasServiceImpl::TrainingEngineOptions(const std::string& state_dir) {
  som::TrainingEngineOptions options;
  options.limits = limits_;
  if (!state_dir.empty()) {
    // Jobs name the uploads CreateAtlas wrote there.
    TESSERA_ASSIGN_OR_RETURN(std::string uploads, CreateSomUploadDir(state_dir));
    options.limits.data_roots.push_back(std::move(uploads));
  }
  options.on_saved = [this](const std::string& id, Atlas atlas) {
    absl::Status adopted = AdoptAtlas(id, std::move(atlas));
    if (!adopted.ok()) {
      TESSERA_LOG(WARNING) << "som: atlas '" << id << "' saved by a job: " << adopted;
    }
  };
  return options;
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
  TESSERA_RETURN_IF_ERROR(jobs_.scheduler().status());  // no CreateAtlas here to use it
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


absl::Status SomAtlasServiceImpl::WriteUploadFiles(const std::string& corpus_id, const StoredCorpus& corpus,
                                                   v1::CorpusSource* source) {
  if (jobs_.upload_dir().empty() || !absl::StartsWith(corpus_id, kUploadPrefix) ||
      corpus_id.find('/') != std::string::npos) {
    return absl::InternalError(absl::StrCat("unexpected corpus id '", corpus_id, "'"));
  }
  const fs::path dir(jobs_.upload_dir());
  const std::string csr = (dir / absl::StrCat(corpus_id, ".csr")).string();
  const std::string names =
      corpus.feature_names.empty() ? std::string() : (dir / absl::StrCat(corpus_id, ".features.txt")).string();
  const bool any_id = std::any_of(corpus.document_ids.begin(), corpus.document_ids.end(),
                                  [](const std::string& id) { return !id.empty(); });
  const std::string ids = any_id ? (dir / absl::StrCat(corpus_id, ".ids.txt")).string() : std::string();
  // Written for an earlier job when the corpus file (written last) is there.
  if (!jobs::ReuseUploadFiles({names, ids, csr})) {
    if (!names.empty()) {
      TESSERA_RETURN_IF_ERROR(WriteFileDurably(
          names, [&](const std::string& tmp) { return som::WriteLines(tmp, corpus.feature_names); }));
    }
    if (!ids.empty()) {
      TESSERA_RETURN_IF_ERROR(
          WriteFileDurably(ids, [&](const std::string& tmp) { return som::WriteLines(tmp, corpus.document_ids); }));
    }
    TESSERA_RETURN_IF_ERROR(
        WriteFileDurably(csr, [&](const std::string& tmp) { return som::WriteCsrBinary(tmp, corpus.matrix); }));
  }
  source->set_path(csr);  // instead of the corpus_id
  source->set_feature_names_path(names);
  source->set_document_ids_path(ids);
  source->clear_index_base();
  return absl::OkStatus();
}

grpc::Status SomAtlasServiceImpl::CreateAtlas(grpc::ServerContext* context, const v1::CreateAtlasRequest* request,
                                              v1::CreateAtlasResponse* response) {
  return jobs::JobRpcStatus(*context, CreateAtlasImpl(jobs::CallerOf(*context), *request, response));
}

absl::Status SomAtlasServiceImpl::CreateAtlasImpl(const jobs::JobCaller& caller, const v1::CreateAtlasRequest& request,
                                                  v1::CreateAtlasResponse* response) {
  // Idempotent on request_id, decided before any check (the atlas of a
  // finished job exists by now; its upload may have expired).
  TESSERA_ASSIGN_OR_RETURN(jobs::SubmittedJob job,
                           jobs_.Submit({caller, &request, request.request_id(), "request_id",
                                         [&] { return PrepareCreateAtlas(request); }}));
  // The atlas id the job trains (the stored request's: chosen at its submit).
  TESSERA_ASSIGN_OR_RETURN(JobRecord record, jobs_.Find(caller, job.info.job_id()));
  v1::CreateAtlasRequest stored;
  if (!jobs::UnpackJobSpec(record, &stored)) {
    return absl::DataLossError(absl::StrCat("job '", record.job_id, "' has no readable CreateAtlasRequest"));
  }
  *response->mutable_job() = ToJobStatus(job.info);
  response->set_atlas_id(stored.atlas_id().empty() ? som::AtlasIdForJob(record.job_id) : stored.atlas_id());
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<google::protobuf::Message>> SomAtlasServiceImpl::PrepareCreateAtlas(
    const v1::CreateAtlasRequest& request) {
  // The engine's checks, with this service's uploads: a bad request fails
  // here and writes no files.
  TESSERA_ASSIGN_OR_RETURN(som::AtlasJobRequest job, som::PrepareAtlasJob(request, limits_, &uploads_));
  const std::string atlas_id = job.atlas_id.empty() ? RandomId("atlas-") : job.atlas_id;
  bool loaded = false;
  {
    std::lock_guard<std::mutex> lock(atlases_mu_);
    loaded = atlases_.count(atlas_id) > 0;
  }
  if (loaded) {
    return absl::AlreadyExistsError(
        absl::StrCat("atlas '", atlas_id, "' already exists; pick another atlas_id or DeleteAtlas it first"));
  }
  // (PrepareAtlasJob found no directory of that name.)
  TESSERA_ASSIGN_OR_RETURN(std::vector<PendingJob> pending, PendingJobs());
  for (const PendingJob& p : pending) {
    if (p.atlas_id != atlas_id) continue;
    return absl::AlreadyExistsError(absl::StrCat("atlas '", atlas_id, "' is being trained (job ", p.job.job_id,
                                                 ", ", jobs::JobStateName(p.job.state),
                                                 "); pick another atlas_id, or cancel that job first"));
  }
  auto durable = std::make_unique<v1::CreateAtlasRequest>(request);
  durable->set_atlas_id(atlas_id);
  if (request.corpus().source_case() == v1::CorpusSource::kCorpusId) {
    absl::Status written = WriteUploadFiles(request.corpus().corpus_id(), *job.input.corpus, durable->mutable_corpus());
    if (!written.ok()) return Annotate(written, absl::StrCat("writing upload ", request.corpus().corpus_id()));
  }
  TESSERA_LOG(INFO) << "som: atlas '" << atlas_id << "' " << som::GridToString(job.options.train.grid) << " from "
                    << job.description << " on " << job.options.device;
  return durable;
}

// ---------------------------------------------------------------- jobs

namespace {

double Metric(const v1::Progress& p, const char* name) {
  auto it = p.metrics().find(name);
  return it == p.metrics().end() ? 0.0 : it->second;
}

}  // namespace

grpc::Status SomAtlasServiceImpl::WatchJob(grpc::ServerContext* context, const v1::JobRef* request,
                                           grpc::ServerWriter<v1::AtlasProgress>* writer) {
  return ToGrpcStatus(WatchJobImpl(*context, *request, writer));
}

absl::Status SomAtlasServiceImpl::WatchJobImpl(const grpc::ServerContext& context, const v1::JobRef& request,
                                               grpc::ServerWriter<v1::AtlasProgress>* writer) {
  TESSERA_ASSIGN_OR_RETURN(JobRecord job, jobs_.Find(jobs::CallerOf(context), request.job_id()));
  scheduler::Scheduler* s = *jobs_.scheduler();
  v1::CreateAtlasRequest atlas_request;
  if (!jobs::UnpackJobSpec(job, &atlas_request)) {
    return absl::DataLossError(absl::StrCat("job '", job.job_id, "' has no readable CreateAtlasRequest"));
  }
  const std::string atlas_id =
      atlas_request.atlas_id().empty() ? som::AtlasIdForJob(job.job_id) : atlas_request.atlas_id();
  int32_t max_epochs = 0;
  if (absl::StatusOr<som::AtlasJobOptions> options =
          som::ToAtlasJobOptions(atlas_request.options(), "cpu", std::numeric_limits<int64_t>::max());
      options.ok()) {
    max_epochs = options->train.max_epochs;
  }
  int32_t last_epoch = 0;  // the current attempt's latest epoch sent
  const auto message = [&](v1::JobState state) {
    v1::AtlasProgress p;
    p.set_job_id(job.job_id);
    p.set_atlas_id(atlas_id);
    p.set_state(state);
    p.set_epoch(last_epoch);
    p.set_max_epochs(max_epochs);
    return p;
  };
  const auto send = [&](const v1::JobEvent& event) -> bool {
    const v1::Progress& progress = event.progress();
    if (event.state() == v1::JOB_STATE_RUNNING && event.message().empty()) {
      // A progress report of the running attempt.
      if (progress.stage() == "epoch" && progress.total_steps() > 0) {
        max_epochs = static_cast<int32_t>(progress.total_steps());
      }
      v1::AtlasProgress p = message(v1::JOB_STATE_RUNNING);
      p.set_stage(progress.stage());
      p.set_fraction(progress.fraction());
      p.set_message(progress.message());
      if (progress.stage() == "epoch") {
        const int32_t epoch = static_cast<int32_t>(Metric(progress, "epoch"));
        if (epoch <= last_epoch) return true;
        last_epoch = epoch;
        p.set_epoch(epoch);
        p.set_max_epochs(max_epochs);
        p.set_radius(Metric(progress, "radius"));
        p.set_qe(Metric(progress, "qe"));
        p.set_topographic_error(Metric(progress, "topographic_error"));
        p.set_epoch_seconds(Metric(progress, "epoch_seconds"));
      }
      return writer->Write(p);
    }
    if (!IsEnded(event.state())) {
      // A change of state: queued, started on a worker, re-queued, cancel requested.
      if (event.state() == v1::JOB_STATE_QUEUED) last_epoch = 0;  // a next attempt starts over
      v1::AtlasProgress p = message(event.state());
      p.set_fraction(event.state() == v1::JOB_STATE_QUEUED ? 0.0 : progress.fraction());
      p.set_message(event.message());
      return writer->Write(p);
    }
    if (event.state() == v1::JOB_STATE_SUCCEEDED) {
      // Epochs not recorded (closer together than the scheduler records
      // progress), from the atlas's history.
      absl::StatusOr<v1::JobResult> result = s->GetResult(job.job_id);
      v1::AtlasSummary summary;
      if (result.ok() && result->result().UnpackTo(&summary)) {
        if (max_epochs == 0) max_epochs = summary.epochs();
        for (const v1::EpochSummary& e : summary.history()) {
          if (e.epoch() + 1 <= last_epoch) continue;
          last_epoch = e.epoch() + 1;
          v1::AtlasProgress p = message(v1::JOB_STATE_RUNNING);
          p.set_stage("epoch");
          p.set_radius(e.radius());
          p.set_qe(e.qe());
          p.set_topographic_error(e.topographic_error());
          p.set_epoch_seconds(e.seconds());
          p.set_fraction(progress.fraction());
          p.set_message(absl::StrCat("epoch ", last_epoch, "/", max_epochs, " (from the atlas's history)"));
          if (!writer->Write(p)) return false;
        }
      }
    }
    v1::AtlasProgress p = message(event.state());
    absl::StatusOr<v1::JobInfo> ended = s->Get(job.job_id);
    if (ended.ok()) {
      const v1::Progress final_progress = ProgressOf(*ended);
      p.set_fraction(final_progress.fraction());
      p.set_message(final_progress.message());
    } else {
      p.set_fraction(progress.fraction());
      p.set_message(event.message());
    }
    return writer->Write(p);
  };
  absl::Status status = s->Watch(job.job_id, 0, send, [&] { return context.IsCancelled(); });
  if (!status.ok() && context.IsCancelled()) status = CheckNotCancelled(context);
  return status;
}

grpc::Status SomAtlasServiceImpl::GetJob(grpc::ServerContext* context, const v1::JobRef* request,
                                         v1::JobStatus* response) {
  return jobs::Respond(jobs_.Get(jobs::CallerOf(*context), request->job_id()), response);
}

grpc::Status SomAtlasServiceImpl::CancelJob(grpc::ServerContext* context, const v1::JobRef* request,
                                            v1::JobStatus* response) {
  return jobs::Respond(jobs_.Cancel(jobs::CallerOf(*context), request->job_id()), response);
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

// On the CPU the atlas's host codebook is searched in place, on CUDA the
// entry's resident device copy (uploaded by the first CUDA call), never copied
// per request as ProjectDocuments does (126 MB for 32x32 x 30,766 features);
// the same feature-major BMU search, so the same cells.
absl::StatusOr<som::Projection> ProjectOnAtlas(const SomAtlasServiceImpl::Entry& entry,
                                               const SparseBinaryMatrix& docs, Backend backend) {
  if (backend != Backend::kCpu) return entry.device_codebook->Project(docs);
  // Only read; the view is non-const for the kernels' sake.
  som::SomModel& model = const_cast<som::SomModel&>(entry.atlas.model);
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
  TESSERA_ASSIGN_OR_RETURN(som::Projection p, ProjectOnAtlas(*e, docs, backend));
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
  TESSERA_ASSIGN_OR_RETURN(const absl::Span<const int32_t> docs, e->cells.Documents(node));
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
  const int64_t chunk_bytes =
      DownloadChunkBytes(request.chunk_bytes(), service_options_.codebook_chunk_bytes, max_send_message_bytes_);
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

#include "services/fingerprint/fingerprint_service.h"

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/parallel.h"
#include "common/status.h"
#include "services/fingerprint/extract/minutiae_overlay.h"
#include "services/fingerprint/gallery_set.h"
#include "services/fingerprint/metadata_proto.h"
#include "services/fingerprint/search/match_explain.h"
#include "services/server/auth.h"
#include "services/server/call_checks.h"
#include "services/server/gallery_names.h"

namespace tessera {
namespace fingerprint {
absl::StatusOr<std::unique_ptr<FingerprintGallery>> FingerprintGallery::Open(const FingerprintServiceOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  FingerprintServiceOptions o = options;
  bool temporary = false;
  if (o.gallery_dir.empty()) {
    char tmpl[] = "/tmp/tessera-gallery-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return absl::InternalError("cannot create a temporary gallery directory");
    o.gallery_dir = tmpl;
    temporary = true;
    TESSERA_LOG(WARNING) << "fingerprint gallery in temporary " << o.gallery_dir
                         << ": enrollments will not survive a restart (set a gallery directory)";
  }
  std::unique_ptr<FingerprintGallery> g(new FingerprintGallery(o, temporary));
  SearcherOptions searcher_options;
  searcher_options.matcher = o.matcher;
  searcher_options.device = o.device.empty() ? std::string("auto") : o.device;
  searcher_options.cascade_candidates = o.cascade_candidates;
  TESSERA_ASSIGN_OR_RETURN(g->searcher_, CreateSearcher(searcher_options));
  GallerySearcher* searcher = g->searcher_.get();
  TESSERA_ASSIGN_OR_RETURN(
      g->store_, GalleryStore::Open(o.gallery_dir, [searcher](const std::shared_ptr<const StoredTemplate>& t,
                                                              MccTemplate&& cylinders) {
        absl::Status added = searcher->AddWithCylinders(t, std::move(cylinders));
        if (!added.ok()) {
          TESSERA_LOG(ERROR) << "fingerprint gallery: " << added;
        }
      }, [searcher](int64_t templates, int64_t cylinders) { searcher->Reserve(templates, cylinders); }));
  // Bring the searcher in line with the store: drop what the logs deleted or
  // replaced, build descriptors for what only the logs hold.
  std::unordered_map<std::string, uint64_t> held;
  for (auto& [id, seq] : searcher->Entries()) held.emplace(std::move(id), seq);
  std::vector<std::shared_ptr<const StoredTemplate>> to_add;
  size_t matching = 0;
  for (const auto& t : g->store_->Live()) {
    auto it = held.find(t->id);
    if (it != held.end() && it->second == t->seq) {
      ++matching;
      held.erase(it);
    } else {
      to_add.push_back(t);
    }
  }
  for (const auto& [id, seq] : held) searcher->Remove(id);
  constexpr size_t kChunk = 16384;  // bounds the descriptors built at once
  for (size_t i = 0; i < to_add.size(); i += kChunk) {
    std::vector<std::shared_ptr<const StoredTemplate>> chunk(to_add.begin() + i,
                                                             to_add.begin() + std::min(to_add.size(), i + kChunk));
    TESSERA_RETURN_IF_ERROR(Annotate(searcher->Add(chunk), "rebuilding the gallery index"));
  }
  g->load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const GalleryOpenStats& s = g->store_->open_stats();
  TESSERA_LOG(INFO) << "fingerprint gallery " << o.gallery_dir << ": " << g->store_->size() << " templates ("
                    << s.snapshot_cylinder_templates << " with persisted cylinders, " << to_add.size()
                    << " descriptors rebuilt, " << s.log_records << " log records) loaded in " << g->load_seconds_
                    << " s; matcher " << searcher->matcher();
  return g;
}

FingerprintGallery::~FingerprintGallery() {
  {
    std::lock_guard<std::mutex> lock(compact_thread_mu_);
    if (compact_thread_.joinable()) compact_thread_.join();
  }
  if (temporary_ && store_) {
    const std::string dir = store_->dir();
    store_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
}

absl::StatusOr<EnrollItem> EnrollItemFromRequest(std::string id, v1::FingerprintTemplate record,
                                                 const SearchLimits& limits) {
  EnrollItem item;
  item.id = std::move(id);
  if (record.has_image()) {
    if (!record.data().empty()) return absl::InvalidArgumentError("give a template's data or an image, not both");
    TESSERA_ASSIGN_OR_RETURN(item.image, ImageInputFromProto(record.image(), "image", limits.image));
    item.bytes = std::move(*record.mutable_image()->mutable_data());
    return item;
  }
  TESSERA_ASSIGN_OR_RETURN(item.format, TemplateFormatFromProto(record.format()));
  item.bytes = std::move(*record.mutable_data());
  item.view = record.view();
  return item;
}

absl::Status FingerprintGallery::CheckItemSize(const EnrollItem& item) const {
  const int64_t limit = item.image ? options_.image.max_image_bytes : options_.max_template_bytes;
  if (static_cast<int64_t>(item.bytes.size()) <= limit) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat(item.image ? "image of " : "template of ", item.bytes.size(), " bytes; the limit is ", limit));
}

StoredTemplate FingerprintGallery::StoredFromParsed(const EnrollItem& item, ParsedTemplate parsed) {
  StoredTemplate t;
  t.id = item.id;
  t.format = parsed.format;
  t.bytes = item.image ? std::move(parsed.extracted_record) : item.bytes;
  t.minutiae = std::move(parsed.minutiae);
  t.metadata = item.metadata;
  return t;
}

absl::StatusOr<StoredTemplate> FingerprintGallery::TemplateOfItem(const EnrollItem& item, int* quality) const {
  TESSERA_RETURN_IF_ERROR(CheckItemSize(item));
  TESSERA_ASSIGN_OR_RETURN(ParsedTemplate parsed, item.image ? ParseImageTemplate(item.bytes, *item.image)
                                                             : ParseProbeOrTemplate(item.bytes, item.format, item.view));
  if (quality != nullptr) *quality = parsed.quality;
  return StoredFromParsed(item, std::move(parsed));
}

absl::StatusOr<std::shared_ptr<const StoredTemplate>> FingerprintGallery::Enroll(const EnrollItem& item,
                                                                                  bool replace, int* quality) {
  TESSERA_ASSIGN_OR_RETURN(StoredTemplate t, TemplateOfItem(item, quality));
  // Concurrent enrolls share the store's syncs (group commit); the searcher
  // follows the store afterwards (SyncSearcher).
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const StoredTemplate> stored, store_->Enroll(std::move(t), replace));
  SyncSearcher({stored}, {});
  MaybeCompactInBackground();
  return stored;
}

void FingerprintGallery::SyncSearcher(const std::vector<std::shared_ptr<const StoredTemplate>>& enrolled,
                                      const std::vector<std::string>& deleted) {
  // Store commits and searcher updates of concurrent calls may interleave in
  // any order. Each update makes the searcher agree with what the store
  // holds *now* for its ids: add a template only while it is still the
  // current one, remove an id only while the store has none. A later change
  // of the same id runs its own update after its commit, so the searcher
  // ends equal to the store whatever the order.
  std::lock_guard<std::mutex> lock(searcher_mu_);
  std::vector<std::shared_ptr<const StoredTemplate>> add;
  for (const auto& t : enrolled) {
    std::shared_ptr<const StoredTemplate> current = store_->Get(t->id);
    if (current == t) {
      add.push_back(t);
    } else if (current == nullptr) {
      searcher_->Remove(t->id);
    }
  }
  for (const std::string& id : deleted) {
    if (store_->Get(id) == nullptr) searcher_->Remove(id);
  }
  if (add.empty()) return;
  absl::Status added = searcher_->Add(add);
  if (!added.ok()) {
    TESSERA_LOG(ERROR) << "fingerprint gallery: stored but not searchable: " << added;
  }
}

absl::StatusOr<std::vector<absl::Status>> FingerprintGallery::EnrollBatch(const std::vector<EnrollItem>& items,
                                                                          bool replace) {
  std::vector<absl::Status> statuses(items.size());
  std::vector<StoredTemplate> parsed(items.size());
  // Images together (the extractor's GPU, or all cores); templates below.
  std::vector<size_t> image_at;
  std::vector<absl::string_view> images;
  std::vector<ImageInput> inputs;
  for (size_t i = 0; i < items.size(); ++i) {
    statuses[i] = CheckItemSize(items[i]);
    if (!statuses[i].ok() || !items[i].image) continue;
    image_at.push_back(i);
    images.push_back(items[i].bytes);
    inputs.push_back(*items[i].image);
  }
  std::vector<absl::StatusOr<ParsedTemplate>> extracted =
      ParseImageTemplates(images, inputs, options_.image_extractor.get());
  for (size_t j = 0; j < image_at.size(); ++j) {
    const size_t i = image_at[j];
    if (extracted[j].ok()) {
      parsed[i] = StoredFromParsed(items[i], std::move(*extracted[j]));
    } else {
      statuses[i] = extracted[j].status();
    }
  }
  ParallelForDynamic(static_cast<int64_t>(items.size()), 16, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      if (!statuses[i].ok() || items[i].image) continue;
      absl::StatusOr<ParsedTemplate> t = ParseProbeOrTemplate(items[i].bytes, items[i].format, items[i].view);
      if (t.ok()) {
        parsed[i] = StoredFromParsed(items[i], std::move(*t));
      } else {
        statuses[i] = t.status();
      }
    }
  });
  std::vector<StoredTemplate> batch;
  std::vector<size_t> where;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!statuses[i].ok()) continue;
    batch.push_back(std::move(parsed[i]));
    where.push_back(i);
  }
  TESSERA_ASSIGN_OR_RETURN(auto results, store_->EnrollBatch(std::move(batch), replace));
  std::vector<std::shared_ptr<const StoredTemplate>> stored;
  for (size_t j = 0; j < results.size(); ++j) {
    if (results[j].ok()) {
      stored.push_back(*results[j]);
    } else {
      statuses[where[j]] = results[j].status();
    }
  }
  SyncSearcher(stored, {});
  MaybeCompactInBackground();
  return statuses;
}

absl::Status FingerprintGallery::Delete(absl::string_view id) {
  TESSERA_RETURN_IF_ERROR(store_->Delete(id));
  SyncSearcher({}, {std::string(id)});
  MaybeCompactInBackground();
  return absl::OkStatus();
}

absl::StatusOr<int64_t> FingerprintGallery::DeleteSubject(absl::string_view subject) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> ids, store_->DeleteSubject(subject));
  SyncSearcher({}, ids);
  MaybeCompactInBackground();
  return static_cast<int64_t>(ids.size());
}

std::vector<std::string> FingerprintGallery::List(absl::string_view after, int limit) const {
  return store_->ListIds(after, limit);
}

int64_t FingerprintGallery::size() const { return static_cast<int64_t>(store_->size()); }

absl::StatusOr<std::vector<std::vector<SearchCandidate>>> FingerprintGallery::Search(
    const std::vector<std::vector<MinutiaPoint>>& probes, int top_k, SearchStats* stats, absl::string_view matcher) {
  return searcher_->Search(probes, top_k, stats, matcher);
}

absl::StatusOr<float> FingerprintGallery::VerifyId(const std::vector<MinutiaPoint>& probe, absl::string_view id,
                                                   absl::string_view matcher) {
  return searcher_->VerifyId(probe, id, matcher);
}

absl::StatusOr<float> FingerprintGallery::Compare(const std::vector<MinutiaPoint>& a,
                                                  const std::vector<MinutiaPoint>& b, absl::string_view matcher) {
  return searcher_->Compare(a, b, matcher);
}

absl::Status FingerprintGallery::Compact() {
  GallerySearcher* searcher = searcher_.get();
  TESSERA_RETURN_IF_ERROR(store_->Compact(
      [searcher](const StoredTemplate& t, MccTemplate* out) { return searcher->ExportCylinders(t, out); }));
  searcher_->Compact();
  return absl::OkStatus();
}

void FingerprintGallery::MaybeCompactInBackground() {
  if (store_->log_bytes() < options_.compact_log_bytes || compacting_.exchange(true)) return;
  std::lock_guard<std::mutex> lock(compact_thread_mu_);
  if (compact_thread_.joinable()) compact_thread_.join();  // the previous one has finished
  compact_thread_ = std::thread([this] {
    const auto start = std::chrono::steady_clock::now();
    absl::Status s = Compact();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (s.ok()) {
      TESSERA_LOG(INFO) << "fingerprint gallery compacted in " << seconds << " s";
    } else {
      TESSERA_LOG(ERROR) << "fingerprint gallery compaction failed (the log keeps growing): " << s;
    }
    compacting_ = false;
  });
}

absl::Status ExplainCandidates(const FingerprintGallery& gallery, const std::vector<MinutiaPoint>& probe,
                               google::protobuf::RepeatedPtrField<v1::Candidate>* candidates) {
  for (v1::Candidate& c : *candidates) {
    std::shared_ptr<const StoredTemplate> t = gallery.Get(c.id());
    if (t == nullptr) continue;  // deleted since the search
    TESSERA_ASSIGN_OR_RETURN(MatchExplanation e, ExplainMatch(probe, t->minutiae));
    ExplanationToProto(e, c.mutable_explanation());
  }
  return absl::OkStatus();
}

}  // namespace fingerprint

// --- the gRPC edge ------------------------------------------------------------

namespace {

// Stops a search once its call is cancelled or past its deadline (checked
// against the clock too, so it stops on time even before gRPC's own timer
// cancels the call). Thread-safe, like the ServerContext calls it makes.
std::function<absl::Status()> CallCheck(const grpc::ServerContextBase* context) {
  const auto deadline = context->deadline();
  const bool has_deadline = deadline != std::chrono::system_clock::time_point::max();
  return [context, deadline, has_deadline]() -> absl::Status {
    if (has_deadline && std::chrono::system_clock::now() >= deadline) {
      return absl::DeadlineExceededError("deadline exceeded; the search was abandoned");
    }
    return CheckNotCancelled(*context);
  };
}

using fingerprint::MsSince;

}  // namespace

absl::StatusOr<std::unique_ptr<FingerprintServiceImpl>> FingerprintServiceImpl::Create(
    const ServerOptions& server_options, FingerprintServiceOptions options) {
  if (options.device.empty()) options.device = server_options.device;
  if (options.max_top_k < 1 || options.max_probes < 1 || options.enroll_group < 1 || options.max_template_bytes < 1) {
    return absl::InvalidArgumentError("fingerprint service limits must be positive");
  }
  if (options.image_extractor == nullptr) {
    // Images go to the GPU when the service has one; a GPU that cannot take
    // the extractor leaves it on the CPU (the service still serves).
    absl::StatusOr<std::unique_ptr<fingerprint::ImageExtractor>> extractor =
        fingerprint::ImageExtractor::Create(options.device);
    if (!extractor.ok()) {
      TESSERA_LOG(WARNING) << "fingerprint images extracted on the CPU: " << extractor.status();
      extractor = fingerprint::ImageExtractor::Create("cpu");
    }
    if (!extractor.ok()) return extractor.status();
    options.image_extractor = std::move(*extractor);
  }
  std::unique_ptr<FingerprintServiceImpl> service(new FingerprintServiceImpl(std::move(options)));
  TESSERA_ASSIGN_OR_RETURN(service->galleries_, fingerprint::GallerySet::Open(service->options_, &service->metrics_));
  return service;
}

FingerprintServiceImpl::FingerprintServiceImpl(FingerprintServiceOptions options)
    : options_(std::move(options)), metrics_(options_.metrics_registry) {}

FingerprintServiceImpl::~FingerprintServiceImpl() = default;

fingerprint::HostedGallery& FingerprintServiceImpl::DefaultOrDie() {
  fingerprint::HostedGallery* g = galleries_->Default();
  if (g == nullptr) {
    TESSERA_LOG(ERROR) << "the default gallery is unavailable: " << galleries_->DefaultStatus();
    std::abort();
  }
  return *g;
}

fingerprint::FingerprintGallery& FingerprintServiceImpl::gallery() { return *DefaultOrDie().gallery; }

fingerprint::SearchBatcher& FingerprintServiceImpl::search_batcher() { return *DefaultOrDie().batcher; }

std::vector<NotServing> FingerprintServiceImpl::NotServingServices() const {
  absl::Status why = galleries_->DefaultStatus();
  if (why.ok()) return {};
  return {NotServing{v1::FingerprintService::service_full_name(), std::string(why.message())}};
}

fingerprint::SearcherLookup FingerprintServiceImpl::searcher_lookup() {
  fingerprint::GallerySet* set = galleries_.get();
  return [set](absl::string_view name) -> absl::StatusOr<fingerprint::GallerySearcher*> {
    TESSERA_ASSIGN_OR_RETURN(fingerprint::HostedGallery * g, set->Get(name));
    return &g->gallery->searcher();
  };
}

absl::StatusOr<fingerprint::HostedGallery*> FingerprintServiceImpl::GalleryFor(const grpc::ServerContext* context,
                                                                               absl::string_view name) const {
  TESSERA_RETURN_IF_ERROR(CallDecision(context));
  return galleries_->Get(name);
}

grpc::Status FingerprintServiceImpl::Enroll(grpc::ServerContext* context, const v1::EnrollRequest* request,
                                            v1::EnrollResponse* response) {
  absl::StatusOr<fingerprint::HostedGallery*> g = GalleryFor(context, request->gallery());
  if (!g.ok()) return ToGrpcStatus(g.status());
  fingerprint::FingerprintGallery& gallery = *(*g)->gallery;
  if (!request->has_record()) return ToGrpcStatus(absl::InvalidArgumentError("record is required"));
  absl::StatusOr<fingerprint::EnrollItem> item =
      fingerprint::EnrollItemFromRequest(request->id(), request->record(), options_.search_limits());
  if (!item.ok()) return ToGrpcStatus(item.status());
  if (request->has_metadata()) {
    absl::StatusOr<fingerprint::TemplateMetadata> metadata = fingerprint::MetadataFromProto(request->metadata());
    if (!metadata.ok()) return ToGrpcStatus(metadata.status());
    item->metadata = std::move(*metadata);
  }
  int quality = -1;
  absl::StatusOr<std::shared_ptr<const fingerprint::StoredTemplate>> stored =
      gallery.Enroll(*item, request->replace(), &quality);
  if (!stored.ok()) return ToGrpcStatus(stored.status());
  response->set_quality(quality);
  response->set_id((*stored)->id);
  response->set_minutiae(static_cast<int32_t>((*stored)->minutiae.size()));
  response->set_format(std::string(fingerprint::TemplateFormatName((*stored)->format)));
  response->set_gallery_size(gallery.size());
  return grpc::Status::OK;
}

grpc::Status FingerprintServiceImpl::EnrollStream(grpc::ServerContext* context,
                                                  grpc::ServerReader<v1::EnrollRequest>* reader,
                                                  v1::EnrollStreamResponse* response) {
  const auto start = std::chrono::steady_clock::now();
  constexpr int kMaxReportedErrors = 1000;
  // The stream's gallery is its first item's (the one the interceptor authorized).
  fingerprint::FingerprintGallery* gallery = nullptr;
  std::string gallery_name;
  std::vector<fingerprint::EnrollItem> items;
  std::vector<int64_t> positions;
  std::vector<bool> replace_flags;
  auto report = [&](int64_t index, const std::string& id, const absl::Status& s) {
    response->set_failed(response->failed() + 1);
    if (response->errors_size() >= kMaxReportedErrors) return;
    v1::EnrollError* e = response->add_errors();
    e->set_index(index);
    e->set_id(id);
    e->set_code(static_cast<int32_t>(s.code()));
    e->set_message(std::string(s.message()));
  };
  // One group commit per group; items asking for replace go in their own call.
  auto flush = [&]() -> absl::Status {
    for (bool replace : {false, true}) {
      std::vector<fingerprint::EnrollItem> group;
      std::vector<int64_t> where;
      for (size_t i = 0; i < items.size(); ++i) {
        if (replace_flags[i] != replace) continue;
        group.push_back(std::move(items[i]));
        where.push_back(static_cast<int64_t>(i));
      }
      if (group.empty()) continue;
      TESSERA_ASSIGN_OR_RETURN(std::vector<absl::Status> statuses, gallery->EnrollBatch(group, replace));
      for (size_t j = 0; j < statuses.size(); ++j) {
        if (statuses[j].ok()) {
          response->set_enrolled(response->enrolled() + 1);
        } else {
          report(positions[where[j]], group[j].id, statuses[j]);
        }
      }
    }
    items.clear();
    positions.clear();
    replace_flags.clear();
    return absl::OkStatus();
  };
  v1::EnrollRequest request;
  int64_t index = 0;
  while (reader->Read(&request)) {
    response->set_received(response->received() + 1);
    if (gallery == nullptr) {
      absl::StatusOr<fingerprint::HostedGallery*> g = GalleryFor(context, request.gallery());
      if (!g.ok()) return ToGrpcStatus(g.status());  // nothing stored yet
      gallery = (*g)->gallery.get();
      gallery_name = GalleryOrDefault(request.gallery());
    }
    absl::StatusOr<fingerprint::EnrollItem> item =
          fingerprint::EnrollItemFromRequest(request.id(), std::move(*request.mutable_record()), options_.search_limits());
    if (item.ok() && request.has_metadata()) {
      absl::StatusOr<fingerprint::TemplateMetadata> metadata = fingerprint::MetadataFromProto(request.metadata());
      if (metadata.ok()) {
        item->metadata = std::move(*metadata);
      } else {
        item = metadata.status();
      }
    }
    if (GalleryOrDefault(request.gallery()) != gallery_name) {
      report(index, request.id(),
             absl::InvalidArgumentError(absl::StrCat("every item of a stream names the stream's gallery '",
                                                     gallery_name, "' (its first item's)")));
    } else if (!request.has_record()) {
      report(index, request.id(), absl::InvalidArgumentError("record is required"));
    } else if (!item.ok()) {
      report(index, request.id(), item.status());
    } else {
      items.push_back(std::move(*item));
      positions.push_back(index);
      replace_flags.push_back(request.replace());
      if (static_cast<int>(items.size()) >= options_.enroll_group) {
        absl::Status s = flush();
        if (!s.ok()) return ToGrpcStatus(s);
      }
    }
    ++index;
  }
  if (gallery != nullptr) {
    absl::Status s = flush();
    if (!s.ok()) return ToGrpcStatus(s);
    response->set_gallery_size(gallery->size());
  }
  response->set_seconds(MsSince(start) / 1000.0);
  return grpc::Status::OK;
}

grpc::Status FingerprintServiceImpl::Delete(grpc::ServerContext* context, const v1::DeleteRequest* request,
                                            v1::DeleteResponse* response) {
  absl::StatusOr<fingerprint::HostedGallery*> g = GalleryFor(context, request->gallery());
  if (!g.ok()) return ToGrpcStatus(g.status());
  absl::Status s = (*g)->gallery->Delete(request->id());
  if (!s.ok()) return ToGrpcStatus(s);
  response->set_gallery_size((*g)->gallery->size());
  return grpc::Status::OK;
}

grpc::Status FingerprintServiceImpl::List(grpc::ServerContext* context, const v1::ListRequest* request,
                                          v1::ListResponse* response) {
  absl::StatusOr<fingerprint::HostedGallery*> g = GalleryFor(context, request->gallery());
  if (!g.ok()) return ToGrpcStatus(g.status());
  const fingerprint::FingerprintGallery& gallery = *(*g)->gallery;
  int page_size = request->page_size() == 0 ? 1000 : request->page_size();
  if (page_size < 0 || page_size > 10000) {
    return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat("page_size must be 1-10000, got ", page_size)));
  }
  std::vector<std::string> ids = gallery.List(request->page_token(), page_size + 1);
  const bool more = static_cast<int>(ids.size()) > page_size;
  if (more) ids.pop_back();
  for (std::string& id : ids) response->add_ids(std::move(id));
  if (more) response->set_next_page_token(response->ids(response->ids_size() - 1));
  response->set_gallery_size(gallery.size());
  return grpc::Status::OK;
}

grpc::Status FingerprintServiceImpl::Search(grpc::ServerContext* context, const v1::SearchRequest* request,
                                            v1::SearchResponse* response) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<fingerprint::HostedGallery*> g = GalleryFor(context, request->gallery());
  if (!g.ok()) return ToGrpcStatus(g.status());
  absl::StatusOr<fingerprint::ParsedSearch> parsed = fingerprint::ParseSearchRequest(*request, options_.search_limits());
  if (!parsed.ok()) return ToGrpcStatus(parsed.status());
  fingerprint::BatchedSearch search;
  // Kept for the explanations (the batcher takes the probe).
  std::vector<fingerprint::MinutiaPoint> probe = request->explain() ? parsed->probes[0] : std::vector<fingerprint::MinutiaPoint>{};
  search.probe = std::move(parsed->probes[0]);
  search.top_k = parsed->top_k;
  search.matcher = parsed->matcher;
  search.filter = std::move(parsed->filter);
  search.check = CallCheck(context);
  int64_t retry_after_ms = 0;
  absl::StatusOr<fingerprint::BatchedSearchResult> result = (*g)->batcher->Search(std::move(search), &retry_after_ms);
  if (!result.ok()) {
    if (retry_after_ms > 0) context->AddTrailingMetadata("grpc-retry-pushback-ms", std::to_string(retry_after_ms));
    return ToGrpcStatus(result.status());
  }
  fingerprint::AddCandidates(result->candidates, response->mutable_candidates());
  if (request->explain()) {
    absl::Status explained = ExplainCandidates(*(*g)->gallery, probe, response->mutable_candidates());
    if (!explained.ok()) return ToGrpcStatus(explained);
  }
  v1::SearchTiming* timing = response->mutable_timing();
  fingerprint::SetTiming(result->stats, MsSince(start), timing);
  timing->set_queue_ms(result->queue_seconds * 1e3);
  timing->set_batch_size(result->batch_size);
  return grpc::Status::OK;
}

grpc::Status FingerprintServiceImpl::SearchBatch(grpc::ServerContext* context, const v1::SearchBatchRequest* request,
                                                 v1::SearchBatchResponse* response) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<fingerprint::HostedGallery*> g = GalleryFor(context, request->gallery());
  if (!g.ok()) return ToGrpcStatus(g.status());
  absl::StatusOr<fingerprint::ParsedSearch> parsed =
      fingerprint::ParseSearchBatchRequest(*request, options_.search_limits());
  if (!parsed.ok()) return ToGrpcStatus(parsed.status());
  fingerprint::SearchControl control;
  control.check = CallCheck(context);
  fingerprint::SearchOptions options;
  options.top_k = parsed->top_k;
  options.matcher = parsed->matcher;
  options.filter = std::move(parsed->filter);
  options.control = &control;
  fingerprint::SearchStats stats;
  absl::StatusOr<std::vector<std::vector<fingerprint::SearchCandidate>>> results =
      (*g)->batcher->RunNow(parsed->probes, options, &stats);
  metrics_.CountOutcome(results.status());
  if (!results.ok()) return ToGrpcStatus(results.status());
  for (const auto& probe : *results) fingerprint::AddCandidates(probe, response->add_results()->mutable_candidates());
  fingerprint::SetTiming(stats, MsSince(start), response->mutable_timing());
  response->mutable_timing()->set_batch_size(static_cast<int32_t>(parsed->probes.size()));
  return grpc::Status::OK;
}

grpc::Status FingerprintServiceImpl::Verify(grpc::ServerContext* context, const v1::VerifyRequest* request,
                                            v1::VerifyResponse* response) {
  if (absl::Status live = CheckNotCancelled(*context); !live.ok()) return ToGrpcStatus(live);
  absl::StatusOr<fingerprint::HostedGallery*> g = GalleryFor(context, request->gallery());
  if (!g.ok()) return ToGrpcStatus(g.status());
  fingerprint::FingerprintGallery& gallery = *(*g)->gallery;
  absl::StatusOr<fingerprint::ParsedTemplate> probe = ParseRequestTemplate(request->probe(), "probe");
  if (!probe.ok()) return ToGrpcStatus(probe.status());
  absl::StatusOr<float> score;
  std::vector<fingerprint::MinutiaPoint> against;  // for the explanation
  switch (request->against_case()) {
    case v1::VerifyRequest::kId: {
      score = gallery.VerifyId(probe->minutiae, request->id(), request->matcher());
      if (std::shared_ptr<const fingerprint::StoredTemplate> t = gallery.Get(request->id())) against = t->minutiae;
      break;
    }
    case v1::VerifyRequest::kReference: {
      absl::StatusOr<fingerprint::ParsedTemplate> ref = ParseRequestTemplate(request->reference(), "reference");
      if (!ref.ok()) return ToGrpcStatus(ref.status());
      score = gallery.Compare(probe->minutiae, ref->minutiae, request->matcher());
      against = std::move(ref->minutiae);
      break;
    }
    default:
      return ToGrpcStatus(absl::InvalidArgumentError("give an enrolled id or a reference template"));
  }
  if (!score.ok()) return ToGrpcStatus(score.status());
  response->set_score(*score);
  if (request->explain() && !against.empty()) {
    absl::StatusOr<fingerprint::MatchExplanation> e = fingerprint::ExplainMatch(probe->minutiae, against);
    if (!e.ok()) return ToGrpcStatus(e.status());
    fingerprint::ExplanationToProto(*e, response->mutable_explanation());
  }
  return grpc::Status::OK;
}

grpc::Status FingerprintServiceImpl::Extract(grpc::ServerContext* context, const v1::ExtractRequest* request,
                                             v1::ExtractResponse* response) {
  if (absl::Status decided = CallDecision(context); !decided.ok()) return ToGrpcStatus(decided);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<fingerprint::ImageInput> input = fingerprint::ImageInputFromProto(request->image(), "image", options_.image);
  if (!input.ok()) return ToGrpcStatus(input.status());
  fingerprint::TemplateFormat format = fingerprint::TemplateFormat::kIso19794;
  if (request->format() == v1::TEMPLATE_FORMAT_ANSI378) {
    format = fingerprint::TemplateFormat::kAnsi378;
  } else if (request->format() != v1::TEMPLATE_FORMAT_AUTO && request->format() != v1::TEMPLATE_FORMAT_ISO19794) {
    return ToGrpcStatus(absl::InvalidArgumentError("format: templates are extracted as ISO 19794-2 or ANSI 378"));
  }
  // Extract shows the quality instead of refusing: an examiner wants to see
  // why an image is poor.
  const int min_quality = input->min_quality;
  input->min_quality = 0;
  absl::StatusOr<fingerprint::ImageTemplate> t = fingerprint::TemplateFromImage(request->image().data(), *input, format);
  if (!t.ok()) return ToGrpcStatus(Annotate(t.status(), "image"));
  response->set_record(std::string(t->record.begin(), t->record.end()));
  response->set_format(std::string(fingerprint::TemplateFormatName(t->format)));
  response->set_minutiae(static_cast<int32_t>(t->extraction.view.minutiae.size()));
  response->set_quality(t->quality.score);
  response->set_below_min_quality(!fingerprint::CheckImageQuality(t->quality.score, min_quality).ok());
  response->set_image_format(std::string(fingerprint::ImageFormatName(t->image_format)));
  response->set_width(t->width);
  response->set_height(t->height);
  response->set_ppi(t->ppi);
  if (request->overlay()) {
    absl::StatusOr<std::string> png = EncodePngBytes(fingerprint::DrawMinutiaeOverlay(t->extraction, 2));
    if (!png.ok()) return ToGrpcStatus(png.status());
    response->set_overlay_png(std::move(*png));
  }
  response->set_extract_ms(MsSince(start));
  return grpc::Status::OK;
}

grpc::Status FingerprintServiceImpl::CreateGallery(grpc::ServerContext* context,
                                                   const v1::CreateGalleryRequest* request,
                                                   v1::GalleryInfo* response) {
  if (absl::Status decided = CallDecision(context); !decided.ok()) return ToGrpcStatus(decided);
  if (request->gallery().empty()) return ToGrpcStatus(absl::InvalidArgumentError("gallery (the new name) is required"));
  absl::StatusOr<fingerprint::HostedGallery*> created = galleries_->Create(request->gallery());
  if (!created.ok()) return ToGrpcStatus(created.status());
  response->set_gallery((*created)->name);
  response->set_size((*created)->gallery->size());
  return grpc::Status::OK;
}

grpc::Status FingerprintServiceImpl::DeleteGallery(grpc::ServerContext* context,
                                                   const v1::DeleteGalleryRequest* request,
                                                   v1::GalleryInfo* response) {
  if (absl::Status decided = CallDecision(context); !decided.ok()) return ToGrpcStatus(decided);
  if (request->gallery().empty()) return ToGrpcStatus(absl::InvalidArgumentError("gallery (the name to delete) is required"));
  absl::StatusOr<int64_t> templates = galleries_->Delete(request->gallery());
  if (!templates.ok()) return ToGrpcStatus(templates.status());
  response->set_gallery(request->gallery());
  response->set_size(*templates);
  return grpc::Status::OK;
}

grpc::Status FingerprintServiceImpl::ListGalleries(grpc::ServerContext* context, const v1::ListGalleriesRequest*,
                                                   v1::ListGalleriesResponse* response) {
  if (absl::Status decided = CallDecision(context); !decided.ok()) return ToGrpcStatus(decided);
  for (const auto& [name, size] : galleries_->List()) {
    v1::GalleryInfo* info = response->add_galleries();
    info->set_gallery(name);
    info->set_size(size);
  }
  return grpc::Status::OK;
}

}  // namespace tessera

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

namespace tessera {
namespace fingerprint {
namespace {

absl::Span<const uint8_t> AsBytes(absl::string_view s) {
  return absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

}  // namespace

absl::StatusOr<ParsedTemplate> ParseProbeOrTemplate(absl::string_view bytes, TemplateFormat format, int view) {
  ParsedTemplate out;
  out.format = format == TemplateFormat::kUnknown ? SniffTemplateFormat(AsBytes(bytes)) : format;
  if (out.format == TemplateFormat::kUnknown) {
    return absl::InvalidArgumentError(
        bytes.empty() ? "empty template"
                      : "unrecognised template: not an ISO 19794-2 / ANSI 378 record (\"FMR\\0\") or xyt text");
  }
  absl::StatusOr<std::vector<Template>> views = ParseTemplateRecordAs(out.format, AsBytes(bytes));
  if (!views.ok()) {
    // Truncation is DATA_LOSS inside the parsers; at this edge it is the
    // caller's bad input.
    const absl::StatusCode code = views.status().code();
    if (code == absl::StatusCode::kDataLoss || code == absl::StatusCode::kOutOfRange ||
        code == absl::StatusCode::kInvalidArgument) {
      return absl::InvalidArgumentError(views.status().message());
    }
    return views.status();
  }
  if (view < 0 || view >= static_cast<int>(views->size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("finger view ", view, " requested; the record has ", views->size()));
  }
  for (const Minutia& m : (*views)[view].minutiae) {
    out.minutiae.push_back({static_cast<float>(m.x), static_cast<float>(m.y), static_cast<float>(m.angle)});
  }
  if (out.minutiae.empty()) return absl::InvalidArgumentError("template has no minutiae");
  TESSERA_RETURN_IF_ERROR(ValidateMccInput(out.minutiae, MccParams{}));
  return out;
}

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
  TESSERA_ASSIGN_OR_RETURN(g->searcher_,
                           CreateSearcher({o.matcher, o.device.empty() ? std::string("auto") : o.device}));
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

absl::StatusOr<std::shared_ptr<const StoredTemplate>> FingerprintGallery::Enroll(const EnrollItem& item,
                                                                                  bool replace) {
  if (static_cast<int64_t>(item.bytes.size()) > options_.max_template_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("template of ", item.bytes.size(),
                                                     " bytes; the limit is ", options_.max_template_bytes));
  }
  TESSERA_ASSIGN_OR_RETURN(ParsedTemplate parsed, ParseProbeOrTemplate(item.bytes, item.format, item.view));
  StoredTemplate t;
  t.id = item.id;
  t.format = parsed.format;
  t.bytes = item.bytes;
  t.minutiae = std::move(parsed.minutiae);
  std::shared_ptr<const StoredTemplate> stored;
  {
    std::lock_guard<std::mutex> lock(mutate_mu_);
    TESSERA_ASSIGN_OR_RETURN(stored, store_->Enroll(std::move(t), replace));
    absl::Status added = searcher_->Add({stored});
    if (!added.ok()) {
      TESSERA_LOG(ERROR) << "fingerprint gallery: stored but not searchable: " << added;
    }
  }
  MaybeCompactInBackground();
  return stored;
}

absl::StatusOr<std::vector<absl::Status>> FingerprintGallery::EnrollBatch(const std::vector<EnrollItem>& items,
                                                                          bool replace) {
  std::vector<absl::Status> statuses(items.size());
  std::vector<StoredTemplate> parsed(items.size());
  ParallelForDynamic(static_cast<int64_t>(items.size()), 16, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      const EnrollItem& item = items[i];
      if (static_cast<int64_t>(item.bytes.size()) > options_.max_template_bytes) {
        statuses[i] = absl::ResourceExhaustedError(absl::StrCat("template of ", item.bytes.size(),
                                                                " bytes; the limit is ", options_.max_template_bytes));
        continue;
      }
      absl::StatusOr<ParsedTemplate> p = ParseProbeOrTemplate(item.bytes, item.format, item.view);
      if (!p.ok()) {
        statuses[i] = p.status();
        continue;
      }
      parsed[i].id = item.id;
      parsed[i].format = p->format;
      parsed[i].bytes = item.bytes;
      parsed[i].minutiae = std::move(p->minutiae);
    }
  });
  std::vector<StoredTemplate> batch;
  std::vector<size_t> where;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!statuses[i].ok()) continue;
    batch.push_back(std::move(parsed[i]));
    where.push_back(i);
  }
  {
    std::lock_guard<std::mutex> lock(mutate_mu_);
    TESSERA_ASSIGN_OR_RETURN(auto results, store_->EnrollBatch(std::move(batch), replace));
    std::vector<std::shared_ptr<const StoredTemplate>> stored;
    for (size_t j = 0; j < results.size(); ++j) {
      if (results[j].ok()) {
        stored.push_back(*results[j]);
      } else {
        statuses[where[j]] = results[j].status();
      }
    }
    absl::Status added = searcher_->Add(stored);
    if (!added.ok()) {
      TESSERA_LOG(ERROR) << "fingerprint gallery: stored but not searchable: " << added;
    }
  }
  MaybeCompactInBackground();
  return statuses;
}

absl::Status FingerprintGallery::Delete(absl::string_view id) {
  {
    std::lock_guard<std::mutex> lock(mutate_mu_);
    TESSERA_RETURN_IF_ERROR(store_->Delete(id));
    searcher_->Remove(id);
  }
  MaybeCompactInBackground();
  return absl::OkStatus();
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

}  // namespace fingerprint

// --- the gRPC edge ------------------------------------------------------------

namespace {

absl::StatusOr<fingerprint::TemplateFormat> FromProto(v1::TemplateFormat f) {
  switch (f) {
    case v1::TEMPLATE_FORMAT_AUTO:
      return fingerprint::TemplateFormat::kUnknown;
    case v1::TEMPLATE_FORMAT_ISO19794:
      return fingerprint::TemplateFormat::kIso19794;
    case v1::TEMPLATE_FORMAT_ANSI378:
      return fingerprint::TemplateFormat::kAnsi378;
    case v1::TEMPLATE_FORMAT_XYT:
      return fingerprint::TemplateFormat::kXyt;
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown template format ", static_cast<int>(f)));
  }
}

double Ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

absl::StatusOr<std::unique_ptr<FingerprintServiceImpl>> FingerprintServiceImpl::Create(
    const ServerOptions& server_options, FingerprintServiceOptions options) {
  if (options.device.empty()) options.device = server_options.device;
  if (options.max_top_k < 1 || options.max_probes < 1 || options.enroll_group < 1 || options.max_template_bytes < 1) {
    return absl::InvalidArgumentError("fingerprint service limits must be positive");
  }
  TESSERA_ASSIGN_OR_RETURN(auto gallery, fingerprint::FingerprintGallery::Open(options));
  return std::unique_ptr<FingerprintServiceImpl>(new FingerprintServiceImpl(std::move(options), std::move(gallery)));
}

absl::StatusOr<fingerprint::ParsedTemplate> FingerprintServiceImpl::ParseRequestTemplate(
    const v1::FingerprintTemplate& t, absl::string_view what) const {
  if (static_cast<int64_t>(t.data().size()) > options_.max_template_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": template of ", t.data().size(),
                                                     " bytes; the limit is ", options_.max_template_bytes));
  }
  TESSERA_ASSIGN_OR_RETURN(fingerprint::TemplateFormat format, FromProto(t.format()));
  absl::StatusOr<fingerprint::ParsedTemplate> parsed = fingerprint::ParseProbeOrTemplate(t.data(), format, t.view());
  if (!parsed.ok()) return Annotate(parsed.status(), what);
  return parsed;
}

grpc::Status FingerprintServiceImpl::Enroll(grpc::ServerContext*, const v1::EnrollRequest* request,
                                            v1::EnrollResponse* response) {
  if (!request->has_record()) return ToGrpcStatus(absl::InvalidArgumentError("record is required"));
  absl::StatusOr<fingerprint::TemplateFormat> format = FromProto(request->record().format());
  if (!format.ok()) return ToGrpcStatus(format.status());
  absl::StatusOr<std::shared_ptr<const fingerprint::StoredTemplate>> stored = gallery_->Enroll(
      {request->id(), request->record().data(), *format, request->record().view()}, request->replace());
  if (!stored.ok()) return ToGrpcStatus(stored.status());
  response->set_id((*stored)->id);
  response->set_minutiae(static_cast<int32_t>((*stored)->minutiae.size()));
  response->set_format(std::string(fingerprint::TemplateFormatName((*stored)->format)));
  response->set_gallery_size(gallery_->size());
  return grpc::Status::OK;
}

grpc::Status FingerprintServiceImpl::EnrollStream(grpc::ServerContext*, grpc::ServerReader<v1::EnrollRequest>* reader,
                                                  v1::EnrollStreamResponse* response) {
  const auto start = std::chrono::steady_clock::now();
  constexpr int kMaxReportedErrors = 1000;
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
      TESSERA_ASSIGN_OR_RETURN(std::vector<absl::Status> statuses, gallery_->EnrollBatch(group, replace));
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
    absl::StatusOr<fingerprint::TemplateFormat> format = FromProto(request.record().format());
    if (!request.has_record()) {
      report(index, request.id(), absl::InvalidArgumentError("record is required"));
    } else if (!format.ok()) {
      report(index, request.id(), format.status());
    } else {
      items.push_back({request.id(), std::move(*request.mutable_record()->mutable_data()), *format,
                       request.record().view()});
      positions.push_back(index);
      replace_flags.push_back(request.replace());
      if (static_cast<int>(items.size()) >= options_.enroll_group) {
        absl::Status s = flush();
        if (!s.ok()) return ToGrpcStatus(s);
      }
    }
    ++index;
  }
  absl::Status s = flush();
  if (!s.ok()) return ToGrpcStatus(s);
  response->set_gallery_size(gallery_->size());
  response->set_seconds(Ms(start) / 1000.0);
  return grpc::Status::OK;
}

grpc::Status FingerprintServiceImpl::Delete(grpc::ServerContext*, const v1::DeleteRequest* request,
                                            v1::DeleteResponse* response) {
  absl::Status s = gallery_->Delete(request->id());
  if (!s.ok()) return ToGrpcStatus(s);
  response->set_gallery_size(gallery_->size());
  return grpc::Status::OK;
}

grpc::Status FingerprintServiceImpl::List(grpc::ServerContext*, const v1::ListRequest* request,
                                          v1::ListResponse* response) {
  int page_size = request->page_size() == 0 ? 1000 : request->page_size();
  if (page_size < 0 || page_size > 10000) {
    return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat("page_size must be 1-10000, got ", page_size)));
  }
  std::vector<std::string> ids = gallery_->List(request->page_token(), page_size + 1);
  const bool more = static_cast<int>(ids.size()) > page_size;
  if (more) ids.pop_back();
  for (std::string& id : ids) response->add_ids(std::move(id));
  if (more) response->set_next_page_token(response->ids(response->ids_size() - 1));
  response->set_gallery_size(gallery_->size());
  return grpc::Status::OK;
}

absl::Status FingerprintServiceImpl::SearchImpl(
    const google::protobuf::RepeatedPtrField<v1::FingerprintTemplate>& probes, int top_k, const std::string& matcher,
    std::vector<std::vector<fingerprint::SearchCandidate>>* results, v1::SearchTiming* timing) {
  const auto start = std::chrono::steady_clock::now();
  if (top_k == 0) top_k = 10;
  if (top_k < 1 || top_k > options_.max_top_k) {
    return absl::InvalidArgumentError(absl::StrCat("top_k must be 1-", options_.max_top_k, ", got ", top_k));
  }
  if (probes.size() > options_.max_probes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(probes.size(), " probes in one call; the limit is ", options_.max_probes));
  }
  std::vector<std::vector<fingerprint::MinutiaPoint>> minutiae;
  for (int i = 0; i < probes.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(fingerprint::ParsedTemplate p,
                             ParseRequestTemplate(probes[i], probes.size() == 1 ? "probe" : absl::StrCat("probe ", i)));
    minutiae.push_back(std::move(p.minutiae));
  }
  fingerprint::SearchStats stats;
  TESSERA_ASSIGN_OR_RETURN(*results, gallery_->Search(minutiae, top_k, &stats, matcher));
  timing->set_prepare_ms(stats.prepare_seconds * 1e3);
  timing->set_score_ms(stats.score_seconds * 1e3);
  timing->set_gallery_size(stats.gallery_templates);
  timing->set_backend(stats.backend);
  timing->set_matcher(stats.matcher);
  timing->set_total_ms(Ms(start));
  return absl::OkStatus();
}

grpc::Status FingerprintServiceImpl::Search(grpc::ServerContext*, const v1::SearchRequest* request,
                                            v1::SearchResponse* response) {
  google::protobuf::RepeatedPtrField<v1::FingerprintTemplate> probes;
  *probes.Add() = request->probe();
  std::vector<std::vector<fingerprint::SearchCandidate>> results;
  absl::Status s = SearchImpl(probes, request->top_k(), request->matcher(), &results, response->mutable_timing());
  if (!s.ok()) return ToGrpcStatus(s);
  for (const auto& c : results[0]) {
    v1::Candidate* out = response->add_candidates();
    out->set_id(c.id);
    out->set_score(c.score);
  }
  return grpc::Status::OK;
}

grpc::Status FingerprintServiceImpl::SearchBatch(grpc::ServerContext*, const v1::SearchBatchRequest* request,
                                                 v1::SearchBatchResponse* response) {
  std::vector<std::vector<fingerprint::SearchCandidate>> results;
  absl::Status s =
      SearchImpl(request->probes(), request->top_k(), request->matcher(), &results, response->mutable_timing());
  if (!s.ok()) return ToGrpcStatus(s);
  for (const auto& probe : results) {
    v1::ProbeResult* r = response->add_results();
    for (const auto& c : probe) {
      v1::Candidate* out = r->add_candidates();
      out->set_id(c.id);
      out->set_score(c.score);
    }
  }
  return grpc::Status::OK;
}

grpc::Status FingerprintServiceImpl::Verify(grpc::ServerContext*, const v1::VerifyRequest* request,
                                            v1::VerifyResponse* response) {
  absl::StatusOr<fingerprint::ParsedTemplate> probe = ParseRequestTemplate(request->probe(), "probe");
  if (!probe.ok()) return ToGrpcStatus(probe.status());
  absl::StatusOr<float> score;
  switch (request->against_case()) {
    case v1::VerifyRequest::kId:
      score = gallery_->VerifyId(probe->minutiae, request->id(), request->matcher());
      break;
    case v1::VerifyRequest::kReference: {
      absl::StatusOr<fingerprint::ParsedTemplate> ref = ParseRequestTemplate(request->reference(), "reference");
      if (!ref.ok()) return ToGrpcStatus(ref.status());
      score = gallery_->Compare(probe->minutiae, ref->minutiae, request->matcher());
      break;
    }
    default:
      return ToGrpcStatus(absl::InvalidArgumentError("give an enrolled id or a reference template"));
  }
  if (!score.ok()) return ToGrpcStatus(score.status());
  response->set_score(*score);
  return grpc::Status::OK;
}

}  // namespace tessera

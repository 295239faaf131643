// tessera.v1.FingerprintService (protos/tessera/v1/fingerprint.proto) and
// the engine behind it, FingerprintGallery, which `tessera fp` also uses
// directly on a gallery directory.
//
// FingerprintGallery = GalleryStore (durable truth, gallery_store.h) +
// GallerySearcher (in-memory index, searcher.h). At open the searcher is
// rebuilt from the store: templates whose cylinders the snapshot holds are
// appended as they are read, the rest get their descriptors built on all
// cores. Every enroll/delete is committed to the store first and then applied
// to the searcher, under one mutation lock so both see the same order;
// searches never take that lock. When the log passes compact_log_bytes a
// background thread compacts it into a snapshot (with the cylinders).
//
// The service hosts named galleries (gallery_set.h): every request names one
// (empty: "default"); access per gallery is decided by the auth interceptor
// (services/server/auth.h, CheckGalleryAccess) before a handler sees the call.
//
//   auto service = FingerprintServiceImpl::Create(server_options, {.gallery_dir = "/var/lib/tessera/fp"});
//   host.AddService(service->get());  // must outlive the host
#ifndef TESSERA_SERVICES_FINGERPRINT_FINGERPRINT_SERVICE_H_
#define TESSERA_SERVICES_FINGERPRINT_FINGERPRINT_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/server_context.h>
#include <grpcpp/support/sync_stream.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "services/fingerprint/store/gallery_store.h"
#include "services/fingerprint/search/search_batcher.h"
#include "services/fingerprint/search/search_metrics.h"
#include "services/fingerprint/search_request.h"
#include "services/fingerprint/search/searcher.h"
#include "services/fingerprint/formats/template_io.h"
#include "services/server/hosted_module.h"
#include "services/server/server_options.h"
#include "tessera/v1/fingerprint.grpc.pb.h"

namespace tessera {

struct FingerprintServiceOptions {
  // Where the gallery lives (the service's gallery "default"). Empty: ROOT/default
  // with a galleries_root, else a fresh temporary directory, removed at exit
  // (nothing survives a restart; a warning says so).
  std::string gallery_dir;
  // The service's named galleries live in ROOT/<name>/ (gallery_set.h). Empty:
  // only "default" (CreateGallery answers FAILED_PRECONDITION), unless
  // gallery_dir is empty too (then a temporary root).
  std::string galleries_root;
  std::string matcher = "lssr";  // the default scorer, one of SearcherMatchers() (requests may pick any)
  // "cascade": LSS-R candidates re-scored per probe with DMC + fusion (searcher.h).
  int cascade_candidates = fingerprint::kDefaultCascadeCandidates;
  std::string device;            // "auto", "cpu", "cuda"; empty: ServerOptions::device
  int max_top_k = 1000;
  int max_probes = 1024;                                       // per SearchBatch
  int64_t max_template_bytes = fingerprint::kMaxGalleryTemplateBytes;  // larger: RESOURCE_EXHAUSTED
  // Images (FingerprintImage): bytes and declared pixels beyond these are
  // RESOURCE_EXHAUSTED; min_quality (0-100) refuses images of lower quality
  // unless a request sets its own.
  fingerprint::ImageLimits image;
  // Extracts batches of images (EnrollStream, SearchBatch); null: Create
  // makes one for `device` (the GPU when there is one, else the CPU).
  std::shared_ptr<const fingerprint::ImageExtractor> image_extractor;
  int enroll_group = 1024;                                     // EnrollStream items per fsync
  int64_t compact_log_bytes = int64_t{256} << 20;              // log size that triggers compaction

  // Dynamic batching of Search calls (search_batcher.h).
  int max_batch_size = 64;                                 // searches per batch; 1: off
  // The oldest waits at most this for company. 0 (greedy: a batch is what
  // queued while the previous one ran) measured as good under load and
  // without the 2 ms a lone caller otherwise waits (H200, 2026-12-01).
  absl::Duration max_queue_delay = absl::ZeroDuration();
  int max_queued_searches = 1024;                          // per gallery; beyond: RESOURCE_EXHAUSTED + retry hint
  // Where the search metrics go (search_metrics.h); null: the process registry.
  std::shared_ptr<prometheus::Registry> metrics_registry;

  fingerprint::SearchLimits search_limits() const {
    return {max_top_k, max_probes, max_template_bytes, image, image_extractor.get()};
  }
};

namespace fingerprint {

struct EnrollItem {
  std::string id;
  std::string bytes;
  TemplateFormat format = TemplateFormat::kUnknown;
  int view = 0;
  TemplateMetadata metadata;  // stored with the template
  // Set: `bytes` are an image; the gallery stores the template extracted
  // from it (ISO 19794-2), not the image.
  std::optional<ImageInput> image;
};

// A request's id and record as an enroll item: the template's bytes, or the
// image with its extractor input (ImageInputFromProto's checks and errors).
absl::StatusOr<EnrollItem> EnrollItemFromRequest(std::string id, v1::FingerprintTemplate record,
                                                 const SearchLimits& limits);

class FingerprintGallery {
 public:
  static absl::StatusOr<std::unique_ptr<FingerprintGallery>> Open(const FingerprintServiceOptions& options);
  ~FingerprintGallery();

  // Durable when OK; ALREADY_EXISTS unless `replace`. `quality`: set to an
  // image item's quality (-1 for a template).
  absl::StatusOr<std::shared_ptr<const StoredTemplate>> Enroll(const EnrollItem& item, bool replace = false,
                                                               int* quality = nullptr);
  // Parses (and extracts images) on all cores and commits the good items with one fsync. Per-item
  // status; the call fails only when the store cannot write (then none of
  // this group is acknowledged).
  absl::StatusOr<std::vector<absl::Status>> EnrollBatch(const std::vector<EnrollItem>& items, bool replace = false);
  absl::Status Delete(absl::string_view id);  // NOT_FOUND
  std::vector<std::string> List(absl::string_view after, int limit) const;
  std::shared_ptr<const StoredTemplate> Get(absl::string_view id) const { return store_->Get(id); }
  // Subjects (gallery_store.h): a subject's templates, the subjects a page
  // at a time, and deleting all of a subject's templates (NOT_FOUND: none).
  std::vector<std::shared_ptr<const StoredTemplate>> OfSubject(absl::string_view subject) const {
    return store_->OfSubject(subject);
  }
  std::vector<std::pair<std::string, int64_t>> ListSubjects(absl::string_view after, int limit) const {
    return store_->ListSubjects(after, limit);
  }
  absl::StatusOr<int64_t> DeleteSubject(absl::string_view subject);
  int64_t size() const;

  // `matcher`: "" (the gallery's default) or one of SearcherMatchers().
  absl::StatusOr<std::vector<std::vector<SearchCandidate>>> Search(const std::vector<std::vector<MinutiaPoint>>& probes,
                                                                   int top_k, SearchStats* stats = nullptr,
                                                                   absl::string_view matcher = "");
  // With cancellation (searcher.h, search_control.h).
  absl::StatusOr<std::vector<std::vector<SearchCandidate>>> Search(const std::vector<std::vector<MinutiaPoint>>& probes,
                                                                   const SearchOptions& options,
                                                                   SearchStats* stats = nullptr) {
    return searcher_->Search(probes, options, stats);
  }
  GallerySearcher& searcher() { return *searcher_; }
  absl::StatusOr<float> VerifyId(const std::vector<MinutiaPoint>& probe, absl::string_view id,
                                 absl::string_view matcher = "");
  absl::StatusOr<float> Compare(const std::vector<MinutiaPoint>& a, const std::vector<MinutiaPoint>& b,
                                absl::string_view matcher = "");

  // Capacity hint before enrolling many templates (avoids regrowing the
  // descriptor arrays, which briefly needs twice their memory).
  void Reserve(int64_t templates, int64_t cylinders) { searcher_->Reserve(templates, cylinders); }
  // Snapshot now (also what the background compaction runs).
  absl::Status Compact();
  const std::string& dir() const { return store_->dir(); }
  const GalleryOpenStats& open_stats() const { return store_->open_stats(); }
  double load_seconds() const { return load_seconds_; }
  std::string matcher() const { return searcher_->matcher(); }

 private:
  FingerprintGallery(FingerprintServiceOptions options, bool temporary)
      : options_(std::move(options)), temporary_(temporary) {}
  void MaybeCompactInBackground();
  // The template an item stands for, with the bytes to store: its record, or
  // the one extracted from its image. CheckItemSize: RESOURCE_EXHAUSTED for
  // a template or image beyond its byte limit; StoredFromParsed: the stored
  // form of an item once parsed or extracted.
  absl::StatusOr<StoredTemplate> TemplateOfItem(const EnrollItem& item, int* quality) const;
  absl::Status CheckItemSize(const EnrollItem& item) const;
  static StoredTemplate StoredFromParsed(const EnrollItem& item, ParsedTemplate parsed);
  // After the store committed: the searcher follows the store's current
  // state for these ids.
  void SyncSearcher(const std::vector<std::shared_ptr<const StoredTemplate>>& enrolled,
                    const std::vector<std::string>& deleted);

  const FingerprintServiceOptions options_;
  const bool temporary_;
  std::unique_ptr<GallerySearcher> searcher_;
  std::unique_ptr<GalleryStore> store_;
  std::mutex searcher_mu_;  // one searcher update at a time (SyncSearcher)
  std::mutex compact_thread_mu_;
  std::thread compact_thread_;
  std::atomic<bool> compacting_{false};
  double load_seconds_ = 0;
};

// Adds each candidate's MatchExplanation (match_explain.h) against `probe`;
// candidates no longer in the gallery get none.
absl::Status ExplainCandidates(const FingerprintGallery& gallery, const std::vector<MinutiaPoint>& probe,
                               google::protobuf::RepeatedPtrField<v1::Candidate>* candidates);

class GallerySet;
struct HostedGallery;
// The searcher of a named gallery ("" is "default"): what search jobs run on.
using SearcherLookup = std::function<absl::StatusOr<GallerySearcher*>(absl::string_view gallery)>;

}  // namespace fingerprint

class FingerprintServiceImpl final : public v1::FingerprintService::Service {
 public:
  static absl::StatusOr<std::unique_ptr<FingerprintServiceImpl>> Create(const ServerOptions& server_options,
                                                                        FingerprintServiceOptions options = {});

  grpc::Status Enroll(grpc::ServerContext* context, const v1::EnrollRequest* request,
                      v1::EnrollResponse* response) override;
  grpc::Status EnrollStream(grpc::ServerContext* context, grpc::ServerReader<v1::EnrollRequest>* reader,
                            v1::EnrollStreamResponse* response) override;
  grpc::Status Delete(grpc::ServerContext* context, const v1::DeleteRequest* request,
                      v1::DeleteResponse* response) override;
  grpc::Status List(grpc::ServerContext* context, const v1::ListRequest* request, v1::ListResponse* response) override;
  grpc::Status Search(grpc::ServerContext* context, const v1::SearchRequest* request,
                      v1::SearchResponse* response) override;
  grpc::Status SearchBatch(grpc::ServerContext* context, const v1::SearchBatchRequest* request,
                           v1::SearchBatchResponse* response) override;
  grpc::Status Verify(grpc::ServerContext* context, const v1::VerifyRequest* request,
                      v1::VerifyResponse* response) override;
  grpc::Status Extract(grpc::ServerContext* context, const v1::ExtractRequest* request,
                       v1::ExtractResponse* response) override;
  grpc::Status DeleteGallery(grpc::ServerContext* context, const v1::DeleteGalleryRequest* request,
                             v1::GalleryInfo* response) override;
  grpc::Status CreateGallery(grpc::ServerContext* context, const v1::CreateGalleryRequest* request,
                             v1::GalleryInfo* response) override;
  grpc::Status ListGalleries(grpc::ServerContext* context, const v1::ListGalleriesRequest* request,
                             v1::ListGalleriesResponse* response) override;
  // Subjects and ANSI/NIST transactions (fingerprint_service_subjects.cc).
  grpc::Status EnrollTransaction(grpc::ServerContext* context, const v1::EnrollTransactionRequest* request,
                                 v1::EnrollTransactionResponse* response) override;
  grpc::Status SearchTransaction(grpc::ServerContext* context, const v1::SearchTransactionRequest* request,
                                 v1::SearchTransactionResponse* response) override;
  grpc::Status GetSubject(grpc::ServerContext* context, const v1::GetSubjectRequest* request,
                          v1::GetSubjectResponse* response) override;
  grpc::Status ListSubjects(grpc::ServerContext* context, const v1::ListSubjectsRequest* request,
                            v1::ListSubjectsResponse* response) override;
  grpc::Status DeleteSubject(grpc::ServerContext* context, const v1::DeleteSubjectRequest* request,
                             v1::DeleteSubjectResponse* response) override;

  ~FingerprintServiceImpl() override;
  // The gallery "default" and its batcher (tests and benchmarks: aborts when
  // the default gallery could not be opened).
  fingerprint::FingerprintGallery& gallery();
  fingerprint::SearchBatcher& search_batcher();
  // The service is NOT_SERVING in gRPC health while its default gallery is
  // damaged (the other galleries and services still serve); see hosted_module.h.
  std::vector<NotServing> NotServingServices() const;
  fingerprint::GallerySet& galleries() { return *galleries_; }
  // For the fingerprint.search engine (search_engine.h): valid while the service lives.
  fingerprint::SearcherLookup searcher_lookup();
  const FingerprintServiceOptions& options() const { return options_; }

 private:
  explicit FingerprintServiceImpl(FingerprintServiceOptions options);
  fingerprint::HostedGallery& DefaultOrDie();
  // The gallery a request names, once the call may use it: the auth decision
  // (CallDecision: a stream's gallery is authorized when its first item
  // arrives), INVALID_ARGUMENT for a bad name, NOT_FOUND for an unknown one.
  absl::StatusOr<fingerprint::HostedGallery*> GalleryFor(const grpc::ServerContext* context,
                                                         absl::string_view name) const;
  absl::StatusOr<fingerprint::ParsedTemplate> ParseRequestTemplate(const v1::FingerprintTemplate& t,
                                                                   absl::string_view what) const {
    return fingerprint::ParseRequestTemplate(t, what, options_.search_limits());
  }

  const FingerprintServiceOptions options_;
  fingerprint::SearchMetrics metrics_;
  std::unique_ptr<fingerprint::GallerySet> galleries_;  // after metrics_: its batchers count there
};

}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_FINGERPRINT_SERVICE_H_

// FingerprintService: subjects (GetSubject, ListSubjects, DeleteSubject) and
// ANSI/NIST-ITL transactions (EnrollTransaction, SearchTransaction). Thin
// adapters over FingerprintGallery, ReadTransactionCard,
// PlanTransactionEnroll and TenPrintSearch; reading the card, the search mode
// and the answers are transaction_response.h's (the shard router's too).
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/status.h"
#include "common/text_checks.h"
#include "services/fingerprint/fingerprint_service.h"
#include "services/fingerprint/gallery_set.h"
#include "services/fingerprint/metadata_proto.h"
#include "services/fingerprint/search/tenprint_search.h"
#include "services/fingerprint/transaction_enroll.h"
#include "services/fingerprint/transaction_response.h"
#include "services/server/call_checks.h"

namespace tessera {
using fingerprint::MsSince;

grpc::Status FingerprintServiceImpl::GetSubject(grpc::ServerContext* context, const v1::GetSubjectRequest* request,
                                                v1::GetSubjectResponse* response) {
  absl::StatusOr<fingerprint::HostedGallery*> g = GalleryFor(context, request->gallery());
  if (!g.ok()) return ToGrpcStatus(g.status());
  if (request->subject_id().empty()) return ToGrpcStatus(absl::InvalidArgumentError("subject_id is required"));
  const auto templates = (*g)->gallery->OfSubject(request->subject_id());
  if (templates.empty()) {
    return ToGrpcStatus(absl::NotFoundError(absl::StrCat("no templates of subject ", QuoteBounded(request->subject_id()),
                                                         " in gallery '", (*g)->name, "'")));
  }
  for (const auto& t : templates) {
    v1::SubjectTemplate* o = response->add_templates();
    o->set_id(t->id);
    o->set_minutiae(static_cast<int32_t>(t->minutiae.size()));
    o->set_format(std::string(fingerprint::TemplateFormatName(t->format)));
    fingerprint::MetadataToProto(t->metadata, o->mutable_metadata());
  }
  return grpc::Status::OK;
}

grpc::Status FingerprintServiceImpl::ListSubjects(grpc::ServerContext* context, const v1::ListSubjectsRequest* request,
                                                  v1::ListSubjectsResponse* response) {
  absl::StatusOr<fingerprint::HostedGallery*> g = GalleryFor(context, request->gallery());
  if (!g.ok()) return ToGrpcStatus(g.status());
  const int page_size = request->page_size() == 0 ? 1000 : request->page_size();
  if (page_size < 1 || page_size > 10000) {
    return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat("page_size must be 1-10000, got ", request->page_size())));
  }
  auto subjects = (*g)->gallery->ListSubjects(request->page_token(), page_size + 1);
  const bool more = static_cast<int>(subjects.size()) > page_size;
  if (more) subjects.pop_back();
  for (const auto& [subject, n] : subjects) {
    v1::SubjectSummary* s = response->add_subjects();
    s->set_subject_id(subject);
    s->set_templates(n);
  }
  if (more) response->set_next_page_token(subjects.back().first);
  return grpc::Status::OK;
}

grpc::Status FingerprintServiceImpl::DeleteSubject(grpc::ServerContext* context,
                                                   const v1::DeleteSubjectRequest* request,
                                                   v1::DeleteSubjectResponse* response) {
  absl::StatusOr<fingerprint::HostedGallery*> g = GalleryFor(context, request->gallery());
  if (!g.ok()) return ToGrpcStatus(g.status());
  if (request->subject_id().empty()) return ToGrpcStatus(absl::InvalidArgumentError("subject_id is required"));
  absl::StatusOr<int64_t> deleted = (*g)->gallery->DeleteSubject(request->subject_id());
  if (!deleted.ok()) return ToGrpcStatus(deleted.status());
  response->set_deleted(*deleted);
  response->set_gallery_size((*g)->gallery->size());
  return grpc::Status::OK;
}

grpc::Status FingerprintServiceImpl::EnrollTransaction(grpc::ServerContext* context,
                                                       const v1::EnrollTransactionRequest* request,
                                                       v1::EnrollTransactionResponse* response) {
  absl::StatusOr<fingerprint::HostedGallery*> g = GalleryFor(context, request->gallery());
  if (!g.ok()) return ToGrpcStatus(g.status());
  absl::StatusOr<fingerprint::TransactionCard> card = fingerprint::ReadRequestCard(
      request->transaction(), request->ppi(), request->min_quality(), options_.search_limits().image);
  if (!card.ok()) return ToGrpcStatus(card.status());
  std::vector<std::pair<std::string, std::string>> attributes(request->attributes().begin(),
                                                              request->attributes().end());
  absl::StatusOr<fingerprint::TransactionEnrollment> plan = fingerprint::PlanTransactionEnroll(
      *card, request->subject_id(), request->id_prefix(), std::move(attributes));
  if (!plan.ok()) return ToGrpcStatus(plan.status());
  if (absl::Status live = CheckNotCancelled(*context); !live.ok()) return ToGrpcStatus(live);
  absl::StatusOr<std::vector<absl::Status>> stored = (*g)->gallery->EnrollBatch(plan->items, request->replace());
  if (!stored.ok()) return ToGrpcStatus(stored.status());
  fingerprint::SetEnrollTransactionResponse(*card, plan->subject_id, plan->ids, plan->finger_of_item, *stored,
                                            response);
  response->set_gallery_size((*g)->gallery->size());
  return grpc::Status::OK;
}

grpc::Status FingerprintServiceImpl::SearchTransaction(grpc::ServerContext* context,
                                                       const v1::SearchTransactionRequest* request,
                                                       v1::SearchTransactionResponse* response) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<fingerprint::HostedGallery*> g = GalleryFor(context, request->gallery());
  if (!g.ok()) return ToGrpcStatus(g.status());
  const fingerprint::SearchLimits limits = options_.search_limits();
  // top_k and matcher checked as Search checks them.
  absl::StatusOr<fingerprint::ParsedSearch> parsed = fingerprint::ParseSearch({}, request->top_k(), request->matcher(), limits);
  if (!parsed.ok()) return ToGrpcStatus(parsed.status());
  absl::StatusOr<fingerprint::TenPrintFusion> fusion = fingerprint::TenPrintFusionFromProto(request->fusion());
  if (!fusion.ok()) return ToGrpcStatus(fusion.status());
  absl::StatusOr<fingerprint::TransactionCard> card =
      fingerprint::ReadRequestCard(request->transaction(), request->ppi(), request->min_quality(), limits.image);
  if (!card.ok()) return ToGrpcStatus(card.status());
  // The fingers that can be searched, with their minutiae, and the mode.
  absl::StatusOr<fingerprint::TransactionProbes> prepared = fingerprint::PrepareTransactionSearch(*card, response);
  if (!prepared.ok()) return ToGrpcStatus(prepared.status());
  const std::vector<int>& searched = prepared->searched;
  const std::vector<std::vector<fingerprint::MinutiaPoint>>& probes = prepared->minutiae;
  fingerprint::SearchControl control;
  control.check = [context] { return CheckNotCancelled(*context); };
  fingerprint::SearchStats stats;
  // A latent submission (or a single finger): each finger on its own. A card:
  // ten-print, fused per subject.
  if (prepared->latent) {
    fingerprint::SearchOptions options;
    options.top_k = parsed->top_k;
    options.matcher = parsed->matcher;
    options.control = &control;
    absl::StatusOr<std::vector<std::vector<fingerprint::SearchCandidate>>> results =
        (*g)->batcher->RunNow(probes, options, &stats);
    if (!results.ok()) return ToGrpcStatus(results.status());
    for (size_t j = 0; j < searched.size(); ++j) {
      auto* out = response->mutable_probes(searched[j])->mutable_candidates();
      fingerprint::AddCandidates((*results)[j], out);
      if (request->explain()) {
        absl::Status explained = fingerprint::ExplainCandidates(*(*g)->gallery, probes[j], out);
        if (!explained.ok()) return ToGrpcStatus(explained);
      }
    }
  } else {
    std::vector<fingerprint::CardFinger> fingers;
    for (size_t j = 0; j < searched.size(); ++j) {
      fingers.push_back({card->fingers[searched[j]].position, probes[j]});
    }
    fingerprint::TenPrintOptions options;
    options.top_k = parsed->top_k;
    options.fusion = *fusion;
    fingerprint::SearchBatcher* batcher = (*g)->batcher.get();
    const std::string matcher = parsed->matcher;
    // Every finger in one pass over the gallery, each limited to its own
    // finger position (probe_filters).
    fingerprint::CardSearchFn search = [&](const std::vector<std::vector<fingerprint::MinutiaPoint>>& card_probes,
                                           const std::vector<fingerprint::TemplateFilter>& filters, int k) {
      fingerprint::SearchOptions o;
      o.top_k = k;
      o.matcher = matcher;
      o.probe_filters = filters;
      o.control = &control;
      return batcher->RunNow(card_probes, o, &stats);
    };
    absl::StatusOr<std::vector<fingerprint::SubjectMatch>> subjects =
        fingerprint::TenPrintSearchBatched(fingers, options, search);
    if (!subjects.ok()) return ToGrpcStatus(subjects.status());
    fingerprint::AddSubjectCandidates(*subjects, response);
  }
  fingerprint::SetTiming(stats, MsSince(start), response->mutable_timing());
  response->mutable_timing()->set_batch_size(static_cast<int32_t>(probes.size()));
  return grpc::Status::OK;
}

}  // namespace tessera

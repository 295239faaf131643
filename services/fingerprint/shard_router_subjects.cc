// FingerprintShardRouter: subjects (GetSubject, ListSubjects, DeleteSubject)
// and ANSI/NIST-ITL transactions (EnrollTransaction, SearchTransaction) over
// the shards, answering as one server does (shard_router.h).
#include "services/fingerprint/shard_router.h"

#include "services/server/bearer_channel.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <utility>

#include <grpc/grpc.h>
#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/async_unary_call.h>
#include <grpcpp/support/channel_arguments.h>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/parallel.h"
#include "services/fingerprint/metadata_proto.h"
#include "services/fingerprint/search/tenprint_search.h"
#include "services/fingerprint/shard_fanout.h"
#include "services/fingerprint/shard_merge.h"
#include "services/fingerprint/transaction_enroll.h"
#include "services/fingerprint/transaction_response.h"
#include "services/server/gallery_names.h"

namespace tessera {

using namespace shard_fanout;  // NOLINT: the router's own plumbing
using fingerprint::MsSince;

grpc::Status FingerprintShardRouter::GetSubject(grpc::ServerContext* context, const v1::GetSubjectRequest* request,
                                                v1::GetSubjectResponse* response) {
  // A subject's templates are on the shards their ids hash to: ask them all.
  auto calls = CallsTo<v1::GetSubjectResponse>(AllShards(shard_count()));
  FanOut(
      *context, calls,
      [&](int s, grpc::ClientContext* c, grpc::CompletionQueue* cq) {
        return shards_[s].stub->PrepareAsyncGetSubject(c, *request, cq);
      },
      /*cancel_on_failure=*/false);  // NOT_FOUND from some shards is an answer
  int missing = 0;
  std::vector<v1::SubjectTemplate> templates;
  for (auto& c : calls) {
    if (c.status.error_code() == grpc::StatusCode::NOT_FOUND) {
      ++missing;
    } else if (!c.status.ok()) {
      return ShardFailure(c.shard, c.status, *context, "; a subject's templates may be on any shard");
    } else {
      for (v1::SubjectTemplate& t : *c.response.mutable_templates()) templates.push_back(std::move(t));
    }
  }
  if (missing == shard_count()) return calls[0].status;  // what one server says (none, or no such gallery)
  std::sort(templates.begin(), templates.end(),
            [](const v1::SubjectTemplate& a, const v1::SubjectTemplate& b) { return a.id() < b.id(); });
  templates.erase(std::unique(templates.begin(), templates.end(),  // an id on two shards (being moved) once
                              [](const v1::SubjectTemplate& a, const v1::SubjectTemplate& b) { return a.id() == b.id(); }),
                  templates.end());
  for (v1::SubjectTemplate& t : templates) *response->add_templates() = std::move(t);
  return grpc::Status::OK;
}

grpc::Status FingerprintShardRouter::ListSubjects(grpc::ServerContext* context, const v1::ListSubjectsRequest* request,
                                                  v1::ListSubjectsResponse* response) {
  const int page_size = request->page_size() == 0 ? 1000 : request->page_size();
  if (page_size < 1 || page_size > 10000) {
    return ToGrpcStatus(
        absl::InvalidArgumentError(absl::StrCat("page_size must be 1-10000, got ", request->page_size())));
  }
  v1::ListSubjectsRequest page = *request;
  page.set_page_size(page_size);
  auto calls = CallsTo<v1::ListSubjectsResponse>(AllShards(shard_count()));
  const int failed = FanOut(*context, calls, [&](int s, grpc::ClientContext* c, grpc::CompletionQueue* cq) {
    return shards_[s].stub->PrepareAsyncListSubjects(c, page, cq);
  });
  if (failed >= 0)
    return ShardFailure(calls[failed].shard, calls[failed].status, *context, "; listing needs every shard");
  std::map<std::string, int64_t> counts;  // byte order; a subject's parts summed
  bool more = false;
  for (const auto& c : calls) {
    more = more || !c.response.next_page_token().empty();
    for (const v1::SubjectSummary& s : c.response.subjects()) counts[s.subject_id()] += s.templates();
  }
  // A shard with more left has given page_size subjects, all merged here, so
  // its rest comes after this page's last subject (and no subject kept here
  // has templates there beyond what it gave).
  if (static_cast<int>(counts.size()) > page_size) more = true;
  for (const auto& [subject, n] : counts) {
    if (response->subjects_size() >= page_size) break;
    v1::SubjectSummary* s = response->add_subjects();
    s->set_subject_id(subject);
    s->set_templates(n);
  }
  if (more && response->subjects_size() > 0) {
    response->set_next_page_token(response->subjects(response->subjects_size() - 1).subject_id());
  }
  return grpc::Status::OK;
}

grpc::Status FingerprintShardRouter::DeleteSubject(grpc::ServerContext* context,
                                                   const v1::DeleteSubjectRequest* request,
                                                   v1::DeleteSubjectResponse* response) {
  // On every shard; one without the subject (none of its templates hash
  // there, or an earlier, partly failed delete took them) is fine, so a retry
  // completes a partial delete. NOT_FOUND only when no shard had any.
  auto calls = CallsTo<v1::DeleteSubjectResponse>(AllShards(shard_count()));
  FanOut(
      *context, calls,
      [&](int s, grpc::ClientContext* c, grpc::CompletionQueue* cq) {
        return shards_[s].stub->PrepareAsyncDeleteSubject(c, *request, cq);
      },
      /*cancel_on_failure=*/false);
  int missing = 0;
  int64_t deleted = 0;
  std::vector<int64_t> known(shard_count(), -1);
  for (const auto& c : calls) {
    if (c.status.error_code() == grpc::StatusCode::NOT_FOUND) {
      ++missing;
    } else if (!c.status.ok()) {
      return ShardFailure(c.shard, c.status, *context,
                          "; the other shards may have deleted their part of the subject: retry to complete the "
                          "delete (shards that deleted it already are skipped)");
    } else {
      deleted += c.response.deleted();
      known[c.shard] = c.response.gallery_size();
    }
  }
  if (missing == shard_count()) return calls[0].status;
  response->set_deleted(deleted);
  response->set_gallery_size(TotalGallerySize(context, std::move(known), request->gallery()));
  return grpc::Status::OK;
}

grpc::Status FingerprintShardRouter::EnrollTransaction(grpc::ServerContext* context,
                                                       const v1::EnrollTransactionRequest* request,
                                                       v1::EnrollTransactionResponse* response) {
  // A bad gallery name before the card's images are extracted (the shards
  // would refuse it after); an unknown gallery is the shards' NOT_FOUND.
  if (absl::Status name = CheckGalleryName(GalleryOrDefault(request->gallery())); !name.ok()) {
    return ToGrpcStatus(name);
  }
  absl::StatusOr<fingerprint::TransactionCard> card =
      fingerprint::ReadRequestCard(request->transaction(), request->ppi(), request->min_quality(), image_limits_);
  if (!card.ok()) return ToGrpcStatus(card.status());
  std::vector<std::pair<std::string, std::string>> attributes(request->attributes().begin(),
                                                              request->attributes().end());
  absl::StatusOr<fingerprint::TransactionEnrollment> plan = fingerprint::PlanTransactionEnroll(
      *card, request->subject_id(), request->id_prefix(), std::move(attributes));
  if (!plan.ok()) return ToGrpcStatus(plan.status());
  // Each finger's template to its id's shard, all at once.
  std::vector<int> shard_of(plan->items.size());
  std::vector<v1::EnrollRequest> enrolls(plan->items.size());
  for (size_t j = 0; j < plan->items.size(); ++j) {
    const fingerprint::EnrollItem& item = plan->items[j];
    shard_of[j] = fingerprint::ShardForId(item.id, shard_count());
    v1::EnrollRequest& e = enrolls[j];
    e.set_id(item.id);
    e.mutable_record()->set_data(item.bytes);
    e.mutable_record()->set_format(v1::TEMPLATE_FORMAT_ISO19794);
    e.set_replace(request->replace());
    e.set_gallery(request->gallery());
    fingerprint::MetadataToProto(item.metadata, e.mutable_metadata());
  }
  auto calls = CallsTo<v1::EnrollResponse>(shard_of);
  FanOut(
      *context, calls,
      [&](size_t j, int s, grpc::ClientContext* c, grpc::CompletionQueue* cq) {
        return shards_[s].stub->PrepareAsyncEnroll(c, enrolls[j], cq);
      },
      /*cancel_on_failure=*/false);  // a refused finger is that finger's result
  std::vector<absl::Status> stored(calls.size());
  std::vector<int64_t> known(shard_count(), -1);
  for (size_t j = 0; j < calls.size(); ++j) {
    const auto& c = calls[j];
    switch (c.status.error_code()) {
      case grpc::StatusCode::OK:
        // The largest size a shard reported is the one after all of this card's fingers there.
        known[c.shard] = std::max(known[c.shard], c.response.gallery_size());
        break;
      // What the finger itself caused: its result, as one server's EnrollBatch gives it.
      case grpc::StatusCode::INVALID_ARGUMENT:
      case grpc::StatusCode::ALREADY_EXISTS:
      case grpc::StatusCode::OUT_OF_RANGE:
      case grpc::StatusCode::RESOURCE_EXHAUSTED:
        stored[j] = absl::Status(static_cast<absl::StatusCode>(c.status.error_code()), c.status.error_message());
        break;
      default:
        // NOT_FOUND (no such gallery), the caller's deadline or cancel: as
        // they are; anything else: the shard failed.
        return ShardFailure(c.shard, c.status, *context,
                            "; fingers sent to the other shards may be stored: re-send with replace");
    }
  }
  fingerprint::SetEnrollTransactionResponse(*card, plan->subject_id, plan->ids, plan->finger_of_item, stored,
                                            response);
  response->set_gallery_size(TotalGallerySize(context, std::move(known), request->gallery()));
  return grpc::Status::OK;
}

grpc::Status FingerprintShardRouter::SearchTransaction(grpc::ServerContext* context,
                                                       const v1::SearchTransactionRequest* request,
                                                       v1::SearchTransactionResponse* response) {
  const auto start = std::chrono::steady_clock::now();
  if (absl::Status name = CheckGalleryName(GalleryOrDefault(request->gallery())); !name.ok()) {
    return ToGrpcStatus(name);
  }
  // top_k and matcher checked as one server (with the default limits) checks them.
  fingerprint::SearchLimits limits;
  limits.image = image_limits_;
  absl::StatusOr<fingerprint::ParsedSearch> parsed =
      fingerprint::ParseSearch({}, request->top_k(), request->matcher(), limits);
  if (!parsed.ok()) return ToGrpcStatus(parsed.status());
  absl::StatusOr<fingerprint::TenPrintFusion> fusion = fingerprint::TenPrintFusionFromProto(request->fusion());
  if (!fusion.ok()) return ToGrpcStatus(fusion.status());
  absl::StatusOr<fingerprint::TransactionCard> card =
      fingerprint::ReadRequestCard(request->transaction(), request->ppi(), request->min_quality(), image_limits_);
  if (!card.ok()) return ToGrpcStatus(card.status());
  absl::StatusOr<fingerprint::TransactionProbes> probes = fingerprint::PrepareTransactionSearch(*card, response);
  if (!probes.ok()) return ToGrpcStatus(probes.status());
  // Probe j's search: its finger's ISO template, as the card gave it.
  auto probe_request = [&](size_t j, int top_k) {
    v1::SearchRequest r;
    const std::vector<uint8_t>& record = card->fingers[probes->searched[j]].record;
    r.mutable_probe()->set_data(std::string(record.begin(), record.end()));
    r.mutable_probe()->set_format(v1::TEMPLATE_FORMAT_ISO19794);
    r.set_top_k(top_k);
    r.set_matcher(request->matcher());
    r.set_gallery(request->gallery());
    return r;
  };
  v1::SearchTiming* timing = response->mutable_timing();
  auto add_timing = [timing](const v1::SearchTiming& t) {  // the probes ran one after the other
    timing->set_prepare_ms(timing->prepare_ms() + t.prepare_ms());
    timing->set_score_ms(timing->score_ms() + t.score_ms());
    timing->set_gallery_size(t.gallery_size());
    timing->set_backend(t.backend());
    timing->set_matcher(t.matcher());
  };
  if (probes->latent) {
    for (size_t j = 0; j < probes->searched.size(); ++j) {
      v1::SearchRequest r = probe_request(j, parsed->top_k);
      r.set_explain(request->explain());
      v1::SearchResponse found;
      if (grpc::Status s = SearchShards(context, r, &found); !s.ok()) return s;
      *response->mutable_probes(probes->searched[j])->mutable_candidates() = std::move(*found.mutable_candidates());
      add_timing(found.timing());
    }
  } else {
    std::vector<fingerprint::CardFinger> fingers;
    for (size_t j = 0; j < probes->searched.size(); ++j) {
      fingers.push_back({card->fingers[probes->searched[j]].position, probes->minutiae[j]});
    }
    constexpr int kMaxShardTopK = 1000;  // the largest top_k a shard takes (SearchRequest)
    fingerprint::TenPrintOptions options;
    options.top_k = parsed->top_k;
    options.fusion = *fusion;
    options.per_finger_candidates = std::min(std::max(100, 10 * parsed->top_k), kMaxShardTopK);
    grpc::Status shard_status;  // a finger search's failure, returned as it is
    fingerprint::FingerSearchFn search = [&](const std::vector<fingerprint::MinutiaPoint>& probe,
                                             const fingerprint::TemplateFilter& filter, int k)
        -> absl::StatusOr<std::vector<fingerprint::SearchCandidate>> {
      size_t j = 0;  // which card finger (TenPrintSearch passes each finger's own minutiae)
      while (j < fingers.size() && &fingers[j].minutiae != &probe) ++j;
      if (j == fingers.size()) return absl::InternalError("ten-print search of an unknown finger");
      v1::SearchRequest r = probe_request(j, k);
      for (int p : filter.finger_positions) r.add_finger_positions(p);
      for (int t : filter.impression_types) r.add_impression_types(t);
      v1::SearchResponse found;
      shard_status = SearchShards(context, r, &found);
      if (!shard_status.ok()) {
        return absl::Status(static_cast<absl::StatusCode>(shard_status.error_code()), shard_status.error_message());
      }
      add_timing(found.timing());
      std::vector<fingerprint::SearchCandidate> out;
      out.reserve(found.candidates_size());
      for (const v1::Candidate& c : found.candidates()) out.push_back(fingerprint::CandidateFromProto(c));
      return out;
    };
    absl::StatusOr<std::vector<fingerprint::SubjectMatch>> subjects =
        fingerprint::TenPrintSearch(fingers, options, search);
    if (!subjects.ok()) return shard_status.ok() ? ToGrpcStatus(subjects.status()) : shard_status;
    fingerprint::AddSubjectCandidates(*subjects, response);
  }
  timing->set_total_ms(MsSince(start));
  timing->set_batch_size(static_cast<int32_t>(probes->minutiae.size()));
  return grpc::Status::OK;
}

}  // namespace tessera

#include "services/fingerprint/transaction_response.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace tessera {
namespace fingerprint {

absl::StatusOr<TransactionCard> ReadRequestCard(const std::string& bytes, double ppi, int min_quality,
                                                const ImageLimits& limits) {
  if (bytes.empty()) return absl::InvalidArgumentError("transaction is required (the ANSI/NIST-ITL file's bytes)");
  const int64_t max_bytes = 4 * limits.max_image_bytes;  // a card holds up to 14 images
  if (static_cast<int64_t>(bytes.size()) > max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("transaction of ", bytes.size(), " bytes; the limit is ", max_bytes));
  }
  v1::FingerprintImage image;  // only its resolution and quality fields
  image.set_ppi(ppi);
  image.set_min_quality(min_quality);
  TESSERA_ASSIGN_OR_RETURN(ImageInput input, ImageInputFromProto(image, "transaction", limits));
  return ReadTransactionCard(bytes, input);
}

void SetEnrollTransactionResponse(const TransactionCard& card, absl::string_view subject_id,
                                  const std::vector<std::string>& ids, const std::vector<size_t>& finger_of_item,
                                  const std::vector<absl::Status>& stored, v1::EnrollTransactionResponse* response) {
  std::vector<absl::Status> status_of(card.fingers.size());
  for (size_t i = 0; i < card.fingers.size(); ++i) status_of[i] = card.fingers[i].status;
  for (size_t j = 0; j < stored.size() && j < finger_of_item.size(); ++j) status_of[finger_of_item[j]] = stored[j];
  response->set_subject_id(std::string(subject_id));
  response->set_tcn(card.tcn);
  for (size_t i = 0; i < card.fingers.size(); ++i) {
    const TransactionFinger& f = card.fingers[i];
    v1::TransactionFingerResult* r = response->add_fingers();
    r->set_record_type(f.record_type);
    r->set_idc(f.idc);
    r->set_finger_position(f.position);
    r->set_impression_type(f.impression_type);
    if (i < ids.size()) r->set_id(ids[i]);
    r->set_source(f.source);
    r->set_minutiae(f.minutiae);
    r->set_quality(f.quality);
    r->set_code(static_cast<int32_t>(status_of[i].code()));
    r->set_message(std::string(status_of[i].message()));
    if (status_of[i].ok()) {
      response->set_enrolled(response->enrolled() + 1);
    } else {
      response->set_failed(response->failed() + 1);
    }
  }
}

namespace {

void SetFingerFields(const TransactionFinger& f, v1::TransactionProbe* p) {
  p->set_record_type(f.record_type);
  p->set_idc(f.idc);
  p->set_finger_position(f.position);
  p->set_impression_type(f.impression_type);
  p->set_source(f.source);
  p->set_minutiae(f.minutiae);
  p->set_quality(f.quality);
  p->set_code(static_cast<int32_t>(f.status.code()));
  p->set_message(std::string(f.status.message()));
}

}  // namespace

TransactionProbes SearchableProbes(TransactionCard& card) {
  TransactionProbes out;
  std::vector<const TransactionFinger*> searchable;
  for (size_t i = 0; i < card.fingers.size(); ++i) {
    TransactionFinger& f = card.fingers[i];
    if (!f.status.ok()) continue;
    absl::StatusOr<ParsedTemplate> t = ParseProbeOrTemplate(
        absl::string_view(reinterpret_cast<const char*>(f.record.data()), f.record.size()), TemplateFormat::kIso19794);
    if (t.ok()) {
      out.searched.push_back(static_cast<int>(i));
      searchable.push_back(&f);
      out.minutiae.push_back(std::move(t->minutiae));
    } else {
      f.status = t.status();
    }
  }
  // A latent submission (or a single finger): each finger on its own. A card:
  // ten-print, fused per subject.
  out.latent = IsLatentSubmission(searchable);
  return out;
}

absl::StatusOr<TransactionProbes> PrepareTransactionSearch(TransactionCard& card,
                                                           v1::SearchTransactionResponse* response) {
  response->set_tcn(card.tcn);
  TransactionProbes out = SearchableProbes(card);
  for (const TransactionFinger& f : card.fingers) SetFingerFields(f, response->add_probes());
  if (out.minutiae.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("no finger of the transaction can be searched (",
                                                   card.fingers.size(), " fingers; see each probe's message)"));
  }
  response->set_mode(out.latent ? "latent" : "ten-print");
  return out;
}

absl::StatusOr<TenPrintFusion> TenPrintFusionFromProto(v1::TenPrintFusion fusion) {
  switch (fusion) {
    case v1::TEN_PRINT_FUSION_DEFAULT:
    case v1::TEN_PRINT_FUSION_SUM:
      return TenPrintFusion::kSum;
    case v1::TEN_PRINT_FUSION_MAX:
      return TenPrintFusion::kMax;
    default:
      return absl::InvalidArgumentError(absl::StrCat("fusion: unknown rule ", fusion));
  }
}

void AddSubjectCandidates(const std::vector<SubjectMatch>& subjects, v1::SearchTransactionResponse* response) {
  for (const SubjectMatch& m : subjects) {
    v1::SubjectCandidate* s = response->add_subjects();
    s->set_subject_id(m.subject_id);
    s->set_score(m.score);
    for (const FingerMatch& f : m.fingers) {
      v1::FingerMatch* o = s->add_fingers();
      o->set_finger_position(f.finger_position);
      o->set_id(f.id);
      o->set_score(f.score);
    }
  }
}

SearchCandidate CandidateFromProto(const v1::Candidate& candidate) {
  SearchCandidate c;
  c.id = candidate.id();
  c.score = candidate.score();
  if (candidate.has_metadata()) {
    const v1::TemplateMetadata& m = candidate.metadata();
    auto metadata = std::make_shared<TemplateMetadata>();
    metadata->subject_id = m.subject_id();
    metadata->finger_position = m.finger_position();
    metadata->impression_type = m.has_impression_type() ? m.impression_type() : kUnknownImpressionType;
    metadata->capture_date = m.capture_date();
    metadata->source_tcn = m.source_tcn();
    metadata->attributes.assign(m.attributes().begin(), m.attributes().end());
    std::sort(metadata->attributes.begin(), metadata->attributes.end());
    c.metadata = std::move(metadata);
  }
  return c;
}

}  // namespace fingerprint
}  // namespace tessera

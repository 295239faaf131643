#include "services/fingerprint/metadata_proto.h"

#include "common/status.h"

namespace tessera {
namespace fingerprint {

absl::StatusOr<TemplateMetadata> MetadataFromProto(const v1::TemplateMetadata& m) {
  TemplateMetadata out;
  out.subject_id = m.subject_id();
  out.finger_position = m.finger_position();
  out.impression_type = m.has_impression_type() ? m.impression_type() : kUnknownImpressionType;
  if (m.has_impression_type() && m.impression_type() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("metadata: impression type must be 0-255, got ", m.impression_type()));
  }
  if (!m.capture_date().empty()) {
    TESSERA_RETURN_IF_ERROR(Annotate(NormalizeCaptureDate(m.capture_date(), &out.capture_date), "metadata"));
  }
  out.source_tcn = m.source_tcn();
  for (const auto& [key, value] : m.attributes()) out.attributes.emplace_back(key, value);
  TESSERA_RETURN_IF_ERROR(Annotate(NormalizeAttributes(&out.attributes), "metadata"));
  TESSERA_RETURN_IF_ERROR(Annotate(ValidateTemplateMetadata(out), "metadata"));
  return out;
}

void MetadataToProto(const TemplateMetadata& m, v1::TemplateMetadata* out) {
  out->set_subject_id(m.subject_id);
  out->set_finger_position(m.finger_position);
  if (m.impression_type != kUnknownImpressionType) out->set_impression_type(m.impression_type);
  out->set_capture_date(m.capture_date);
  out->set_source_tcn(m.source_tcn);
  for (const auto& [key, value] : m.attributes) (*out->mutable_attributes())[key] = value;
}

void ExplanationToProto(const MatchExplanation& e, v1::MatchExplanation* out) {
  out->set_score(e.score);
  out->set_rotation(e.alignment.rotation);
  out->set_tx(e.alignment.tx);
  out->set_ty(e.alignment.ty);
  out->set_rms_residual(e.rms_residual);
  for (const MatchedPair& p : e.pairs) {
    v1::MinutiaPair* o = out->add_pairs();
    o->set_probe_index(p.probe_index);
    o->set_candidate_index(p.gallery_index);
    o->set_probe_x(p.probe.x);
    o->set_probe_y(p.probe.y);
    o->set_probe_theta(p.probe.theta);
    o->set_candidate_x(p.gallery.x);
    o->set_candidate_y(p.gallery.y);
    o->set_candidate_theta(p.gallery.theta);
    o->set_local_score(p.local_similarity);
    o->set_residual(static_cast<float>(p.residual));
  }
}

absl::StatusOr<TemplateFilter> FilterFromProto(const google::protobuf::RepeatedField<int32_t>& finger_positions,
                                               const google::protobuf::RepeatedField<int32_t>& impression_types) {
  TemplateFilter f;
  f.finger_positions.assign(finger_positions.begin(), finger_positions.end());
  f.impression_types.assign(impression_types.begin(), impression_types.end());
  TESSERA_RETURN_IF_ERROR(ValidateTemplateFilter(f));
  return f;
}

}  // namespace fingerprint
}  // namespace tessera

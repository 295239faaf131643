#include "services/fingerprint/formats/template_iso19794.h"

#include "common/status.h"
#include "services/fingerprint/formats/byte_io.h"
#include "services/fingerprint/formats/fmr_views.h"

namespace tessera {
namespace fingerprint {

using internal::AngleUnit;
using internal::ByteReader;
using internal::ByteWriter;

namespace {
constexpr AngleUnit kIsoAngle{256};
constexpr char kContext[] = "ISO 19794-2 record";
}  // namespace


absl::StatusOr<std::vector<Template>> ParseIso19794(absl::Span<const uint8_t> bytes) {
  ByteReader r(bytes, kContext, absl::StatusCode::kDataLoss);
  TESSERA_RETURN_IF_ERROR(internal::ReadFmrMagic(r));
  uint32_t length = 0;
  TESSERA_RETURN_IF_ERROR(r.U32("record length", &length));
  TESSERA_RETURN_IF_ERROR(internal::CheckRecordLength(r, length, bytes.size(), kIso19794HeaderBytes));
  r.set_shortage_code(absl::StatusCode::kInvalidArgument);  // from here on a shortage is an inconsistent record
  return internal::ReadFmrImageAndViews(r, Template(), kIsoAngle);
}

absl::StatusOr<std::vector<uint8_t>> WriteIso19794(const std::vector<Template>& views) {
  TESSERA_RETURN_IF_ERROR(ValidateRecordViews(views));
  const size_t total = kIso19794HeaderBytes + internal::FingerViewsSize(views);
  ByteWriter w;
  internal::WriteFmrMagic(w);
  w.U32(static_cast<uint32_t>(total));
  internal::WriteFmrImageAndViews(views, kIsoAngle, w);
  if (w.size() != total) return absl::InternalError("ISO 19794-2 writer: size bookkeeping mismatch");
  return w.Take();
}

}  // namespace fingerprint
}  // namespace tessera

#include "services/fingerprint/formats/template_ansi378.h"

#include "common/status.h"
#include "services/fingerprint/formats/byte_io.h"
#include "services/fingerprint/formats/fmr_views.h"

namespace tessera {
namespace fingerprint {

using internal::AngleUnit;
using internal::ByteReader;
using internal::ByteWriter;

namespace {
constexpr AngleUnit kAnsiAngle{180};
constexpr char kContext[] = "ANSI 378 record";
constexpr size_t kShortHeader = 26;  // magic 4 + version 4 + length 2 + product 4 + 12
constexpr size_t kLongHeader = 30;   // with the 6-byte length form
}  // namespace

absl::StatusOr<std::vector<Template>> ParseAnsi378(absl::Span<const uint8_t> bytes) {
  ByteReader r(bytes, kContext, absl::StatusCode::kDataLoss);
  TESSERA_RETURN_IF_ERROR(internal::ReadFmrMagic(r));
  uint16_t short_length = 0;
  TESSERA_RETURN_IF_ERROR(r.U16("record length", &short_length));
  uint64_t length = short_length;
  size_t header = kShortHeader;
  if (short_length == 0) {  // long form: 0x0000 then a 4-byte length
    uint32_t long_length = 0;
    TESSERA_RETURN_IF_ERROR(r.U32("record length (4-byte form)", &long_length));
    length = long_length;
    header = kLongHeader;
  }
  TESSERA_RETURN_IF_ERROR(internal::CheckRecordLength(r, length, bytes.size(), header));
  r.set_shortage_code(absl::StatusCode::kInvalidArgument);
  Template record;
  TESSERA_RETURN_IF_ERROR(r.U32("CBEFF product identifier", &record.cbeff_product_id));
  return internal::ReadFmrImageAndViews(r, record, kAnsiAngle);
}

absl::StatusOr<std::vector<uint8_t>> WriteAnsi378(const std::vector<Template>& views) {
  TESSERA_RETURN_IF_ERROR(ValidateRecordViews(views));
  const size_t body = internal::FingerViewsSize(views);
  const bool long_form = kShortHeader + body > 0xffff;
  const size_t total = (long_form ? kLongHeader : kShortHeader) + body;
  ByteWriter w;
  internal::WriteFmrMagic(w);
  if (long_form) {
    w.U16(0);
    w.U32(static_cast<uint32_t>(total));
  } else {
    w.U16(static_cast<uint32_t>(total));
  }
  w.U32(views[0].cbeff_product_id);
  internal::WriteFmrImageAndViews(views, kAnsiAngle, w);
  if (w.size() != total) return absl::InternalError("ANSI 378 writer: size bookkeeping mismatch");
  return w.Take();
}

}  // namespace fingerprint
}  // namespace tessera

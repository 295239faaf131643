#include "services/fingerprint/extract/transaction_templates.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status.h"
#include "services/fingerprint/formats/ansi_nist.h"
#include "services/fingerprint/formats/ansi_nist_xml.h"
#include "services/fingerprint/formats/ansi_nist_views.h"
#include "services/fingerprint/formats/template_io.h"
#include "services/fingerprint/store/template_metadata.h"

namespace tessera {
namespace fingerprint {
namespace {

using ansi_nist::Compression;
using ansi_nist::ImageView;
using ansi_nist::MinutiaeView;

// Finger positions showing one finger (ANSI/NIST-ITL 1-2011 table 8): 0
// unknown, 1-10 the fingers, 11-12 the plain thumbs. 13-15 are slaps of
// four fingers or both thumbs, 19 EJI/tip sets, 40-50 other multi-finger
// captures.
bool SingleFinger(int position) { return position >= 0 && position <= 12; }

// ANSI/NIST IMP codes 0-3 (live-scan/non-live-scan plain/rolled) are the
// ISO ones; latent codes (4-7) and others beyond the 4 bits ISO keeps are
// kept when they fit and reported as 0 otherwise.
int RecordImpressionType(int imp) { return imp >= 0 && imp <= 15 ? imp : 0; }

// ISO 19794-2 finger positions are 0-10: the plain thumbs of a card (FGP
// 11 right, 12 left) are thumbs 1 and 6 there.
int RecordFingerPosition(int fgp) {
  if (fgp == 11) return 1;
  if (fgp == 12) return 6;
  return fgp >= 0 && fgp <= 10 ? fgp : 0;
}

std::string RecordName(int type, int idc) { return absl::StrCat("Type-", type, " record (IDC ", idc, ")"); }

DecodeOptions DecodeFor(const ImageView& v, const ImageInput& input) {
  DecodeOptions d = input.decode;
  d.ppi = v.ppi > 0 ? v.ppi : input.decode.ppi;
  if (v.compression == Compression::kNone) {
    d.format = ImageFormat::kRaw;
    d.raw_width = v.width;
    d.raw_height = v.height;
  } else {
    d.format = ImageFormat::kUnknown;  // WSQ, JPEG, PNG: by content
  }
  return d;
}

// `f` (its record fields already set from `v`) extracted from the image.
void FromImage(const ImageView& v, const ImageInput& input, TransactionFinger& f) {
  f.source = "extracted";
  if (v.compression == Compression::kNone && v.bits_per_pixel != 8) {
    f.status = absl::InvalidArgumentError(
        absl::StrCat(RecordName(v.record_type, v.idc), ": ", v.bits_per_pixel, "-bit raw images are not taken"));
    return;
  }
  ImageInput in = input;
  in.decode = DecodeFor(v, input);
  in.finger_position = RecordFingerPosition(f.position);
  in.impression_type = RecordImpressionType(f.impression_type);
  absl::StatusOr<ImageTemplate> t = TemplateFromImage(v.data, in);
  if (!t.ok()) {
    f.status = Annotate(t.status(), RecordName(v.record_type, v.idc));
    return;
  }
  f.record = std::move(t->record);
  f.minutiae = static_cast<int>(t->extraction.view.minutiae.size());
  f.quality = t->quality.score;
}

void FromMarkup(const ansi_nist::Transaction& t, const MinutiaeView& m, TransactionFinger& f) {
  f.source = "markup";
  f.quality = -1;
  absl::StatusOr<Template> view = ansi_nist::MinutiaeTemplate(t, m);
  if (!view.ok()) {
    f.status = Annotate(view.status(), RecordName(9, m.idc));
    return;
  }
  view->finger_position = RecordFingerPosition(f.position);
  view->impression_type = RecordImpressionType(f.impression_type);
  if (view->minutiae.empty()) {
    f.status = absl::InvalidArgumentError(absl::StrCat(RecordName(9, m.idc), ": no minutiae"));
    return;
  }
  absl::StatusOr<std::vector<uint8_t>> record = WriteTemplateRecord(TemplateFormat::kIso19794, {*view});
  if (!record.ok()) {
    f.status = Annotate(record.status(), RecordName(9, m.idc));
    return;
  }
  f.status = absl::OkStatus();
  f.record = std::move(*record);
  f.minutiae = static_cast<int>(view->minutiae.size());
}

// The fingers of a parsed transaction (see TemplatesFromTransaction).
absl::StatusOr<std::vector<TransactionFinger>> FingersOf(const ansi_nist::Transaction* t, const ImageInput& input) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<ImageView> images, ansi_nist::Images(*t));
  TESSERA_ASSIGN_OR_RETURN(std::vector<MinutiaeView> markups, ansi_nist::Minutiae(*t));
  std::map<int, const MinutiaeView*> markup_of;  // by IDC
  for (const MinutiaeView& m : markups) {
    if (m.has_efs || (m.has_legacy && !m.legacy.empty())) markup_of.emplace(m.idc, &m);
  }
  std::vector<TransactionFinger> out;
  std::vector<const ImageView*> to_extract;
  std::vector<size_t> where;
  for (const ImageView& v : images) {
    if (v.record_type != 4 && v.record_type != 13 && v.record_type != 14) continue;
    TransactionFinger f;
    f.record_type = v.record_type;
    f.idc = v.idc;
    f.position = v.positions.empty() ? 0 : v.positions[0];
    f.impression_type = v.impression_type;
    if (v.positions.size() > 1 || !SingleFinger(f.position)) {
      f.source = "skipped";
      f.status = absl::UnimplementedError(absl::StrCat(
          RecordName(v.record_type, v.idc), ": finger position ", f.position,
          v.positions.size() > 1 ? " (several fingers)" : "", " is a multi-finger image: it needs segmentation"));
      out.push_back(std::move(f));
      continue;
    }
    auto m = markup_of.find(v.idc);
    if (m != markup_of.end()) {
      FromMarkup(*t, *m->second, f);
      markup_of.erase(m);
      out.push_back(std::move(f));
      continue;
    }
    where.push_back(out.size());
    to_extract.push_back(&v);
    out.push_back(std::move(f));
  }
  // Images take tens of milliseconds each: all cores.
  ParallelForDynamic(static_cast<int64_t>(to_extract.size()), 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) FromImage(*to_extract[i], input, out[where[i]]);
  });
  // Markup without an image of its IDC: a finger of its own.
  for (const auto& [idc, m] : markup_of) {
    TransactionFinger f;
    f.record_type = 9;
    f.idc = idc;
    f.impression_type = m->impression_type;
    FromMarkup(*t, *m, f);
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace

bool IsLatentSubmission(const std::vector<const TransactionFinger*>& searchable) {
  if (searchable.size() <= 1) return true;
  for (const TransactionFinger* f : searchable) {
    if (f->record_type == 13 || (f->impression_type >= 4 && f->impression_type <= 7)) return true;
  }
  return false;
}

bool LooksLikeTransaction(absl::string_view bytes) {
  return absl::StartsWith(bytes, "1.001:") || ansi_nist::LooksLikeXmlTransaction(bytes);
}

absl::StatusOr<std::vector<TransactionFinger>> TemplatesFromTransaction(absl::string_view bytes,
                                                                        const ImageInput& input) {
  TESSERA_ASSIGN_OR_RETURN(TransactionCard card, ReadTransactionCard(bytes, input));
  return std::move(card.fingers);
}

std::vector<std::string> FingerTemplateIds(absl::string_view prefix, const std::vector<TransactionFinger>& fingers) {
  std::map<int, int> per_position;
  for (const TransactionFinger& f : fingers) ++per_position[f.position];
  std::vector<std::string> ids;
  for (const TransactionFinger& f : fingers) {
    if (f.position <= 0) {
      ids.push_back(absl::StrCat(prefix, "_idc", f.idc));
    } else if (per_position[f.position] > 1) {
      ids.push_back(absl::StrCat(prefix, "_", f.position, "_idc", f.idc));
    } else {
      ids.push_back(absl::StrCat(prefix, "_", f.position));
    }
  }
  return ids;
}

absl::StatusOr<TransactionCard> ReadTransactionCard(absl::string_view bytes, const ImageInput& input) {
  absl::StatusOr<ansi_nist::Transaction> t = ansi_nist::ParseAnyTransaction(bytes);
  if (!t.ok()) return absl::InvalidArgumentError(t.status().message());
  TransactionCard card;
  const ansi_nist::Record& type1 = t->records[0];
  if (const ansi_nist::Field* f = type1.Find(9)) card.tcn = f->value();
  if (const ansi_nist::Field* f = type1.Find(4)) card.tot = f->value();
  if (const ansi_nist::Field* f = type1.Find(5)) {
    if (!NormalizeCaptureDate(f->value(), &card.date).ok()) card.date.clear();
  }
  TESSERA_ASSIGN_OR_RETURN(card.fingers, FingersOf(&*t, input));
  return card;
}


}  // namespace fingerprint
}  // namespace tessera

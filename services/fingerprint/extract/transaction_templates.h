// The fingers of an ANSI/NIST-ITL transaction (formats/ansi_nist.h) as
// minutiae templates: what enrolling a ten-print card or searching a latent
// submission starts from.
//
//   * Each single-finger image record (Type-4, Type-13 latent, Type-14) is
//     decoded and extracted (image_template.h) at the record's resolution.
//   * A Type-9 record with minutiae (an examiner's markup or a vendor's
//     template) takes the place of the extraction of the image with the same
//     IDC: the examiner's minutiae are what a latent search should use.
//     A Type-9 without an image of its IDC is a finger of its own.
//   * Multi-finger images (FGP 13-15, 19, 40-50, or several FGPs) are listed
//     with UNIMPLEMENTED: they need segmentation first. Palms (Type-15)
//     are not fingers and are left out.
//
// Every finger gets its own status, so one bad image does not lose a card.
#ifndef TESSERA_SERVICES_FINGERPRINT_EXTRACT_TRANSACTION_TEMPLATES_H_
#define TESSERA_SERVICES_FINGERPRINT_EXTRACT_TRANSACTION_TEMPLATES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/fingerprint/extract/image_template.h"

namespace tessera {
namespace fingerprint {

struct TransactionFinger {
  int record_type = 0;  // of the image (or of the Type-9 when it stands alone)
  int idc = 0;
  int position = 0;         // FGP: 0 unknown, 1-10 fingers, ...
  int impression_type = 0;  // IMP
  // "extracted" (from the image) or "markup" (the Type-9 minutiae).
  std::string source;
  absl::Status status;          // why this finger has no template
  std::vector<uint8_t> record;  // ISO 19794-2, one view, when status is OK
  int minutiae = 0;
  int quality = -1;  // the image's (extracted); -1 for markup
};

// INVALID_ARGUMENT when `bytes` are not a well-formed transaction (the
// reader's message); otherwise one entry per finger, in file order, each
// with its own status. `input` applies to every image (its ppi overrides
// the records' only where they give none).
absl::StatusOr<std::vector<TransactionFinger>> TemplatesFromTransaction(absl::string_view bytes,
                                                                        const ImageInput& input = {});

// A transaction's fingers with what its Type-1 record says of it: what
// enrolling a card or searching a submission needs.
struct TransactionCard {
  std::string tcn;   // transaction control number (1.009)
  std::string tot;   // type of transaction (1.004), e.g. "CAR", "LFS"
  std::string date;  // 1.005 as YYYY-MM-DD; "" when absent or not a date
  std::vector<TransactionFinger> fingers;
};

// TemplatesFromTransaction plus the Type-1 fields.
absl::StatusOr<TransactionCard> ReadTransactionCard(absl::string_view bytes, const ImageInput& input = {});

// The template ids of a card's fingers: <prefix>_<FGP>; <prefix>_idc<N> when
// the record does not say which finger; <prefix>_<FGP>_idc<N> when the
// transaction holds that finger twice (a latent and its exemplar).
std::vector<std::string> FingerTemplateIds(absl::string_view prefix, const std::vector<TransactionFinger>& fingers);

// How a transaction's searchable fingers are searched: each on its own (a
// latent submission: a Type-13 record or a latent impression type, IMP 4-7;
// or a single finger) or together as a card (ten-print, fused per subject).
bool IsLatentSubmission(const std::vector<const TransactionFinger*>& searchable);

// True when `bytes` start like an ANSI/NIST-ITL transaction: the traditional
// encoding ("1.001:") or the XML one (formats/ansi_nist_xml.h), which
// TemplatesFromTransaction and ReadTransactionCard read as well.
bool LooksLikeTransaction(absl::string_view bytes);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_EXTRACT_TRANSACTION_TEMPLATES_H_

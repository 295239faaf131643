// An ANSI/NIST-ITL card (transaction_templates.h) as enroll items: one per
// finger that has a template, each with the card's subject, its finger
// position and impression type, the transaction's TCN and date, and the
// caller's key/values. What EnrollTransaction and `tessera fp enroll` of a
// transaction file both enroll.
#ifndef TESSERA_SERVICES_FINGERPRINT_TRANSACTION_ENROLL_H_
#define TESSERA_SERVICES_FINGERPRINT_TRANSACTION_ENROLL_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "services/fingerprint/extract/transaction_templates.h"
#include "services/fingerprint/fingerprint_service.h"

namespace tessera {
namespace fingerprint {

struct TransactionEnrollment {
  std::string subject_id;
  std::vector<std::string> ids;          // per card finger (FingerTemplateIds)
  std::vector<EnrollItem> items;         // the fingers with a template, in card order
  std::vector<size_t> finger_of_item;    // index into the card's fingers
};

// `subject_id` empty: the card's TCN. `id_prefix` empty: the subject id.
// INVALID_ARGUMENT when neither a subject nor a TCN is known, or for
// metadata that does not validate (the subject id, an attribute).
absl::StatusOr<TransactionEnrollment> PlanTransactionEnroll(
    const TransactionCard& card, std::string subject_id, std::string id_prefix,
    std::vector<std::pair<std::string, std::string>> attributes = {});

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_TRANSACTION_ENROLL_H_

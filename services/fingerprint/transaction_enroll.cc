#include "services/fingerprint/transaction_enroll.h"

#include "common/status.h"

namespace tessera {
namespace fingerprint {

absl::StatusOr<TransactionEnrollment> PlanTransactionEnroll(
    const TransactionCard& card, std::string subject_id, std::string id_prefix,
    std::vector<std::pair<std::string, std::string>> attributes) {
  TransactionEnrollment out;
  out.subject_id = subject_id.empty() ? card.tcn : std::move(subject_id);
  if (out.subject_id.empty()) {
    return absl::InvalidArgumentError("the transaction has no TCN (field 1.009): give a subject id");
  }
  TemplateMetadata base;
  base.subject_id = out.subject_id;
  base.capture_date = card.date;
  base.source_tcn = card.tcn.substr(0, kMaxSourceTcnLength);
  base.attributes = std::move(attributes);
  TESSERA_RETURN_IF_ERROR(NormalizeAttributes(&base.attributes));
  TESSERA_RETURN_IF_ERROR(ValidateTemplateMetadata(base));
  out.ids = FingerTemplateIds(id_prefix.empty() ? out.subject_id : id_prefix, card.fingers);
  for (size_t i = 0; i < card.fingers.size(); ++i) {
    const TransactionFinger& f = card.fingers[i];
    if (!f.status.ok()) continue;
    EnrollItem item;
    item.id = out.ids[i];
    item.bytes.assign(f.record.begin(), f.record.end());
    item.format = TemplateFormat::kIso19794;
    item.metadata = base;
    item.metadata.finger_position = f.position;
    item.metadata.impression_type = f.impression_type;
    out.items.push_back(std::move(item));
    out.finger_of_item.push_back(i);
  }
  return out;
}

}  // namespace fingerprint
}  // namespace tessera

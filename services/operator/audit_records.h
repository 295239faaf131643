// OperatorService.ListAuditRecords' body (issue 35), plain C++: the newest
// records of an audit trail (`serve --audit-log FILE`: FILE, then the rotated
// FILE.1, FILE.2, ... as far as needed), newest first, filtered. Lines are
// parsed by audit_log.h's ParseAuditLine; the members it does not keep (peer,
// request_id, details) are read from the same line's JSON.
#ifndef TESSERA_SERVICES_OPERATOR_AUDIT_RECORDS_H_
#define TESSERA_SERVICES_OPERATOR_AUDIT_RECORDS_H_

#include <string>

#include "absl/status/statusor.h"
#include "tessera/v1/operator.pb.h"

namespace tessera::operator_api {

constexpr int kDefaultAuditLimit = 100;
constexpr int kMaxAuditLimit = 1000;

// FAILED_PRECONDITION when `audit_log` is empty (the server keeps none);
// INVALID_ARGUMENT for a limit outside 0..1000 (0: 100) or a negative
// before_seq. Lines that are not records are skipped.
absl::StatusOr<v1::ListAuditRecordsResponse> ListAuditRecords(const std::string& audit_log,
                                                              const v1::ListAuditRecordsRequest& request);

}  // namespace tessera::operator_api

#endif  // TESSERA_SERVICES_OPERATOR_AUDIT_RECORDS_H_

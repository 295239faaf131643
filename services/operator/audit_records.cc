#include "services/operator/audit_records.h"

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "services/server/audit_log.h"

namespace tessera::operator_api {
namespace {

// A member of the record's JSON as text ("" when absent or not a string).
std::string StringMember(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

absl::StatusOr<v1::ListAuditRecordsResponse> ListAuditRecords(const std::string& audit_log,
                                                              const v1::ListAuditRecordsRequest& request) {
  if (audit_log.empty()) {
    return absl::FailedPreconditionError("this server keeps no audit log (start it with --audit-log FILE)");
  }
  if (request.limit() < 0 || request.limit() > kMaxAuditLimit) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit ", request.limit(), " must be within 1..", kMaxAuditLimit, " (0: ", kDefaultAuditLimit, ")"));
  }
  if (request.before_seq() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("before_seq ", request.before_seq(), " must not be negative"));
  }
  const size_t limit = request.limit() == 0 ? kDefaultAuditLimit : request.limit();
  v1::ListAuditRecordsResponse response;
  const std::vector<std::string> files = AuditLogFiles(audit_log);  // oldest first
  for (auto file = files.rbegin(); file != files.rend() && response.records_size() < static_cast<int>(limit); ++file) {
    std::ifstream in(*file);
    if (!in) continue;  // rotated away meanwhile
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(std::move(line));
    for (auto line = lines.rbegin(); line != lines.rend() && response.records_size() < static_cast<int>(limit);
         ++line) {
      absl::StatusOr<AuditRecord> record = ParseAuditLine(*line);
      if (!record.ok()) continue;
      if (request.before_seq() > 0 && record->seq >= request.before_seq()) continue;
      if (!request.principal().empty() && record->principal != request.principal()) continue;
      if (!request.trace_id().empty() && record->trace_id != request.trace_id()) continue;
      const nlohmann::json j = nlohmann::json::parse(*line, nullptr, /*allow_exceptions=*/false);
      v1::AuditRecordInfo* out = response.add_records();
      out->set_seq(record->seq);
      out->set_time(record->time);
      out->set_principal(record->principal);
      out->set_method(record->method);
      out->set_gallery(record->gallery);
      out->set_outcome(record->outcome);
      out->set_trace_id(record->trace_id);
      out->set_hash(record->hash);
      if (j.is_object()) {
        out->set_peer(StringMember(j, "peer"));
        out->set_request_id(StringMember(j, "request_id"));
        auto details = j.find("details");
        if (details != j.end()) out->set_details_json(details->dump());
      }
    }
  }
  return response;
}

}  // namespace tessera::operator_api

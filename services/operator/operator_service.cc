#include "services/operator/operator_service.h"

#include "common/grpc_status.h"
#include "services/operator/audit_records.h"
#include "services/operator/server_stats.h"

namespace tessera {

grpc::Status OperatorServiceImpl::ListAuditRecords(grpc::ServerContext*, const v1::ListAuditRecordsRequest* request,
                                                   v1::ListAuditRecordsResponse* response) {
  absl::StatusOr<v1::ListAuditRecordsResponse> records = operator_api::ListAuditRecords(audit_log_, *request);
  if (!records.ok()) return ToGrpcStatus(records.status());
  *response = *std::move(records);
  return grpc::Status::OK;
}

grpc::Status OperatorServiceImpl::GetServerStats(grpc::ServerContext*, const v1::GetServerStatsRequest*,
                                                 v1::ServerStats* response) {
  *response = operator_api::CollectServerStats(*registry_);
  return grpc::Status::OK;
}

}  // namespace tessera

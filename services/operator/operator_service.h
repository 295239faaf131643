// tessera.v1.OperatorService (protos/tessera/v1/operator.proto, issue 35):
// what an operator's console needs beyond the job and service RPCs — the
// newest audit records (admins; audit_records.h) and the process's own
// "tessera_*" metric samples (readers; server_stats.h). It is not a job
// module: `tessera serve` hosts it in every role (cli/hosted_services.cc),
// as it hosts health and metrics, because every role has an audit log (when
// configured) and a metrics registry.
#ifndef TESSERA_SERVICES_OPERATOR_OPERATOR_SERVICE_H_
#define TESSERA_SERVICES_OPERATOR_OPERATOR_SERVICE_H_

#include <memory>
#include <string>

#include <prometheus/registry.h>

#include "tessera/v1/operator.grpc.pb.h"

namespace tessera {

class OperatorServiceImpl final : public v1::OperatorService::Service {
 public:
  // `audit_log`: the server's --audit-log ("" when it keeps none);
  // `registry`: the one /metrics serves (ProcessRegistry()).
  OperatorServiceImpl(std::string audit_log, std::shared_ptr<prometheus::Registry> registry)
      : audit_log_(std::move(audit_log)), registry_(std::move(registry)) {}

  grpc::Status ListAuditRecords(grpc::ServerContext* context, const v1::ListAuditRecordsRequest* request,
                                v1::ListAuditRecordsResponse* response) override;
  grpc::Status GetServerStats(grpc::ServerContext* context, const v1::GetServerStatsRequest* request,
                              v1::ServerStats* response) override;

 private:
  const std::string audit_log_;
  const std::shared_ptr<prometheus::Registry> registry_;
};

}  // namespace tessera

#endif  // TESSERA_SERVICES_OPERATOR_OPERATOR_SERVICE_H_

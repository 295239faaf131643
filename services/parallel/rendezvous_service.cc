#include "services/parallel/rendezvous_service.h"

#include <algorithm>

#include "absl/time/clock.h"
#include "common/grpc_status.h"

namespace tessera {

grpc::Status RendezvousServiceImpl::Join(grpc::ServerContext* context, const v1::JoinRendezvousRequest* request,
                                         v1::JoinRendezvousResponse* response) {
  const absl::Time now = absl::Now();
  absl::Time deadline = now + max_wait_;
  const auto call_deadline = context->deadline();
  if (call_deadline != std::chrono::system_clock::time_point::max()) {
    const absl::Time d = absl::FromChrono(call_deadline);
    // Answer before gRPC's own DEADLINE_EXCEEDED, which would carry no names.
    const absl::Duration margin = std::min(absl::Milliseconds(250), std::max(d - now, absl::ZeroDuration()) / 10);
    deadline = std::min(deadline, d - margin);
  }
  parallel::RendezvousJoin join;
  join.group_key = request->group_key();
  join.world_size = request->world_size();
  join.rank = request->rank();
  join.unique_id = request->unique_id();
  absl::StatusOr<std::string> id = table_.Join(join, deadline, [context] { return context->IsCancelled(); });
  if (!id.ok()) return ToGrpcStatus(id.status());
  response->set_unique_id(*id);
  response->set_world_size(request->world_size());
  return grpc::Status::OK;
}

}  // namespace tessera

#include "services/parallel/nccl_rendezvous.h"

#include <grpcpp/client_context.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/status.h"
#include "tessera/v1/rendezvous.grpc.pb.h"

namespace tessera::parallel {

absl::StatusOr<std::string> JoinRendezvous(const std::shared_ptr<grpc::Channel>& channel,
                                           const RendezvousRank& who, const std::string& unique_id) {
  if (channel == nullptr) return absl::InvalidArgumentError("rendezvous: no channel");
  auto stub = v1::RendezvousService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + who.timeout));
  // Ranks may start before the server: wait for it within the timeout.
  context.set_wait_for_ready(true);
  v1::JoinRendezvousRequest request;
  request.set_group_key(who.group_key);
  request.set_world_size(who.world_size);
  request.set_rank(who.rank);
  request.set_unique_id(unique_id);
  v1::JoinRendezvousResponse response;
  const grpc::Status status = stub->Join(&context, request, &response);
  if (!status.ok()) {
    const absl::Status s = FromGrpcStatus(status);
    return absl::Status(s.code(), absl::StrCat("rendezvous: ", s.message()));
  }
  if (response.unique_id().size() != kNcclUniqueIdBytes) {
    return absl::DataLossError(absl::StrCat("rendezvous: the server returned a ", response.unique_id().size(),
                                            "-byte id, expected ", kNcclUniqueIdBytes));
  }
  return response.unique_id();
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> CreateNcclCommunicatorByRendezvous(
    const std::shared_ptr<grpc::Channel>& channel, const RendezvousRank& who, int device_ordinal) {
  std::string posted;
  if (who.rank == 0) {
    TESSERA_ASSIGN_OR_RETURN(posted, NcclUniqueId());
  }
  TESSERA_ASSIGN_OR_RETURN(const std::string id, JoinRendezvous(channel, who, posted));
  return NcclCommunicator::Create(id, who.rank, who.world_size, device_ordinal);
}

}  // namespace tessera::parallel

// The client side of RendezvousService (rendezvous_service.h) and NCCL
// communicators made through it, so the ranks of one group can live in
// several processes or hosts (issue 13):
//
//   auto channel = grpc::CreateChannel("scheduler:50051", creds);
//   TESSERA_ASSIGN_OR_RETURN(auto comm, CreateNcclCommunicatorByRendezvous(
//       channel, {"job-42", rank, world_size}, /*device_ordinal=*/0));
//
// Rank 0 makes the NCCL unique id (NcclUniqueId) and posts it; every rank
// gets it back once all have joined, then calls NcclCommunicator::Create,
// which blocks until every rank has (ncclCommInitRank).
#ifndef TESSERA_SERVICES_PARALLEL_NCCL_RENDEZVOUS_H_
#define TESSERA_SERVICES_PARALLEL_NCCL_RENDEZVOUS_H_

#include <memory>
#include <string>

#include <grpcpp/channel.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kernels/parallel/nccl_communicator.h"

namespace tessera::parallel {

// Who joins which group, and how long it waits for the others.
struct RendezvousRank {
  std::string group_key;
  int rank = 0;
  int world_size = 1;
  absl::Duration timeout = absl::Minutes(5);
};

// Joins the group (rank 0 posts `unique_id`, other ranks pass "") and returns
// rank 0's id once every rank has joined. The service's statuses, prefixed
// with "rendezvous: "; UNAVAILABLE when the server cannot be reached within
// the timeout (the call waits for the channel to become ready).
absl::StatusOr<std::string> JoinRendezvous(const std::shared_ptr<grpc::Channel>& channel,
                                           const RendezvousRank& who, const std::string& unique_id);

// Rank 0 makes the id, every rank joins and creates its communicator on
// `device_ordinal`. FAILED_PRECONDITION without CUDA/NCCL (before joining,
// for rank 0: NcclUniqueId); the errors of JoinRendezvous and Create.
absl::StatusOr<std::unique_ptr<NcclCommunicator>> CreateNcclCommunicatorByRendezvous(
    const std::shared_ptr<grpc::Channel>& channel, const RendezvousRank& who, int device_ordinal);

}  // namespace tessera::parallel

#endif  // TESSERA_SERVICES_PARALLEL_NCCL_RENDEZVOUS_H_

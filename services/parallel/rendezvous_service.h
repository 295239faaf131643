// tessera.v1.RendezvousService: the thin gRPC adapter over a RendezvousTable
// (rendezvous_table.h). A rank waits at most until shortly before its call's
// deadline (a tenth of what is left, at most 250 ms, earlier) so that its
// DEADLINE_EXCEEDED carries the table's message naming the missing ranks
// rather than gRPC's bare one; a call without a deadline waits at most
// `max_wait`. The call's cancellation withdraws the rank.
//
// Hosted by `tessera serve` next to the scheduler (cli/scheduler_host.h:
// roles all and scheduler), which places the ranks; role enroller
// (its required_role option in rendezvous.proto), as submitting a registration.
#ifndef TESSERA_SERVICES_PARALLEL_RENDEZVOUS_SERVICE_H_
#define TESSERA_SERVICES_PARALLEL_RENDEZVOUS_SERVICE_H_

#include "absl/time/time.h"
#include "services/parallel/rendezvous_table.h"
#include "tessera/v1/rendezvous.grpc.pb.h"

namespace tessera {

class RendezvousServiceImpl final : public v1::RendezvousService::Service {
 public:
  explicit RendezvousServiceImpl(parallel::RendezvousTableOptions options = parallel::RendezvousTableOptions(),
                                 absl::Duration max_wait = absl::Minutes(10))
      : table_(options), max_wait_(max_wait) {}

  grpc::Status Join(grpc::ServerContext* context, const v1::JoinRendezvousRequest* request,
                    v1::JoinRendezvousResponse* response) override;

  parallel::RendezvousTable& table() { return table_; }

 private:
  parallel::RendezvousTable table_;
  const absl::Duration max_wait_;
};

}  // namespace tessera

#endif  // TESSERA_SERVICES_PARALLEL_RENDEZVOUS_SERVICE_H_

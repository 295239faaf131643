// The groups of ranks that meet to share one NCCL unique id (issue 13): the
// plain C++ state behind RendezvousService (rendezvous_service.h), no gRPC.
//
// Semantics (chosen so that a missing rank is reported by name before any
// rank enters ncclCommInitRank, which blocks silently until every rank has
// joined):
// - Join blocks until ALL world_size ranks of the group have joined, then
//   every rank gets rank 0's id. It is a barrier, not "return once rank 0
//   has posted": the id alone lets no rank do anything NCCL would not block.
// - A rank waiting past its deadline gets DEADLINE_EXCEEDED naming the ranks
//   still missing and is withdrawn (it may join again, as may a cancelled
//   one). Rank 0 withdrawing takes its id with it.
// - Errors: INVALID_ARGUMENT for a bad key (1..128 printable ASCII), world
//   size (1..max_world_size), rank outside [0, world_size), an id of the
//   wrong size (rank 0) or an id from another rank, and for a world size that
//   differs from the group's; ALREADY_EXISTS for a rank already in the group
//   (waiting, or in a completed group); RESOURCE_EXHAUSTED past max_groups
//   open groups; CANCELLED when `cancelled()` becomes true.
// - Expiry: a group is removed when its last waiting rank withdraws, and a
//   completed one `completed_ttl` after completion (kept that long so a late
//   duplicate is refused instead of starting a new group that would never
//   complete). Nothing else lives in the table, so nothing leaks: one key
//   per run (the scheduler uses the job id).
//
// Thread-safe; one table per hosting service (no process-global state).
#ifndef TESSERA_SERVICES_PARALLEL_RENDEZVOUS_TABLE_H_
#define TESSERA_SERVICES_PARALLEL_RENDEZVOUS_TABLE_H_

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tessera::parallel {

struct RendezvousTableOptions {
  absl::Duration completed_ttl = absl::Minutes(10);
  int max_groups = 1024;
  int max_world_size = 4096;
  // The id rank 0 must supply: NCCL's ncclUniqueId (NCCL_UNIQUE_ID_BYTES).
  size_t id_bytes = 128;
  // How often a waiting rank checks `cancelled`.
  absl::Duration cancel_poll = absl::Milliseconds(20);
};

struct RendezvousJoin {
  std::string group_key;
  int world_size = 0;
  int rank = -1;
  std::string unique_id;  // rank 0 only
};

class RendezvousTable {
 public:
  explicit RendezvousTable(RendezvousTableOptions options = RendezvousTableOptions());
  RendezvousTable(const RendezvousTable&) = delete;
  RendezvousTable& operator=(const RendezvousTable&) = delete;

  // Rank 0's id once every rank has joined; the errors above. `cancelled`
  // may be null.
  absl::StatusOr<std::string> Join(const RendezvousJoin& join, absl::Time deadline,
                                   const std::function<bool()>& cancelled = nullptr);

  // Groups in the table (after removing expired ones), for tests and metrics.
  size_t GroupCount();

  const RendezvousTableOptions& options() const { return options_; }

 private:
  struct Group {
    int world_size = 0;
    std::vector<bool> joined;
    int joined_count = 0;
    std::string unique_id;
    bool complete = false;
    absl::Time created;
    absl::Time completed_at;
  };

  absl::Status Validate(const RendezvousJoin& join) const;
  void RemoveExpiredLocked(absl::Time now);
  // "ranks 1, 3 of 4" (at most 16 listed).
  static std::string MissingRanks(const Group& group);

  const RendezvousTableOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<Group>> groups_;
};

}  // namespace tessera::parallel

#endif  // TESSERA_SERVICES_PARALLEL_RENDEZVOUS_TABLE_H_

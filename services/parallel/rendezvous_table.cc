#include "services/parallel/rendezvous_table.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace tessera::parallel {
namespace {

constexpr size_t kMaxKeyBytes = 128;
constexpr int kMaxListedRanks = 16;

bool PrintableAscii(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
}

}  // namespace

RendezvousTable::RendezvousTable(RendezvousTableOptions options) : options_(options) {}

absl::Status RendezvousTable::Validate(const RendezvousJoin& join) const {
  if (join.group_key.empty() || join.group_key.size() > kMaxKeyBytes || !PrintableAscii(join.group_key)) {
    return absl::InvalidArgumentError(absl::StrCat("group_key must be 1..", kMaxKeyBytes,
                                                   " printable ASCII characters, got ", join.group_key.size(),
                                                   " bytes", PrintableAscii(join.group_key) ? "" : " (not printable)"));
  }
  if (join.world_size < 1 || join.world_size > options_.max_world_size) {
    return absl::InvalidArgumentError(absl::StrCat("world_size ", join.world_size, " of group '", join.group_key,
                                                   "' must be in 1..", options_.max_world_size));
  }
  if (join.rank < 0 || join.rank >= join.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", join.rank, " is outside 0..", join.world_size - 1,
                                                   " (world_size ", join.world_size, ") of group '", join.group_key,
                                                   "'"));
  }
  if (join.rank == 0 && join.unique_id.size() != options_.id_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("rank 0 of group '", join.group_key, "' must supply the ",
                                                   options_.id_bytes, "-byte NCCL unique id, got ",
                                                   join.unique_id.size(), " bytes"));
  }
  if (join.rank != 0 && !join.unique_id.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("only rank 0 supplies the unique id; rank ", join.rank,
                                                   " of group '", join.group_key, "' sent ", join.unique_id.size(),
                                                   " bytes"));
  }
  return absl::OkStatus();
}

void RendezvousTable::RemoveExpiredLocked(absl::Time now) {
  for (auto it = groups_.begin(); it != groups_.end();) {
    const Group& g = *it->second;
    if (g.complete && now - g.completed_at >= options_.completed_ttl) {
      it = groups_.erase(it);
    } else {
      ++it;
    }
  }
}

std::string RendezvousTable::MissingRanks(const Group& group) {
  std::string out;
  int listed = 0, missing = 0;
  for (int r = 0; r < group.world_size; ++r) {
    if (group.joined[r]) continue;
    ++missing;
    if (listed < kMaxListedRanks) {
      absl::StrAppend(&out, listed == 0 ? "" : ", ", r);
      ++listed;
    }
  }
  if (missing > listed) absl::StrAppend(&out, " and ", missing - listed, " more");
  return absl::StrCat(missing == 1 ? "rank " : "ranks ", out, " of ", group.world_size);
}

absl::StatusOr<std::string> RendezvousTable::Join(const RendezvousJoin& join, absl::Time deadline,
                                                  const std::function<bool()>& cancelled) {
  if (absl::Status valid = Validate(join); !valid.ok()) return valid;
  const absl::Time start = absl::Now();
  std::unique_lock<std::mutex> lock(mu_);
  RemoveExpiredLocked(start);
  std::shared_ptr<Group>& slot = groups_[join.group_key];
  if (slot == nullptr) {
    if (static_cast<int>(groups_.size()) > options_.max_groups) {
      groups_.erase(join.group_key);
      return absl::ResourceExhaustedError(absl::StrCat("the rendezvous holds ", options_.max_groups,
                                                       " open groups already; group '", join.group_key,
                                                       "' refused (retry after some complete or expire)"));
    }
    slot = std::make_shared<Group>();
    slot->world_size = join.world_size;
    slot->joined.assign(join.world_size, false);
    slot->created = start;
  }
  const std::shared_ptr<Group> group = slot;  // ours even if the map entry goes
  if (group->world_size != join.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("group '", join.group_key, "' has world_size ", group->world_size,
                                                   ", rank ", join.rank, " says ", join.world_size));
  }
  if (group->joined[join.rank]) {
    return absl::AlreadyExistsError(absl::StrCat(
        "rank ", join.rank, " has already joined group '", join.group_key, "'",
        group->complete ? " (the group is complete: a new run needs a new group key)" : " and is waiting"));
  }
  group->joined[join.rank] = true;
  ++group->joined_count;
  if (join.rank == 0) group->unique_id = join.unique_id;
  if (group->joined_count == group->world_size) {
    group->complete = true;
    group->completed_at = absl::Now();
    cv_.notify_all();
    return group->unique_id;
  }
  while (!group->complete) {
    const absl::Time now = absl::Now();
    absl::Status stop;
    if (cancelled && cancelled()) {
      stop = absl::CancelledError(absl::StrCat("rank ", join.rank, " of group '", join.group_key,
                                               "' was cancelled while waiting for ", MissingRanks(*group)));
    } else if (now >= deadline) {
      stop = absl::DeadlineExceededError(absl::StrCat(
          "group '", join.group_key, "': rank ", join.rank, " waited ",
          absl::FormatDuration(absl::Trunc(now - start, absl::Milliseconds(1))), "; still missing ",
          MissingRanks(*group)));
    }
    if (!stop.ok()) {
      // Withdraw, so this rank may join again; an emptied group goes.
      group->joined[join.rank] = false;
      --group->joined_count;
      if (join.rank == 0) group->unique_id.clear();
      if (group->joined_count == 0) {
        auto it = groups_.find(join.group_key);
        if (it != groups_.end() && it->second == group) groups_.erase(it);
      }
      return stop;
    }
    const absl::Time wake = cancelled ? std::min(deadline, now + options_.cancel_poll) : deadline;
    if (wake == absl::InfiniteFuture()) {
      cv_.wait(lock);
    } else {
      cv_.wait_for(lock, absl::ToChronoNanoseconds(std::max(wake - now, absl::ZeroDuration())));
    }
  }
  return group->unique_id;
}

size_t RendezvousTable::GroupCount() {
  std::lock_guard<std::mutex> lock(mu_);
  RemoveExpiredLocked(absl::Now());
  return groups_.size();
}

}  // namespace tessera::parallel

#include "kernels/parallel/in_process_communicator.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/memory_kind_for.h"
#include "common/status.h"

namespace tessera {
namespace parallel {
InProcessGroup::InProcessGroup(int size, absl::Duration timeout)
    : size_(std::max(size, 1)), timeout_(timeout), published_(size_), mail_(size_ * size_) {}

void InProcessGroup::Abort(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_.ok()) aborted_ = status.ok() ? absl::AbortedError("in-process group aborted") : status;
  cv_.notify_all();
}

absl::Status InProcessGroup::abort_status() {
  std::lock_guard<std::mutex> lock(mu_);
  return aborted_;
}

absl::Status InProcessGroup::WaitLocked(std::unique_lock<std::mutex>& lock, const std::function<bool()>& ready,
                                        const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout_);
  while (!ready()) {
    if (!aborted_.ok()) return aborted_;
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && !ready()) {
      if (aborted_.ok()) {
        aborted_ = absl::DeadlineExceededError(
            absl::StrCat("in-process ", what, ": peers did not arrive within ", absl::FormatDuration(timeout_)));
      }
      cv_.notify_all();
      return aborted_;
    }
  }
  return absl::OkStatus();
}

absl::Status InProcessGroup::BarrierLocked(std::unique_lock<std::mutex>& lock, const char* what) {
  if (!aborted_.ok()) return aborted_;
  const int64_t generation = generation_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return absl::OkStatus();
  }
  return WaitLocked(lock, [&] { return generation_ != generation; }, what);
}

InProcessCommunicator::InProcessCommunicator(std::shared_ptr<InProcessGroup> group, int rank)
    : group_(std::move(group)), rank_(rank) {}

std::string InProcessCommunicator::Describe() const {
  return absl::StrCat("in-process rank ", rank_, "/", size());
}

absl::Status InProcessCommunicator::CheckPeer(int peer, const char* which) const {
  if (peer == kNoPeer || (peer >= 0 && peer < size())) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(which, " rank ", peer, " is outside the group of ", size(), " (use kNoPeer for none)"));
}

template <typename T>
absl::Status InProcessCommunicator::AllReduceImpl(T* data, size_t count, ReduceOp op, const Stream& stream) {
  if (count > 0 && data == nullptr) return absl::InvalidArgumentError("AllReduce: data is null");
  const MemoryKind kind = MemoryKindFor(stream);
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  std::vector<T> mine(count);
  if (count > 0) TESSERA_RETURN_IF_ERROR(CopyBytes(mine.data(), MemoryKind::kHost, data, kind, count * sizeof(T), stream));
  std::vector<T> result(count);
  {
    InProcessGroup& g = *group_;
    std::unique_lock<std::mutex> lock(g.mu_);
    g.published_[rank_].assign(mine.begin(), mine.end());
    TESSERA_RETURN_IF_ERROR(g.BarrierLocked(lock, "AllReduce"));
    for (int r = 0; r < g.size_; ++r) {
      if (g.published_[r].size() != count) {
        const absl::Status s = absl::InvalidArgumentError(absl::StrCat(
            "AllReduce: rank ", r, " reduces ", g.published_[r].size(), " values, rank ", rank_, " ", count));
        lock.unlock();
        g.Abort(s);
        return s;
      }
    }
    // Rank order, in double: the same bits on every rank, whatever the timing.
    for (size_t i = 0; i < count; ++i) {
      double acc = g.published_[0][i];
      for (int r = 1; r < g.size_; ++r) acc = CombineReduced(acc, g.published_[r][i], op);
      result[i] = static_cast<T>(acc);
    }
    // Nobody may publish the next call's values before everyone has read these.
    TESSERA_RETURN_IF_ERROR(g.BarrierLocked(lock, "AllReduce"));
  }
  if (count > 0) {
    TESSERA_RETURN_IF_ERROR(CopyBytes(data, kind, result.data(), MemoryKind::kHost, count * sizeof(T), stream));
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  }
  return absl::OkStatus();
}

absl::Status InProcessCommunicator::AllReduce(float* data, size_t count, ReduceOp op, const Stream& stream) {
  return AllReduceImpl(data, count, op, stream);
}

absl::Status InProcessCommunicator::AllReduce(double* data, size_t count, ReduceOp op, const Stream& stream) {
  return AllReduceImpl(data, count, op, stream);
}

absl::Status InProcessCommunicator::SendRecv(const void* send, size_t send_bytes, int dst, void* recv,
                                             size_t recv_bytes, int src, const Stream& stream) {
  TESSERA_RETURN_IF_ERROR(CheckPeer(dst, "SendRecv: destination"));
  TESSERA_RETURN_IF_ERROR(CheckPeer(src, "SendRecv: source"));
  if (dst != kNoPeer && send_bytes > 0 && send == nullptr) return absl::InvalidArgumentError("SendRecv: send is null");
  if (src != kNoPeer && recv_bytes > 0 && recv == nullptr) return absl::InvalidArgumentError("SendRecv: recv is null");
  const MemoryKind kind = MemoryKindFor(stream);
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  InProcessGroup& g = *group_;
  std::unique_lock<std::mutex> lock(g.mu_);
  if (!g.aborted_.ok()) return g.aborted_;
  InProcessGroup::Mail* out = dst != kNoPeer ? &g.mail_[rank_ * g.size_ + dst] : nullptr;
  if (out != nullptr) {
    // The previous message on this pair was acknowledged before its sender returned.
    out->data = send;
    out->bytes = send_bytes;
    out->kind = kind;
    out->posted = true;
    out->taken = false;
    g.cv_.notify_all();
  }
  if (src != kNoPeer) {
    InProcessGroup::Mail& in = g.mail_[src * g.size_ + rank_];
    TESSERA_RETURN_IF_ERROR(g.WaitLocked(lock, [&] { return in.posted && !in.taken; }, "SendRecv"));
    if (in.bytes != recv_bytes) {
      const absl::Status s = absl::InvalidArgumentError(absl::StrCat("SendRecv: rank ", src, " sends ", in.bytes,
                                                                     " bytes, rank ", rank_, " expects ", recv_bytes));
      lock.unlock();
      g.Abort(s);
      return s;
    }
    const void* from = in.data;
    const MemoryKind from_kind = in.kind;
    lock.unlock();  // the sender keeps its buffer until we acknowledge
    absl::Status copied = recv_bytes > 0 ? CopyBytes(recv, kind, from, from_kind, recv_bytes, stream) : absl::OkStatus();
    if (copied.ok()) copied = stream.Synchronize();
    if (!copied.ok()) {
      g.Abort(copied);
      return copied;
    }
    lock.lock();
    in.taken = true;
    g.cv_.notify_all();
  }
  if (out != nullptr) {
    TESSERA_RETURN_IF_ERROR(g.WaitLocked(lock, [&] { return out->taken; }, "SendRecv"));
    out->posted = false;
    out->taken = false;
  }
  return absl::OkStatus();
}

absl::Status InProcessCommunicator::Barrier(const Stream& stream) {
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  std::unique_lock<std::mutex> lock(group_->mu_);
  return group_->BarrierLocked(lock, "Barrier");
}

absl::Status RunInProcessRanks(int ranks, const std::function<absl::Status(Communicator& comm)>& fn) {
  if (ranks < 1) return absl::InvalidArgumentError(absl::StrCat("ranks must be >= 1, got ", ranks));
  auto group = std::make_shared<InProcessGroup>(ranks);
  std::vector<std::thread> threads;
  threads.reserve(ranks);
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&group, &fn, r] {
      InProcessCommunicator comm(group, r);
      const absl::Status s = fn(comm);
      if (!s.ok()) group->Abort(absl::Status(s.code(), absl::StrCat("rank ", r, ": ", s.message())));
    });
  }
  for (std::thread& t : threads) t.join();
  return group->abort_status();
}

}  // namespace parallel
}  // namespace tessera

// H ranks as threads of one process: CPU ranks on host memory, or several
// shards of one problem on the device memory of one GPU (each rank with its
// own stream). Proves the sharding logic without several GPUs.
//
//   auto group = std::make_shared<InProcessGroup>(4);   // once, shared
//   // on the thread of rank r:
//   InProcessCommunicator comm(group, r);
//
// or RunInProcessRanks(4, [&](Communicator& comm) { ... }), which starts the
// threads and collects their statuses.
//
// Semantics (communicator.h) with these choices:
// - AllReduce: every rank publishes its buffer, each rank reduces all of them
//   in rank order 0, 1, ..., H-1 (in double for float data), then all ranks
//   write their results: deterministic, bit-identical on every rank. Device
//   buffers are staged through host memory (meant for losses, histograms and
//   counts, not for large arrays).
// - SendRecv: the sender publishes (pointer, size) in the (src, dst) mailbox,
//   the receiver copies it with its own stream and acknowledges; the sender
//   returns after the acknowledgement, so its buffer is free again.
// - Before publishing, a rank synchronises its stream, so the data is final.
// - A failure of one rank (Abort, or a wait longer than the group's timeout)
//   makes every waiting and later call of the group return that error
//   instead of hanging.
#ifndef TESSERA_KERNELS_PARALLEL_IN_PROCESS_COMMUNICATOR_H_
#define TESSERA_KERNELS_PARALLEL_IN_PROCESS_COMMUNICATOR_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/buffer.h"
#include "kernels/parallel/communicator.h"

namespace tessera {
namespace parallel {

// The rendezvous shared by the ranks of one group. Thread-safe; create it
// once and hand it to each rank (no process-global state).
class InProcessGroup {
 public:
  // size >= 1. A rank waiting longer than `timeout` for its peers aborts the
  // group with DEADLINE_EXCEEDED (a bug or a dead rank, never a valid state).
  explicit InProcessGroup(int size, absl::Duration timeout = absl::Seconds(120));
  InProcessGroup(const InProcessGroup&) = delete;
  InProcessGroup& operator=(const InProcessGroup&) = delete;

  int size() const { return size_; }
  // Makes every pending and later call of every rank return `status`
  // (the first abort wins).
  void Abort(const absl::Status& status);
  // OK, or the status of the first Abort.
  absl::Status abort_status();

 private:
  friend class InProcessCommunicator;

  struct Mail {
    const void* data = nullptr;
    size_t bytes = 0;
    MemoryKind kind = MemoryKind::kHost;
    bool posted = false;
    bool taken = false;
  };

  // Waits (with mu_ held in `lock`) until `ready()` or an abort/timeout.
  absl::Status WaitLocked(std::unique_lock<std::mutex>& lock, const std::function<bool()>& ready, const char* what);
  absl::Status BarrierLocked(std::unique_lock<std::mutex>& lock, const char* what);

  const int size_;
  const absl::Duration timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  absl::Status aborted_;  // OK while healthy
  int arrived_ = 0;       // barrier
  int64_t generation_ = 0;
  std::vector<std::vector<double>> published_;  // AllReduce: each rank's values, as double
  std::vector<Mail> mail_;                      // [src * size + dst]
};

class InProcessCommunicator : public Communicator {
 public:
  // rank in [0, group->size()).
  InProcessCommunicator(std::shared_ptr<InProcessGroup> group, int rank);

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  absl::Status AllReduce(float* data, size_t count, ReduceOp op, const Stream& stream) override;
  absl::Status AllReduce(double* data, size_t count, ReduceOp op, const Stream& stream) override;
  absl::Status SendRecv(const void* send, size_t send_bytes, int dst, void* recv, size_t recv_bytes, int src,
                        const Stream& stream) override;
  absl::Status Barrier(const Stream& stream) override;
  std::string Describe() const override;

 private:
  template <typename T>
  absl::Status AllReduceImpl(T* data, size_t count, ReduceOp op, const Stream& stream);
  absl::Status CheckPeer(int peer, const char* which) const;

  std::shared_ptr<InProcessGroup> group_;
  int rank_;
};

// Runs fn on `ranks` threads, each with its own InProcessCommunicator of one
// new group; returns the first failing rank's status (naming the rank), else
// OK. A failing rank aborts the group, so the others return instead of
// waiting for it.
absl::Status RunInProcessRanks(int ranks, const std::function<absl::Status(Communicator& comm)>& fn);

}  // namespace parallel
}  // namespace tessera

#endif  // TESSERA_KERNELS_PARALLEL_IN_PROCESS_COMMUNICATOR_H_

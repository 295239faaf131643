// One rank per GPU through NCCL (NVLink / NVSwitch / InfiniBand, whatever
// NCCL finds), for the ranks of one registration placed on one or several
// hosts.
//
// Set-up: one rank calls NcclUniqueId() and hands the bytes to every rank
// (they are plain bytes, so they can travel in a gRPC message from the
// scheduler to workers on other hosts); each rank then calls
// NcclCommunicator::Create with the same id, its rank, the group size and its
// GPU. Create blocks until all ranks have joined (ncclCommInitRank), so ranks
// in one process must call it from different threads.
//
// All calls take a CUDA stream on the communicator's GPU and are enqueued on
// it (asynchronous, as NCCL is); a CPU stream is INVALID_ARGUMENT. Barrier
// synchronises the stream. SendRecv is one ncclGroupStart/End with a send and
// a receive, so ring shifts cannot deadlock. Reductions follow NCCL's own
// order (deterministic for a fixed topology and size, not across sizes).
//
// Without CUDA (or without NCCL at build time) every entry point returns
// FAILED_PRECONDITION.
#ifndef TESSERA_KERNELS_PARALLEL_NCCL_COMMUNICATOR_H_
#define TESSERA_KERNELS_PARALLEL_NCCL_COMMUNICATOR_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/buffer.h"
#include "kernels/parallel/communicator.h"

namespace tessera {
namespace parallel {

// NCCL's ncclUniqueId size (NCCL_UNIQUE_ID_BYTES).
inline constexpr size_t kNcclUniqueIdBytes = 128;

// A new NCCL unique id as kNcclUniqueIdBytes bytes (made by one rank).
absl::StatusOr<std::string> NcclUniqueId();

class NcclCommunicator : public Communicator {
 public:
  // INVALID_ARGUMENT for an id of the wrong size, rank outside [0, size) or a
  // negative device; NCCL errors as INTERNAL naming the call.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(absl::string_view unique_id, int rank, int size,
                                                                  int device_ordinal);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int device_ordinal() const { return device_; }
  absl::Status AllReduce(float* data, size_t count, ReduceOp op, const Stream& stream) override;
  absl::Status AllReduce(double* data, size_t count, ReduceOp op, const Stream& stream) override;
  absl::Status SendRecv(const void* send, size_t send_bytes, int dst, void* recv, size_t recv_bytes, int src,
                        const Stream& stream) override;
  absl::Status Barrier(const Stream& stream) override;
  std::string Describe() const override;

 private:
  NcclCommunicator(void* comm, int rank, int size, int device) : comm_(comm), rank_(rank), size_(size), device_(device) {}
  absl::Status CheckStream(const Stream& stream) const;
  absl::Status AllReduceTyped(void* data, size_t count, int nccl_type, ReduceOp op, const Stream& stream);

  void* comm_;  // ncclComm_t, as void* so this header needs no NCCL include
  int rank_;
  int size_;
  int device_;
  std::shared_ptr<Buffer> barrier_word_;  // one device float for Barrier
};

}  // namespace parallel
}  // namespace tessera

#endif  // TESSERA_KERNELS_PARALLEL_NCCL_COMMUNICATOR_H_

// A group of ranks that exchange data: the one interface grid-parallel
// registration (slab halos, the ring sampler, distributed losses) talks to.
//
// Two implementations:
// - InProcessCommunicator (in_process_communicator.h): H ranks as threads of
//   one process, on host memory (CPU ranks) or on the device memory of one
//   GPU (several shards time-sharing it). Reductions sum in rank order, so
//   results are deterministic and independent of thread timing.
// - NcclCommunicator (nccl_communicator.h): one rank per GPU through NCCL.
//
// Memory: every pointer lives in the memory of `stream`'s backend (host
// memory for a CPU stream, device memory of the stream's GPU for a CUDA
// stream), as for the registration kernels (kernels/registration/types.h).
//
// Ordering: every rank of a group must issue the same collective calls
// (AllReduce, Barrier) in the same order; SendRecv pairs a rank's send to
// `dst` with that rank's receive from this rank, in call order per pair.
// When a call returns, `data`/`recv` hold the result as far as later work on
// `stream` is concerned (in-process: already complete; NCCL: enqueued on the
// stream) and the send buffer may be reused by later work on `stream`.
#ifndef TESSERA_KERNELS_PARALLEL_COMMUNICATOR_H_
#define TESSERA_KERNELS_PARALLEL_COMMUNICATOR_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/buffer.h"
#include "common/device.h"

namespace tessera {
namespace parallel {

enum class ReduceOp { kSum, kMin, kMax };

// No peer on that side (the first and last rank of a non-periodic chain).
inline constexpr int kNoPeer = -1;

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In place: data[i] = op over ranks of data[i], on every rank.
  virtual absl::Status AllReduce(float* data, size_t count, ReduceOp op, const Stream& stream) = 0;
  virtual absl::Status AllReduce(double* data, size_t count, ReduceOp op, const Stream& stream) = 0;

  // Sends `send_bytes` from `send` to rank `dst` and receives `recv_bytes`
  // into `recv` from rank `src`, at once (so a ring shift cannot deadlock).
  // dst or src may be kNoPeer (nothing sent / received). The receiver's
  // recv_bytes must equal the sender's send_bytes (INVALID_ARGUMENT naming
  // both otherwise, in-process). send and recv must not overlap.
  virtual absl::Status SendRecv(const void* send, size_t send_bytes, int dst, void* recv, size_t recv_bytes, int src,
                                const Stream& stream) = 0;

  // Returns once every rank has entered the barrier (and, for NCCL, the
  // stream has finished the work before it).
  virtual absl::Status Barrier(const Stream& stream) = 0;

  // "in-process rank 2/4 (cpu)", "nccl rank 0/8 (GPU 0)".
  virtual std::string Describe() const = 0;

  int next() const { return (rank() + 1) % size(); }             // ring neighbours
  int previous() const { return (rank() + size() - 1) % size(); }
};

// Sums `data` over ranks (the common case).
inline absl::Status AllReduceSum(Communicator& comm, double* data, size_t count, const Stream& stream) {
  return comm.AllReduce(data, count, ReduceOp::kSum, stream);
}
inline absl::Status AllReduceSum(Communicator& comm, float* data, size_t count, const Stream& stream) {
  return comm.AllReduce(data, count, ReduceOp::kSum, stream);
}

// Sum, min and max of one host scalar over ranks: a convenience for
// host-side bookkeeping (losses, counts) on any stream's communicator. For a
// CUDA stream the value travels through a small device buffer.
absl::StatusOr<double> AllReduceHostScalar(Communicator& comm, double value, ReduceOp op, const Stream& stream);
// The same for `count` host doubles in place.
absl::Status AllReduceHostVector(Communicator& comm, double* values, size_t count, ReduceOp op, const Stream& stream);

// One step of a reduction, as the host-side communicators fold values.
double CombineReduced(double a, double b, ReduceOp op);

}  // namespace parallel
}  // namespace tessera

#endif  // TESSERA_KERNELS_PARALLEL_COMMUNICATOR_H_

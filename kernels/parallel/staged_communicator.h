// The communicator of one shard when H shards take turns on ONE device
// (kernels/registration/pipeline/out_of_core_stage.h): the shards of a phase run one
// after another on one thread, so no peer is ever waiting on the other side.
//
// - SendRecv copies nothing: the caller filled every halo the phase reads
//   from host storage before the phase (the neighbours' own slices as of the
//   previous phase: what HaloExchange would have delivered).
// - AllReduce: call i of a shard either contributes (the group folds the
//   shard's values into its running result, shards in rank order 0..H-1, in
//   double: the InProcessCommunicator's arithmetic, so the reduced values
//   are bit-identical) and leaves `data` as is, or, when the caller has
//   Published a result for call i, overwrites `data` with it (a value the
//   phase needs, e.g. MI's joint histogram before the gradient).
// - Barrier returns at once.
//
//   StagedGroup group(H);
//   for (int r = 0; r < H; ++r) { StagedCommunicator c(&group, r); RunPhase(c, shard r); }
//   double loss_sum = group.reduced(0)[0];   // call 0's result over the shards
#ifndef TESSERA_KERNELS_PARALLEL_STAGED_COMMUNICATOR_H_
#define TESSERA_KERNELS_PARALLEL_STAGED_COMMUNICATOR_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/parallel/communicator.h"

namespace tessera {
namespace parallel {

// The reductions of one phase over the shards. Not thread-safe (one thread
// runs the shards in turn).
class StagedGroup {
 public:
  explicit StagedGroup(int size) : size_(size) {}
  int size() const { return size_; }

  // Result of contributing call `call` over the shards so far (empty if none).
  std::vector<double> reduced(size_t call) const;
  // From now on, call `call` of every shard receives `values` instead of contributing.
  void Publish(size_t call, std::vector<double> values);

 private:
  friend class StagedCommunicator;
  absl::Status Contribute(size_t call, int rank, ReduceOp op, const std::vector<double>& values);

  int size_;
  std::vector<std::vector<double>> reduced_;   // by call index
  std::vector<ReduceOp> ops_;
  std::vector<int> last_rank_;                  // shards must come in rank order
  std::vector<std::vector<double>> published_;  // by call index; empty = contribute
};

class StagedCommunicator : public Communicator {
 public:
  StagedCommunicator(StagedGroup* group, int rank) : group_(group), rank_(rank) {}

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

  StagedGroup* group_;
  int rank_;
  size_t calls_ = 0;  // AllReduce calls made by this shard in this phase
};

}  // namespace parallel
}  // namespace tessera

#endif  // TESSERA_KERNELS_PARALLEL_STAGED_COMMUNICATOR_H_

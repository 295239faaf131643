// A Communicator that forwards to another and counts what this rank sends:
// the measured side of the multi-GPU model (multi_gpu_model.h), whose
// formulas a test checks against these counts on a real sharded iteration.
#ifndef TESSERA_KERNELS_REGISTRATION_SHARDED_COUNTING_COMMUNICATOR_H_
#define TESSERA_KERNELS_REGISTRATION_SHARDED_COUNTING_COMMUNICATOR_H_

#include <cstdint>
#include <string>

#include "kernels/parallel/communicator.h"

namespace tessera {
namespace parallel {

struct TrafficCounts {
  int64_t sendrecv_calls = 0;
  int64_t bytes_sent = 0;        // SendRecv payloads sent by this rank
  int64_t allreduce_calls = 0;
  int64_t allreduce_bytes = 0;   // this rank's contribution (count * element size)
};

class CountingCommunicator : public Communicator {
 public:
  explicit CountingCommunicator(Communicator& inner) : inner_(inner) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  absl::Status AllReduce(float* data, size_t count, ReduceOp op, const Stream& stream) override {
    ++counts_.allreduce_calls;
    counts_.allreduce_bytes += static_cast<int64_t>(count * sizeof(float));
    return inner_.AllReduce(data, count, op, stream);
  }
  absl::Status AllReduce(double* data, size_t count, ReduceOp op, const Stream& stream) override {
    ++counts_.allreduce_calls;
    counts_.allreduce_bytes += static_cast<int64_t>(count * sizeof(double));
    return inner_.AllReduce(data, count, op, stream);
  }
  absl::Status SendRecv(const void* send, size_t send_bytes, int dst, void* recv, size_t recv_bytes, int src,
                        const Stream& stream) override {
    ++counts_.sendrecv_calls;
    if (dst != kNoPeer) counts_.bytes_sent += static_cast<int64_t>(send_bytes);
    return inner_.SendRecv(send, send_bytes, dst, recv, recv_bytes, src, stream);
  }
  absl::Status Barrier(const Stream& stream) override { return inner_.Barrier(stream); }
  std::string Describe() const override { return "counting " + inner_.Describe(); }

  const TrafficCounts& counts() const { return counts_; }
  void Reset() { counts_ = TrafficCounts(); }

 private:
  Communicator& inner_;
  TrafficCounts counts_;
};

}  // namespace parallel
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_SHARDED_COUNTING_COMMUNICATOR_H_

#include "kernels/parallel/communicator.h"

#include <algorithm>

#include "common/buffer.h"
#include "common/status.h"

namespace tessera {
namespace parallel {

double CombineReduced(double a, double b, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return a + b;
    case ReduceOp::kMin:
      return std::min(a, b);
    case ReduceOp::kMax:
      return std::max(a, b);
  }
  return a;
}

absl::StatusOr<double> AllReduceHostScalar(Communicator& comm, double value, ReduceOp op, const Stream& stream) {
  TESSERA_RETURN_IF_ERROR(AllReduceHostVector(comm, &value, 1, op, stream));
  return value;
}

absl::Status AllReduceHostVector(Communicator& comm, double* values, size_t count, ReduceOp op, const Stream& stream) {
  if (stream.backend() == Backend::kCpu) return comm.AllReduce(values, count, op, stream);
  const size_t bytes = count * sizeof(double);
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> device,
                           Buffer::Allocate(MemoryKind::kDevice, std::max<size_t>(bytes, sizeof(double)), stream.ordinal()));
  double* d = static_cast<double*>(device->data());
  TESSERA_RETURN_IF_ERROR(CopyBytes(d, MemoryKind::kDevice, values, MemoryKind::kHost, bytes, stream));
  TESSERA_RETURN_IF_ERROR(comm.AllReduce(d, count, op, stream));
  TESSERA_RETURN_IF_ERROR(CopyBytes(values, MemoryKind::kHost, d, MemoryKind::kDevice, bytes, stream));
  return stream.Synchronize();
}

}  // namespace parallel
}  // namespace tessera

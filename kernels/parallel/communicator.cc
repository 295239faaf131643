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

MemoryKind BufferKindFor(const Stream& stream) {
  return stream.backend() == Backend::kCuda ? MemoryKind::kDevice : MemoryKind::kHost;
}

absl::StatusOr<double> AllReduceHostScalar(Communicator& comm, double value, ReduceOp op, const Stream& stream) {
  if (stream.backend() == Backend::kCpu) {
    TESSERA_RETURN_IF_ERROR(comm.AllReduce(&value, 1, op, stream));
    return value;
  }
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> device,
                           Buffer::Allocate(MemoryKind::kDevice, sizeof(double), stream.ordinal()));
  double* d = static_cast<double*>(device->data());
  TESSERA_RETURN_IF_ERROR(CopyBytes(d, MemoryKind::kDevice, &value, MemoryKind::kHost, sizeof(double), stream));
  TESSERA_RETURN_IF_ERROR(comm.AllReduce(d, 1, op, stream));
  TESSERA_RETURN_IF_ERROR(CopyBytes(&value, MemoryKind::kHost, d, MemoryKind::kDevice, sizeof(double), stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return value;
}

}  // namespace parallel
}  // namespace tessera

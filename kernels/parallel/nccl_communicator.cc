#include "kernels/parallel/nccl_communicator.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"

#if TESSERA_WITH_CUDA
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "common/cuda_check.h"
#endif

namespace tessera {
namespace parallel {

#if TESSERA_WITH_CUDA
namespace {

absl::Status NcclStatus(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", ncclGetErrorString(r)));
}

#define TESSERA_NCCL_RETURN_IF_ERROR(expr)                                     \
  do {                                                                         \
    ::absl::Status tessera_nccl_status_ = NcclStatus((expr), #expr);           \
    if (!tessera_nccl_status_.ok()) return tessera_nccl_status_;               \
  } while (0)

ncclRedOp_t ToNccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
  }
  return ncclSum;
}

// Makes `device` current for the duration of a call, restoring the caller's.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) cudaSetDevice(device);
  }
  ~ScopedDevice() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }

 private:
  int previous_ = -1;
};

}  // namespace

static_assert(sizeof(ncclUniqueId) == kNcclUniqueIdBytes, "NCCL unique id size changed");

absl::StatusOr<std::string> NcclUniqueId() {
  ncclUniqueId id;
  TESSERA_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
  return std::string(reinterpret_cast<const char*>(&id), sizeof(id));
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(absl::string_view unique_id, int rank,
                                                                           int size, int device_ordinal) {
  if (unique_id.size() != kNcclUniqueIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL unique id must be ", kNcclUniqueIdBytes, " bytes, got ", unique_id.size()));
  }
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL rank ", rank, " is outside a group of ", size));
  }
  if (device_ordinal < 0) return absl::InvalidArgumentError(absl::StrCat("device ordinal ", device_ordinal, " < 0"));
  ScopedDevice scoped(device_ordinal);
  ncclUniqueId id;
  std::memcpy(&id, unique_id.data(), sizeof(id));
  ncclComm_t comm = nullptr;
  TESSERA_NCCL_RETURN_IF_ERROR(ncclCommInitRank(&comm, size, id, rank));
  std::unique_ptr<NcclCommunicator> c(new NcclCommunicator(comm, rank, size, device_ordinal));
  TESSERA_ASSIGN_OR_RETURN(c->barrier_word_, Buffer::Allocate(MemoryKind::kDevice, sizeof(float), device_ordinal));
  return c;
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr) {
    ScopedDevice scoped(device_);
    ncclCommDestroy(static_cast<ncclComm_t>(comm_));
  }
}

absl::Status NcclCommunicator::CheckStream(const Stream& stream) const {
  if (stream.backend() != Backend::kCuda) {
    return absl::InvalidArgumentError("NCCL communicator needs a CUDA stream, got a CPU stream");
  }
  if (stream.ordinal() != device_) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream is on GPU ", stream.ordinal(), ", the NCCL communicator on GPU ", device_));
  }
  return absl::OkStatus();
}

absl::Status NcclCommunicator::AllReduceTyped(void* data, size_t count, int nccl_type, ReduceOp op,
                                              const Stream& stream) {
  TESSERA_RETURN_IF_ERROR(CheckStream(stream));
  if (count == 0) return absl::OkStatus();
  ScopedDevice scoped(device_);
  TESSERA_NCCL_RETURN_IF_ERROR(ncclAllReduce(data, data, count, static_cast<ncclDataType_t>(nccl_type), ToNccl(op),
                                             static_cast<ncclComm_t>(comm_),
                                             static_cast<cudaStream_t>(stream.native())));
  return absl::OkStatus();
}

absl::Status NcclCommunicator::AllReduce(float* data, size_t count, ReduceOp op, const Stream& stream) {
  return AllReduceTyped(data, count, ncclFloat32, op, stream);
}

absl::Status NcclCommunicator::AllReduce(double* data, size_t count, ReduceOp op, const Stream& stream) {
  return AllReduceTyped(data, count, ncclFloat64, op, stream);
}

absl::Status NcclCommunicator::SendRecv(const void* send, size_t send_bytes, int dst, void* recv, size_t recv_bytes,
                                        int src, const Stream& stream) {
  TESSERA_RETURN_IF_ERROR(CheckStream(stream));
  for (int peer : {dst, src}) {
    if (peer != kNoPeer && (peer < 0 || peer >= size_)) {
      return absl::InvalidArgumentError(absl::StrCat("SendRecv: rank ", peer, " is outside the group of ", size_));
    }
  }
  ScopedDevice scoped(device_);
  auto* comm = static_cast<ncclComm_t>(comm_);
  auto s = static_cast<cudaStream_t>(stream.native());
  TESSERA_NCCL_RETURN_IF_ERROR(ncclGroupStart());
  ncclResult_t r = ncclSuccess;
  if (dst != kNoPeer) r = ncclSend(send, send_bytes, ncclUint8, dst, comm, s);
  if (r == ncclSuccess && src != kNoPeer) r = ncclRecv(recv, recv_bytes, ncclUint8, src, comm, s);
  const ncclResult_t end = ncclGroupEnd();
  TESSERA_NCCL_RETURN_IF_ERROR(r);
  TESSERA_NCCL_RETURN_IF_ERROR(end);
  return absl::OkStatus();
}

absl::Status NcclCommunicator::Barrier(const Stream& stream) {
  TESSERA_RETURN_IF_ERROR(AllReduce(static_cast<float*>(barrier_word_->data()), 1, ReduceOp::kSum, stream));
  return stream.Synchronize();
}

std::string NcclCommunicator::Describe() const {
  return absl::StrCat("nccl rank ", rank_, "/", size_, " (GPU ", device_, ")");
}

#else  // !TESSERA_WITH_CUDA

namespace {
absl::Status NoNccl() { return absl::FailedPreconditionError("NCCL needs a CUDA build (built without CUDA)"); }
}  // namespace

absl::StatusOr<std::string> NcclUniqueId() { return NoNccl(); }
absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(absl::string_view, int, int, int) {
  return NoNccl();
}
NcclCommunicator::~NcclCommunicator() = default;
absl::Status NcclCommunicator::AllReduce(float*, size_t, ReduceOp, const Stream&) { return NoNccl(); }
absl::Status NcclCommunicator::AllReduce(double*, size_t, ReduceOp, const Stream&) { return NoNccl(); }
absl::Status NcclCommunicator::SendRecv(const void*, size_t, int, void*, size_t, int, const Stream&) {
  return NoNccl();
}
absl::Status NcclCommunicator::Barrier(const Stream&) { return NoNccl(); }
std::string NcclCommunicator::Describe() const { return "nccl (unavailable)"; }

#endif  // TESSERA_WITH_CUDA

}  // namespace parallel
}  // namespace tessera

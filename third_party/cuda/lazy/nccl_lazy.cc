// The NCCL functions the project calls, forwarded to libnccl on first use
// (lazy_library.h says why). Without the library they return
// ncclSystemError, and ncclGetErrorString says the library is not loaded.
#include <nccl.h>

#include "third_party/cuda/lazy/forward.h"

using tessera::cuda_lazy::Nccl;

extern "C" {

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  TESSERA_LAZY_FORWARD(Nccl, ncclGetUniqueId, ncclSystemError, uniqueId);
}
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  TESSERA_LAZY_FORWARD(Nccl, ncclCommInitRank, ncclSystemError, comm, nranks, commId, rank);
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) { TESSERA_LAZY_FORWARD(Nccl, ncclCommDestroy, ncclSystemError, comm); }
const char* ncclGetErrorString(ncclResult_t result) {
  TESSERA_LAZY_FORWARD(Nccl, ncclGetErrorString, "NCCL library not loaded", result);
}
ncclResult_t ncclGroupStart() { TESSERA_LAZY_FORWARD(Nccl, ncclGroupStart, ncclSystemError); }
ncclResult_t ncclGroupEnd() { TESSERA_LAZY_FORWARD(Nccl, ncclGroupEnd, ncclSystemError); }
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  TESSERA_LAZY_FORWARD(Nccl, ncclAllReduce, ncclSystemError, sendbuff, recvbuff, count, datatype, op, comm, stream);
}
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  TESSERA_LAZY_FORWARD(Nccl, ncclSend, ncclSystemError, sendbuff, count, datatype, peer, comm, stream);
}
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  TESSERA_LAZY_FORWARD(Nccl, ncclRecv, ncclSystemError, recvbuff, count, datatype, peer, comm, stream);
}

}  // extern "C"

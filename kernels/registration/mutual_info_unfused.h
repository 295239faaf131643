// Unfused Mattes MI on CUDA: a BASELINE for benchmarks, not for use. It does
// what a straightforward tensor-library implementation does: materialise the
// dense B x N Parzen weight tables of both images in device memory, form the
// joint histogram with a GEMM (cuBLAS), and in the backward pass materialise
// dLoss/dPsi_W (another GEMM) and the table of window derivatives, both B x N.
// Same definition and options as mutual_info.h (MattesMutualInformation);
// results agree with it to float-GEMM accuracy (see mutual_info_test.cc).
//
// Device memory: DeviceBytes(n, bins) = 4 tables * B * N * 4 bytes (Psi_F,
// Psi_W, dLoss/dPsi_W and dPsi_W/dt; 2 tables when forward only) plus B x B
// scratch, all through Buffer so GetDeviceMemoryStats sees it. Like a tensor
// library's caching allocator, the object keeps the tables between calls
// (so timings exclude cudaMalloc) until ReleaseTables() or destruction.
#ifndef TESSERA_KERNELS_REGISTRATION_MUTUAL_INFO_UNFUSED_H_
#define TESSERA_KERNELS_REGISTRATION_MUTUAL_INFO_UNFUSED_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/buffer.h"
#include "common/device.h"
#include "common/ndarray.h"
#include "kernels/registration/mutual_info.h"

namespace tessera {
namespace registration {

class MattesMiUnfused {
 public:
  // Binds a cuBLAS handle to `stream` (a CUDA stream that must outlive this
  // object). FAILED_PRECONDITION without CUDA.
  static absl::StatusOr<std::unique_ptr<MattesMiUnfused>> Create(const Stream& stream);
  ~MattesMiUnfused();
  MattesMiUnfused(const MattesMiUnfused&) = delete;
  MattesMiUnfused& operator=(const MattesMiUnfused&) = delete;

  // Device bytes one Run() allocates for n voxels (with_gradient: 4 tables, else 2).
  static size_t DeviceBytes(int64_t n, int bins, bool with_gradient);

  // As MattesMutualInformation with device arrays (mask may be null; grad may
  // be null for forward only). n must be < 2^31. Synchronises the stream.
  absl::StatusOr<MattesMiResult> Run(const NDArray& fixed, const NDArray& warped, const NDArray* mask,
                                     const MattesMiOptions& options, NDArray* grad);

  // Frees the cached tables.
  void ReleaseTables();

 private:
  MattesMiUnfused(const Stream& stream, void* handle) : stream_(stream), handle_(handle) {}
  const Stream& stream_;
  void* handle_;  // cublasHandle_t
  std::shared_ptr<Buffer> tables_[4];  // Psi_F, Psi_W, dLoss/dPsi_W, dPsi_W/dt (cached)
  std::shared_ptr<Buffer> small_;      // joint histogram, table T, result
};

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_MUTUAL_INFO_UNFUSED_H_

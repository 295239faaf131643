// Internal (CUDA only): a batched in-place C2C cuFFT plan over x-fastest 2-D /
// 3-D grids, float or double, with its work area in a tracked Buffer; used by
// the CUDA NUFFT and Toeplitz backends. Include from .cu files only.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_NUFFT_CUFFT_PLAN_H_
#define TESSERA_KERNELS_RECONSTRUCTION_NUFFT_CUFFT_PLAN_H_

#include <cufft.h>

#include <array>
#include <complex>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/device.h"
#include "common/status.h"

namespace tessera {
namespace recon {
namespace nufft {

// The interleaved complex device type of T (cuFFT's cufftComplex /
// cufftDoubleComplex layout), shared by the NUFFT and Toeplitz kernels.
template <typename T>
struct Vec2;
template <>
struct Vec2<float> {
  using type = float2;
};
template <>
struct Vec2<double> {
  using type = double2;
};

inline absl::Status CufftStatus(cufftResult r, const char* what) {
  if (r == CUFFT_SUCCESS) return absl::OkStatus();
  if (r == CUFFT_ALLOC_FAILED) return absl::ResourceExhaustedError(absl::StrCat(what, ": cuFFT allocation failed"));
  return absl::InternalError(absl::StrCat(what, ": cuFFT error ", static_cast<int>(r)));
}

template <typename T>
class CufftBatchPlan {
 public:
  // `batch` grids of dims (x fastest; dims[2] == 1 in 2-D), back to back.
  static absl::StatusOr<std::unique_ptr<CufftBatchPlan>> Create(std::array<int64_t, 3> dims, int batch,
                                                                const Stream& stream) {
    std::unique_ptr<CufftBatchPlan> p(new CufftBatchPlan);
    TESSERA_RETURN_IF_ERROR(CufftStatus(cufftCreate(&p->handle_), "cufftCreate"));
    p->valid_ = true;
    TESSERA_RETURN_IF_ERROR(CufftStatus(cufftSetAutoAllocation(p->handle_, 0), "cufftSetAutoAllocation"));
    int n[3] = {1, 1, 1};
    int rank;
    if (dims[2] == 1) {
      rank = 2, n[0] = static_cast<int>(dims[1]), n[1] = static_cast<int>(dims[0]);
    } else {
      rank = 3, n[0] = static_cast<int>(dims[2]), n[1] = static_cast<int>(dims[1]), n[2] = static_cast<int>(dims[0]);
    }
    const long long dist = dims[0] * dims[1] * dims[2];
    long long nn[3] = {n[0], n[1], n[2]};
    size_t work = 0;
    TESSERA_RETURN_IF_ERROR(CufftStatus(cufftMakePlanMany64(p->handle_, rank, nn, nullptr, 1, dist, nullptr, 1, dist,
                                                            sizeof(T) == 4 ? CUFFT_C2C : CUFFT_Z2Z, batch, &work),
                                        "cufftMakePlanMany64"));
    auto area = Buffer::Allocate(MemoryKind::kDevice, std::max<size_t>(work, 1), stream.ordinal());
    if (!area.ok()) return area.status();
    p->area_ = *area;
    TESSERA_RETURN_IF_ERROR(CufftStatus(cufftSetWorkArea(p->handle_, p->area_->data()), "cufftSetWorkArea"));
    TESSERA_RETURN_IF_ERROR(
        CufftStatus(cufftSetStream(p->handle_, static_cast<cudaStream_t>(stream.native())), "cufftSetStream"));
    return p;
  }
  ~CufftBatchPlan() {
    if (valid_) cufftDestroy(handle_);
  }
  // Exponent sign +1 (CUFFT_INVERSE) or -1 (CUFFT_FORWARD); unnormalised.
  absl::Status Execute(std::complex<T>* data, int sign) const {
    const int dir = sign > 0 ? CUFFT_INVERSE : CUFFT_FORWARD;
    if (sizeof(T) == 4) {
      auto* z = reinterpret_cast<cufftComplex*>(data);
      return CufftStatus(cufftExecC2C(handle_, z, z, dir), "cufftExecC2C");
    }
    auto* z = reinterpret_cast<cufftDoubleComplex*>(data);
    return CufftStatus(cufftExecZ2Z(handle_, z, z, dir), "cufftExecZ2Z");
  }

 private:
  CufftBatchPlan() = default;
  cufftHandle handle_ = 0;
  bool valid_ = false;
  std::shared_ptr<Buffer> area_;
};

}  // namespace nufft
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_NUFFT_CUFFT_PLAN_H_

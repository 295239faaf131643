// ToeplitzOperator<T>::Create: checks and backend dispatch.
#include "kernels/reconstruction/nufft/toeplitz.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/reconstruction/nufft/nufft_backend.h"
#include "kernels/reconstruction/nufft/toeplitz_backend.h"

namespace tessera {
namespace recon {
namespace nufft {

template <typename T>
absl::StatusOr<std::unique_ptr<ToeplitzOperator<T>>> ToeplitzOperator<T>::Create(
    const Stream& stream, std::array<int64_t, 3> modes, int64_t m, const T* x, const T* y, const T* z,
    const T* weights, const ToeplitzOptions& options) {
  if (options.sign != 1 && options.sign != -1) {
    return absl::InvalidArgumentError(absl::StrCat("toeplitz: sign must be +1 or -1, got ", options.sign));
  }
  if (options.ntransforms < 1) {
    return absl::InvalidArgumentError(absl::StrCat("toeplitz: ntransforms must be >= 1, got ", options.ntransforms));
  }
  ToeplitzSetup setup;
  setup.modes = modes;
  setup.options = options;
  setup.dim = modes[2] == 1 ? 2 : 3;
  for (int a = 0; a < 3; ++a) setup.padded[a] = a < setup.dim ? 2 * modes[a] : 1;
  setup.kernel_nufft.tolerance = options.tolerance;
  setup.kernel_nufft.upsampling = options.upsampling;
  setup.kernel_nufft.sign = -options.sign;
  setup.kernel_nufft.mode = options.mode;
  // The NUFFT checks modes (via the padded grid: N >= 2 <=> 2N >= 4) and the
  // tolerance / upsampling; check N itself so messages name the caller's modes.
  TESSERA_RETURN_IF_ERROR(
      MakeNufftSetup(NufftType::kType2, modes, setup.kernel_nufft, sizeof(std::complex<T>), kMaxFineGridBytes)
          .status());
  if (m < 0) return absl::InvalidArgumentError(absl::StrCat("toeplitz: number of points must be >= 0, got ", m));
  if (stream.backend() == Backend::kCpu) return MakeCpuToeplitz<T>(setup, m, x, y, z, weights);
#if TESSERA_WITH_CUDA
  return cuda::MakeToeplitz<T>(setup, stream, m, x, y, z, weights);
#else
  return absl::FailedPreconditionError(
      absl::StrCat("toeplitz: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

template class ToeplitzOperator<float>;
template class ToeplitzOperator<double>;

}  // namespace nufft
}  // namespace recon
}  // namespace tessera

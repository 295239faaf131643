// NufftPlan<T>::Create: checks (nufft_setup.cc) and backend dispatch.
#include "kernels/reconstruction/nufft/nufft.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/reconstruction/nufft/nufft_backend.h"

namespace tessera {
namespace recon {
namespace nufft {

template <typename T>
absl::StatusOr<std::unique_ptr<NufftPlan<T>>> NufftPlan<T>::Create(const Stream& stream, NufftType type,
                                                                   std::array<int64_t, 3> modes,
                                                                   const NufftOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(NufftSetup setup,
                           MakeNufftSetup(type, modes, options, sizeof(std::complex<T>), kMaxFineGridBytes));
  if (stream.backend() == Backend::kCpu) return MakeCpuNufftPlan<T>(std::move(setup));
#if TESSERA_WITH_CUDA
  return cuda::MakeNufftPlan<T>(std::move(setup), stream);
#else
  return absl::FailedPreconditionError(
      absl::StrCat("nufft: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

template class NufftPlan<float>;
template class NufftPlan<double>;

}  // namespace nufft
}  // namespace recon
}  // namespace tessera

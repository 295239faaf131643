// stub (replaced below)
#include "kernels/reconstruction/nufft/nufft_backend.h"
namespace tessera { namespace recon { namespace nufft { namespace cuda {
template <typename T>
absl::StatusOr<std::unique_ptr<NufftPlan<T>>> MakeNufftPlan(NufftSetup setup, const Stream& stream) {
  return absl::UnimplementedError("x");
}
template absl::StatusOr<std::unique_ptr<NufftPlan<float>>> MakeNufftPlan<float>(NufftSetup, const Stream&);
template absl::StatusOr<std::unique_ptr<NufftPlan<double>>> MakeNufftPlan<double>(NufftSetup, const Stream&);
}}}}

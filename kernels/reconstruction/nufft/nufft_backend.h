// Internal: the base every NUFFT backend derives from, and the backend
// factories behind NufftPlan<T>::Create.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_NUFFT_NUFFT_BACKEND_H_
#define TESSERA_KERNELS_RECONSTRUCTION_NUFFT_NUFFT_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/reconstruction/nufft/nufft.h"
#include "kernels/reconstruction/nufft/nufft_setup.h"

namespace tessera {
namespace recon {
namespace nufft {

template <typename T>
class NufftPlanBase : public NufftPlan<T> {
 public:
  explicit NufftPlanBase(NufftSetup setup) : setup_(std::move(setup)) {}
  NufftType type() const override { return setup_.type; }
  int dim() const override { return setup_.dim; }
  std::array<int64_t, 3> modes() const override { return setup_.modes; }
  int64_t num_points() const override { return m_; }
  const NufftOptions& options() const override { return setup_.options; }
  NufftKernelInfo kernel_info() const override { return setup_.info(); }

 protected:
  NufftSetup setup_;
  int64_t m_ = 0;
};

// The largest single fine grid a plan accepts (bytes).
constexpr size_t kMaxFineGridBytes = size_t{64} << 30;

template <typename T>
absl::StatusOr<std::unique_ptr<NufftPlan<T>>> MakeCpuNufftPlan(NufftSetup setup);

namespace cuda {
template <typename T>
absl::StatusOr<std::unique_ptr<NufftPlan<T>>> MakeNufftPlan(NufftSetup setup, const Stream& stream);
}  // namespace cuda

}  // namespace nufft
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_NUFFT_NUFFT_BACKEND_H_

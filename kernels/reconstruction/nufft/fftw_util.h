// Internal: typed FFTW (float / double) complex-to-complex plans on x-fastest
// 2-D / 3-D grids, the planner lock, and FFTW-aligned arrays; shared by the
// CPU NUFFT and Toeplitz backends.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_NUFFT_FFTW_UTIL_H_
#define TESSERA_KERNELS_RECONSTRUCTION_NUFFT_FFTW_UTIL_H_

#include <fftw3.h>

#include <array>
#include <complex>
#include <cstdint>
#include <memory>
#include <mutex>

#include "absl/status/statusor.h"
#include "common/fftw_planner_lock.h"

namespace tessera {
namespace recon {
namespace nufft {

// Plan creation and destruction take tessera::FftwPlannerMutex()
// (common/fftw_planner_lock.h), the process's one FFTW planner lock.
template <typename T>
struct FftwFree {
  void operator()(std::complex<T>* p) const { fftw_free(p); }
};
template <typename T>
using FftwArray = std::unique_ptr<std::complex<T>[], FftwFree<T>>;

// nullptr when out of memory.
template <typename T>
FftwArray<T> AllocFftwArray(int64_t n) {
  return FftwArray<T>(static_cast<std::complex<T>*>(fftw_malloc(sizeof(std::complex<T>) * static_cast<size_t>(n))));
}

// An in-place C2C transform of one grid of dims[0] x dims[1] x dims[2]
// (x fastest; dims[2] == 1 for 2-D), exponent sign +1 or -1, unnormalised,
// executable on any FftwArray of that size.
template <typename T>
class FftwPlan {
 public:
  static absl::StatusOr<std::unique_ptr<FftwPlan>> Create(std::array<int64_t, 3> dims, int sign);
  ~FftwPlan();
  void Execute(std::complex<T>* grid) const;

 private:
  FftwPlan() = default;
  void* plan_ = nullptr;  // fftw_plan or fftwf_plan
};

}  // namespace nufft
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_NUFFT_FFTW_UTIL_H_

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

// Where a grid of dims[0] x dims[1] x dims[2] (x fastest) keeps its
// elements: rows row_pitch apart, planes plane_pitch apart. Rows whose length
// is a multiple of 16 get 4 spare elements, and planes of such rows one spare
// row, so that the column and plane passes of an FFTW_ESTIMATE plan do not
// land in the same cache sets on every row: measured on the 2-core dev VM
// (fftwf, in place), 256^2 takes 1.6 ms dense and 0.16 ms padded (FFTW_MEASURE
// dense: 0.14 ms after 170 ms of planning), 256^3 1.2 s dense and 90 ms
// padded. The spare elements are never read as data.
struct FftwGrid {
  std::array<int64_t, 3> dims = {1, 1, 1};
  int64_t row_pitch = 1, plane_pitch = 1;

  static FftwGrid For(std::array<int64_t, 3> dims);
  int64_t elements() const { return plane_pitch * dims[2]; }
  int64_t Index(int64_t x, int64_t y, int64_t z) const { return z * plane_pitch + y * row_pitch + x; }
};

// An in-place C2C transform of one grid of dims[0] x dims[1] x dims[2]
// (x fastest; dims[2] == 1 for 2-D) laid out as grid() says, exponent sign +1
// or -1, unnormalised, executable on any FftwArray of grid().elements()
// (concurrently on different arrays: FFTW's new-array execute is thread safe).
template <typename T>
class FftwPlan {
 public:
  static absl::StatusOr<std::unique_ptr<FftwPlan>> Create(std::array<int64_t, 3> dims, int sign);
  ~FftwPlan();
  void Execute(std::complex<T>* grid) const;
  const FftwGrid& grid() const { return grid_; }

 private:
  FftwPlan() = default;
  void* plan_ = nullptr;  // fftw_plan or fftwf_plan
  FftwGrid grid_;
};

}  // namespace nufft
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_NUFFT_FFTW_UTIL_H_

#include "kernels/reconstruction/nufft/fftw_util.h"

#include "absl/strings/str_cat.h"

namespace tessera {
namespace recon {
namespace nufft {

namespace {

// FFTW wants the slowest axis first: sizes n and the embedding (the padded
// extents) nembed.
int Rank(const FftwGrid& g, int n[3], int nembed[3]) {
  if (g.dims[2] == 1) {
    n[0] = static_cast<int>(g.dims[1]);
    n[1] = static_cast<int>(g.dims[0]);
    nembed[0] = n[0];
    nembed[1] = static_cast<int>(g.row_pitch);
    return 2;
  }
  n[0] = static_cast<int>(g.dims[2]);
  n[1] = static_cast<int>(g.dims[1]);
  n[2] = static_cast<int>(g.dims[0]);
  nembed[0] = n[0];
  nembed[1] = static_cast<int>(g.plane_pitch / g.row_pitch);
  nembed[2] = static_cast<int>(g.row_pitch);
  return 3;
}

void* PlanTyped(float*, int rank, const int* n, const int* nembed, void* probe, int sign) {
  auto* z = reinterpret_cast<fftwf_complex*>(probe);
  return fftwf_plan_many_dft(rank, n, 1, z, nembed, 1, 0, z, nembed, 1, 0, sign < 0 ? FFTW_FORWARD : FFTW_BACKWARD,
                             FFTW_ESTIMATE);
}
void* PlanTyped(double*, int rank, const int* n, const int* nembed, void* probe, int sign) {
  auto* z = reinterpret_cast<fftw_complex*>(probe);
  return fftw_plan_many_dft(rank, n, 1, z, nembed, 1, 0, z, nembed, 1, 0, sign < 0 ? FFTW_FORWARD : FFTW_BACKWARD,
                            FFTW_ESTIMATE);
}
void DestroyTyped(float*, void* p) { fftwf_destroy_plan(static_cast<fftwf_plan>(p)); }
void DestroyTyped(double*, void* p) { fftw_destroy_plan(static_cast<fftw_plan>(p)); }
void ExecuteTyped(void* p, std::complex<float>* g) {
  auto* z = reinterpret_cast<fftwf_complex*>(g);
  fftwf_execute_dft(static_cast<fftwf_plan>(p), z, z);
}
void ExecuteTyped(void* p, std::complex<double>* g) {
  auto* z = reinterpret_cast<fftw_complex*>(g);
  fftw_execute_dft(static_cast<fftw_plan>(p), z, z);
}

}  // namespace

FftwGrid FftwGrid::For(std::array<int64_t, 3> dims) {
  FftwGrid g;
  g.dims = dims;
  g.row_pitch = dims[0] + (dims[1] > 1 && dims[0] % 16 == 0 ? 4 : 0);
  g.plane_pitch = g.row_pitch * (dims[1] + (dims[2] > 1 && dims[1] % 16 == 0 ? 1 : 0));
  return g;
}

template <typename T>
absl::StatusOr<std::unique_ptr<FftwPlan<T>>> FftwPlan<T>::Create(std::array<int64_t, 3> dims, int sign) {
  std::unique_ptr<FftwPlan> plan(new FftwPlan);
  plan->grid_ = FftwGrid::For(dims);
  int n[3], nembed[3];
  const int rank = Rank(plan->grid_, n, nembed);
  FftwArray<T> probe = AllocFftwArray<T>(plan->grid_.elements());
  if (probe == nullptr) return absl::ResourceExhaustedError("nufft: fftw_malloc failed for the FFT grid");
  {
    std::lock_guard<std::mutex> lock(FftwPlannerMutex());
    plan->plan_ = PlanTyped(static_cast<T*>(nullptr), rank, n, nembed, probe.get(), sign);
  }
  if (plan->plan_ == nullptr) {
    return absl::InternalError(
        absl::StrCat("nufft: FFTW could not plan a ", dims[0], " x ", dims[1], " x ", dims[2], " transform"));
  }
  return plan;
}

template <typename T>
FftwPlan<T>::~FftwPlan() {
  if (plan_ == nullptr) return;
  std::lock_guard<std::mutex> lock(FftwPlannerMutex());
  DestroyTyped(static_cast<T*>(nullptr), plan_);
}

template <typename T>
void FftwPlan<T>::Execute(std::complex<T>* grid) const {
  ExecuteTyped(plan_, grid);
}

template class FftwPlan<float>;
template class FftwPlan<double>;

}  // namespace nufft
}  // namespace recon
}  // namespace tessera

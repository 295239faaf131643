#include "kernels/reconstruction/nufft/fftw_util.h"

#include "absl/strings/str_cat.h"

namespace tessera {
namespace recon {
namespace nufft {

namespace {

int Rank(const std::array<int64_t, 3>& dims, int n[3]) {
  // FFTW wants the slowest axis first.
  if (dims[2] == 1) {
    n[0] = static_cast<int>(dims[1]);
    n[1] = static_cast<int>(dims[0]);
    return 2;
  }
  n[0] = static_cast<int>(dims[2]);
  n[1] = static_cast<int>(dims[1]);
  n[2] = static_cast<int>(dims[0]);
  return 3;
}

void* PlanTyped(float*, int rank, const int* n, void* probe, int sign) {
  auto* z = reinterpret_cast<fftwf_complex*>(probe);
  return fftwf_plan_dft(rank, n, z, z, sign < 0 ? FFTW_FORWARD : FFTW_BACKWARD, FFTW_ESTIMATE);
}
void* PlanTyped(double*, int rank, const int* n, void* probe, int sign) {
  auto* z = reinterpret_cast<fftw_complex*>(probe);
  return fftw_plan_dft(rank, n, z, z, sign < 0 ? FFTW_FORWARD : FFTW_BACKWARD, FFTW_ESTIMATE);
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

template <typename T>
absl::StatusOr<std::unique_ptr<FftwPlan<T>>> FftwPlan<T>::Create(std::array<int64_t, 3> dims, int sign) {
  int n[3];
  const int rank = Rank(dims, n);
  FftwArray<T> probe = AllocFftwArray<T>(dims[0] * dims[1] * dims[2]);
  if (probe == nullptr) return absl::ResourceExhaustedError("nufft: fftw_malloc failed for the FFT grid");
  std::unique_ptr<FftwPlan> plan(new FftwPlan);
  {
    std::lock_guard<std::mutex> lock(FftwPlannerMutex());
    plan->plan_ = PlanTyped(static_cast<T*>(nullptr), rank, n, probe.get(), sign);
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

// CPU backend of the Toeplitz operator: kernel by the CPU NUFFT, FFTW on the
// 2N grid, element-wise work threaded with common/parallel.
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status.h"
#include "kernels/reconstruction/nufft/fftw_util.h"
#include "kernels/reconstruction/nufft/toeplitz_backend.h"

namespace tessera {
namespace recon {
namespace nufft {
namespace {

template <typename T>
class CpuToeplitz final : public ToeplitzOperator<T> {
 public:
  static absl::StatusOr<std::unique_ptr<ToeplitzOperator<T>>> Create(const ToeplitzSetup& setup, int64_t m,
                                                                     const T* x, const T* y, const T* z,
                                                                     const T* weights) {
    std::unique_ptr<CpuToeplitz> op(new CpuToeplitz(setup));
    std::vector<std::complex<T>> c(m, std::complex<T>(1, 0));
    if (weights != nullptr) {
      for (int64_t j = 0; j < m; ++j) {
        if (!std::isfinite(static_cast<double>(weights[j]))) {
          return absl::InvalidArgumentError(
              absl::StrCat("toeplitz: weights[", j, "] = ", static_cast<double>(weights[j]), " is not finite"));
        }
        c[j] = std::complex<T>(weights[j], 0);
      }
    }
    const int64_t size = setup.padded_size();
    std::vector<std::complex<T>> h(size);
    {
      const Stream cpu = Stream::Cpu();
      TESSERA_ASSIGN_OR_RETURN(auto plan, NufftPlan<T>::Create(cpu, NufftType::kType1, setup.padded, setup.kernel_nufft));
      TESSERA_RETURN_IF_ERROR(plan->SetPoints(m, x, y, z));
      TESSERA_RETURN_IF_ERROR(plan->Execute(c.data(), h.data()));
    }
    TESSERA_ASSIGN_OR_RETURN(op->forward_, FftwPlan<T>::Create(setup.padded, -1));
    TESSERA_ASSIGN_OR_RETURN(op->inverse_, FftwPlan<T>::Create(setup.padded, +1));
    op->kernel_ = AllocFftwArray<T>(size);
    op->work_ = AllocFftwArray<T>(size);
    if (op->kernel_ == nullptr || op->work_ == nullptr) {
      return absl::ResourceExhaustedError("toeplitz: out of memory for the 2N grid");
    }
    std::complex<T>* k = op->kernel_.get();
    std::fill(k, k + size, std::complex<T>(0, 0));
    const auto& p = setup.padded;
    for (int64_t q2 = 0; q2 < p[2]; ++q2) {
      const int64_t i2 = CirculantIndex(q2, p[2]);
      for (int64_t q1 = 0; q1 < p[1]; ++q1) {
        const int64_t i1 = CirculantIndex(q1, p[1]);
        for (int64_t q0 = 0; q0 < p[0]; ++q0) {
          const int64_t i0 = CirculantIndex(q0, p[0]);
          if (i0 < 0 || i1 < 0 || i2 < 0) continue;
          k[(i2 * p[1] + i1) * p[0] + i0] = h[(q2 * p[1] + q1) * p[0] + q0];
        }
      }
    }
    op->forward_->Execute(k);
    const T scale = static_cast<T>(1.0 / static_cast<double>(size));  // the inverse FFT's 1 / L
    for (int64_t i = 0; i < size; ++i) k[i] *= scale;
    return std::unique_ptr<ToeplitzOperator<T>>(std::move(op));
  }

  absl::Status Apply(const std::complex<T>* in, std::complex<T>* out) override {
    if (in == nullptr || out == nullptr) return absl::InvalidArgumentError("toeplitz: Apply got a null array");
    const auto& n = setup_.modes;
    const auto& p = setup_.padded;
    const int64_t size = setup_.padded_size(), nmodes = setup_.num_modes(), rows = n[1] * n[2];
    std::complex<T>* w = work_.get();
    const std::complex<T>* k = kernel_.get();
    for (int t = 0; t < setup_.options.ntransforms; ++t) {
      const std::complex<T>* src = in + t * nmodes;
      std::complex<T>* dst = out + t * nmodes;
      std::fill(w, w + size, std::complex<T>(0, 0));
      ParallelFor(rows, [&](int64_t begin, int64_t end, int) {
        for (int64_t r = begin; r < end; ++r) {
          const int64_t i1 = r % n[1], i2 = r / n[1];
          std::copy(src + r * n[0], src + (r + 1) * n[0], w + (i2 * p[1] + i1) * p[0]);
        }
      });
      forward_->Execute(w);
      ParallelFor(size, [&](int64_t begin, int64_t end, int) {
        for (int64_t i = begin; i < end; ++i) w[i] *= k[i];
      }, 1 << 14);
      inverse_->Execute(w);
      ParallelFor(rows, [&](int64_t begin, int64_t end, int) {
        for (int64_t r = begin; r < end; ++r) {
          const int64_t i1 = r % n[1], i2 = r / n[1];
          const std::complex<T>* row = w + (i2 * p[1] + i1) * p[0];
          std::copy(row, row + n[0], dst + r * n[0]);
        }
      });
    }
    return absl::OkStatus();
  }

  std::array<int64_t, 3> modes() const override { return setup_.modes; }
  const ToeplitzOptions& options() const override { return setup_.options; }

 private:
  explicit CpuToeplitz(const ToeplitzSetup& setup) : setup_(setup) {}
  ToeplitzSetup setup_;
  std::unique_ptr<FftwPlan<T>> forward_, inverse_;
  FftwArray<T> kernel_;  // FFT of the circulant's first column, divided by the grid size
  FftwArray<T> work_;
};

}  // namespace

template <typename T>
absl::StatusOr<std::unique_ptr<ToeplitzOperator<T>>> MakeCpuToeplitz(const ToeplitzSetup& setup, int64_t m,
                                                                     const T* x, const T* y, const T* z,
                                                                     const T* weights) {
  return CpuToeplitz<T>::Create(setup, m, x, y, z, weights);
}

template absl::StatusOr<std::unique_ptr<ToeplitzOperator<float>>> MakeCpuToeplitz<float>(
    const ToeplitzSetup&, int64_t, const float*, const float*, const float*, const float*);
template absl::StatusOr<std::unique_ptr<ToeplitzOperator<double>>> MakeCpuToeplitz<double>(
    const ToeplitzSetup&, int64_t, const double*, const double*, const double*, const double*);

}  // namespace nufft
}  // namespace recon
}  // namespace tessera

// CPU backend of the Toeplitz operator: kernel by the CPU NUFFT, FFTW on the
// 2N grid. Several transforms (coils) run side by side, one per worker thread
// with its own grid (the FFTs are single-threaded, so this is where the
// second core pays); the element-wise passes inside are ParallelFor loops,
// which run in place when the transforms already occupy every thread.
#include <algorithm>
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
    const FftwGrid& layout = op->forward_->grid();
    op->kernel_ = AllocFftwArray<T>(layout.elements());
    if (op->kernel_ == nullptr) return absl::ResourceExhaustedError("toeplitz: out of memory for the 2N grid");
    for (int w = ParallelChunks(setup.options.ntransforms); w > 0; --w) {
      op->work_.push_back(AllocFftwArray<T>(layout.elements()));
      if (op->work_.back() == nullptr) return absl::ResourceExhaustedError("toeplitz: out of memory for the 2N grid");
    }
    std::complex<T>* k = op->kernel_.get();
    std::fill(k, k + layout.elements(), std::complex<T>(0, 0));
    const auto& p = setup.padded;
    for (int64_t q2 = 0; q2 < p[2]; ++q2) {
      const int64_t i2 = CirculantIndex(q2, p[2]);
      for (int64_t q1 = 0; q1 < p[1]; ++q1) {
        const int64_t i1 = CirculantIndex(q1, p[1]);
        for (int64_t q0 = 0; q0 < p[0]; ++q0) {
          const int64_t i0 = CirculantIndex(q0, p[0]);
          if (i0 < 0 || i1 < 0 || i2 < 0) continue;
          k[layout.Index(i0, i1, i2)] = h[(q2 * p[1] + q1) * p[0] + q0];
        }
      }
    }
    op->forward_->Execute(k);
    const T scale = static_cast<T>(1.0 / static_cast<double>(size));  // the inverse FFT's 1 / L
    for (int64_t i = 0; i < layout.elements(); ++i) k[i] *= scale;
    return std::unique_ptr<ToeplitzOperator<T>>(std::move(op));
  }

  absl::Status Apply(const std::complex<T>* in, std::complex<T>* out) override {
    if (in == nullptr || out == nullptr) return absl::InvalidArgumentError("toeplitz: Apply got a null array");
    const int64_t nmodes = setup_.num_modes();
    // Whole transforms per worker, each its own grid (work_ holds
    // ParallelChunks(ntransforms) of them).
    ParallelFor(setup_.options.ntransforms, [&](int64_t begin, int64_t end, int worker) {
      for (int64_t t = begin; t < end; ++t) ApplyOne(in + t * nmodes, out + t * nmodes, work_[worker].get());
    });
    return absl::OkStatus();
  }

  std::array<int64_t, 3> modes() const override { return setup_.modes; }
  const ToeplitzOptions& options() const override { return setup_.options; }

 private:
  explicit CpuToeplitz(const ToeplitzSetup& setup) : setup_(setup) {}

  // out = T in for one transform, through the 2N grid w.
  void ApplyOne(const std::complex<T>* src, std::complex<T>* dst, std::complex<T>* w) const {
    const auto& n = setup_.modes;
    const FftwGrid& layout = forward_->grid();
    const int64_t size = layout.elements(), rows = n[1] * n[2];
    const std::complex<T>* k = kernel_.get();
    std::fill(w, w + size, std::complex<T>(0, 0));
    ParallelFor(rows, [&](int64_t begin, int64_t end, int) {
      for (int64_t r = begin; r < end; ++r) {
        std::copy(src + r * n[0], src + (r + 1) * n[0], w + layout.Index(0, r % n[1], r / n[1]));
      }
    });
    forward_->Execute(w);
    ParallelFor(size, [&](int64_t begin, int64_t end, int) {
      for (int64_t i = begin; i < end; ++i) w[i] *= k[i];
    }, 1 << 14);
    inverse_->Execute(w);
    ParallelFor(rows, [&](int64_t begin, int64_t end, int) {
      for (int64_t r = begin; r < end; ++r) {
        const std::complex<T>* row = w + layout.Index(0, r % n[1], r / n[1]);
        std::copy(row, row + n[0], dst + r * n[0]);
      }
    });
  }

  ToeplitzSetup setup_;
  std::unique_ptr<FftwPlan<T>> forward_, inverse_;
  FftwArray<T> kernel_;              // FFT of the circulant's first column, divided by the grid size
  std::vector<FftwArray<T>> work_;   // one 2N grid per worker
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

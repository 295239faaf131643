// CPU backend of the NUFFT: points folded in double and counting-sorted by
// fine-grid row; type 1 spreads into slabs of the slowest axis, one per
// thread (each slab visits the points whose kernel reaches it and writes only
// its own rows: no locks, and each cell sums its points in sorted order);
// type 2 interpolates points in sorted order; FFTW on the fine grid; the
// deconvolution doubles as the centred <-> FFT-order shift.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status.h"
#include "kernels/reconstruction/nufft/fftw_util.h"
#include "kernels/reconstruction/nufft/nufft_backend.h"

namespace tessera {
namespace recon {
namespace nufft {
namespace {

constexpr int64_t kMidBin = 16;  // cells per sort bucket along the middle axis (2-D: x)

// Kernel values at the w cells a point with fraction `frac` touches; returns
// the first cell offset relative to the point's cell.
template <typename T>
inline int KernelWeights(const EsKernelParams& p, T frac, T* out) {
  const int w = p.width;
  const int o = FirstOffset(frac, w);
  const T beta = static_cast<T>(p.beta), c = static_cast<T>(p.c);
  for (int k = 0; k < w; ++k) {
    const T z = static_cast<T>(o + k) - frac;
    const T s = T(1) - c * z * z;
    out[k] = s > 0 ? std::exp(beta * (std::sqrt(s) - T(1))) : T(0);
  }
  return o;
}

inline int64_t Wrap(int64_t i, int64_t n) {
  i %= n;
  return i < 0 ? i + n : i;
}

template <typename T>
class CpuNufftPlan final : public NufftPlanBase<T> {
  using NufftPlanBase<T>::setup_;
  using NufftPlanBase<T>::m_;

 public:
  static absl::StatusOr<std::unique_ptr<NufftPlan<T>>> Create(NufftSetup setup) {
    std::unique_ptr<CpuNufftPlan> plan(new CpuNufftPlan(std::move(setup)));
    TESSERA_ASSIGN_OR_RETURN(plan->fft_, FftwPlan<T>::Create(plan->setup_.fine, plan->setup_.options.sign));
    plan->grid_ = AllocFftwArray<T>(plan->fft_->grid().elements());
    if (plan->grid_ == nullptr) return absl::ResourceExhaustedError("nufft: out of memory for the fine grid");
    return std::unique_ptr<NufftPlan<T>>(std::move(plan));
  }

  absl::Status SetPoints(int64_t m, const T* x, const T* y, const T* z) override;
  absl::Status Execute(std::complex<T>* c, std::complex<T>* f) override;

 private:
  explicit CpuNufftPlan(NufftSetup setup) : NufftPlanBase<T>(std::move(setup)) {}
  int slow_axis() const { return setup_.dim - 1; }
  const FftwGrid& layout() const { return fft_->grid(); }
  void Spread(const std::complex<T>* c);
  void Interpolate(std::complex<T>* c) const;
  void Deconvolve(std::complex<T>* f) const;  // fine grid -> modes
  void Precorrect(const std::complex<T>* f);  // modes -> zeroed fine grid

  std::unique_ptr<FftwPlan<T>> fft_;
  FftwArray<T> grid_;
  // Sorted points: cell and fraction per axis, and the caller's index.
  std::array<std::vector<int32_t>, 3> cell_;
  std::array<std::vector<T>, 3> frac_;
  std::vector<int64_t> perm_;
  std::vector<int64_t> row_start_;  // first sorted point of each slow-axis cell, + end
};

template <typename T>
absl::Status CpuNufftPlan<T>::SetPoints(int64_t m, const T* x, const T* y, const T* z) {
  const int dim = setup_.dim;
  if (m < 0) return absl::InvalidArgumentError(absl::StrCat("nufft: number of points must be >= 0, got ", m));
  const T* coords[3] = {x, y, dim == 3 ? z : nullptr};
  const char* names[3] = {"x", "y", "z"};
  for (int a = 0; a < dim; ++a) {
    if (m > 0 && coords[a] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("nufft: coordinate array ", names[a], " is null"));
    }
  }
  // Fold (in parallel), remembering the first non-finite coordinate.
  std::array<std::vector<int32_t>, 3> cell;
  std::array<std::vector<double>, 3> frac;
  for (int a = 0; a < dim; ++a) cell[a].resize(m), frac[a].resize(m);
  std::vector<int64_t> first_bad(ParallelChunks(m, 4096), std::numeric_limits<int64_t>::max());
  ParallelFor(
      m,
      [&](int64_t begin, int64_t end, int chunk) {
        for (int64_t j = begin; j < end; ++j) {
          for (int a = 0; a < dim; ++a) {
            const double v = static_cast<double>(coords[a][j]);
            if (!std::isfinite(v)) {
              first_bad[chunk] = std::min(first_bad[chunk], j);
              cell[a][j] = 0, frac[a][j] = 0;
              continue;
            }
            FoldToGrid(v, setup_.fine[a], &cell[a][j], &frac[a][j]);
          }
        }
      },
      4096);
  const int64_t bad = first_bad.empty() ? std::numeric_limits<int64_t>::max()
                                        : *std::min_element(first_bad.begin(), first_bad.end());
  if (bad != std::numeric_limits<int64_t>::max()) {
    for (int a = 0; a < dim; ++a) {
      if (!std::isfinite(static_cast<double>(coords[a][bad]))) {
        return absl::InvalidArgumentError(absl::StrCat("nufft: coordinate ", names[a], "[", bad, "] = ",
                                                       static_cast<double>(coords[a][bad]), " is not finite"));
      }
    }
  }
  // Counting sort by (slow cell, middle bucket): 2-D (y, x / 16), 3-D (z, y).
  const int slow = slow_axis();
  const int64_t nslow = setup_.fine[slow];
  const int64_t nmid = dim == 2 ? (setup_.fine[0] + kMidBin - 1) / kMidBin : setup_.fine[1];
  auto key = [&](int64_t j) {
    const int64_t mid = dim == 2 ? cell[0][j] / kMidBin : cell[1][j];
    return cell[slow][j] * nmid + mid;
  };
  std::vector<int64_t> start(nslow * nmid + 1, 0);
  for (int64_t j = 0; j < m; ++j) ++start[key(j) + 1];
  for (size_t b = 1; b < start.size(); ++b) start[b] += start[b - 1];
  row_start_.resize(nslow + 1);
  for (int64_t r = 0; r <= nslow; ++r) row_start_[r] = start[r * nmid];
  perm_.resize(m);
  for (int64_t j = 0; j < m; ++j) perm_[start[key(j)]++] = j;
  for (int a = 0; a < 3; ++a) {
    cell_[a].assign(a < dim ? m : 0, 0);
    frac_[a].assign(a < dim ? m : 0, 0);
  }
  ParallelFor(m, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      for (int a = 0; a < dim; ++a) {
        cell_[a][i] = cell[a][perm_[i]];
        frac_[a][i] = FracAsT<T>(frac[a][perm_[i]]);
      }
    }
  });
  m_ = m;
  return absl::OkStatus();
}

template <typename T>
void CpuNufftPlan<T>::Spread(const std::complex<T>* c) {
  const EsKernelParams& kp = setup_.kernel;
  const int w = kp.width, dim = setup_.dim, slow = slow_axis();
  const int64_t n0 = setup_.fine[0], n1 = setup_.fine[1], nslow = setup_.fine[slow];
  const int64_t row_pitch = layout().row_pitch, plane_pitch = layout().plane_pitch;
  const int64_t slow_pitch = dim == 2 ? row_pitch : plane_pitch;
  std::complex<T>* grid = grid_.get();
  // Slabs of at least 2w rows so re-visited halo points stay a small share.
  ParallelFor(
      nslow,
      [&](int64_t a, int64_t b, int) {
        std::fill(grid + a * slow_pitch, grid + b * slow_pitch, std::complex<T>(0, 0));
        // Points whose slow cell lies in [lo, hi] can reach rows [a, b).
        const int64_t lo = a - w / 2 - 2, hi = b + w / 2 + 1;
        const bool all = hi - lo + 1 >= nslow;
        const int64_t first = all ? 0 : lo, last = all ? nslow - 1 : hi;
        T wx[kMaxKernelWidth], wy[kMaxKernelWidth], wz[kMaxKernelWidth];
        int64_t ix[kMaxKernelWidth], iy[kMaxKernelWidth];
        for (int64_t cc = first; cc <= last; ++cc) {
          const int64_t r = Wrap(cc, nslow);
          for (int64_t i = row_start_[r]; i < row_start_[r + 1]; ++i) {
            const std::complex<T> v = c[perm_[i]];
            const int ox = KernelWeights(kp, frac_[0][i], wx);
            const int oy = KernelWeights(kp, frac_[1][i], wy);
            for (int k = 0; k < w; ++k) ix[k] = Wrap(cell_[0][i] + ox + k, n0);
            if (dim == 2) {
              for (int ky = 0; ky < w; ++ky) {
                const int64_t row = Wrap(cell_[1][i] + oy + ky, n1);
                if (row < a || row >= b) continue;
                const std::complex<T> vy = v * wy[ky];
                std::complex<T>* g = grid + row * row_pitch;
                for (int k = 0; k < w; ++k) g[ix[k]] += vy * wx[k];
              }
            } else {
              const int oz = KernelWeights(kp, frac_[2][i], wz);
              for (int k = 0; k < w; ++k) iy[k] = Wrap(cell_[1][i] + oy + k, n1);
              for (int kz = 0; kz < w; ++kz) {
                const int64_t plane = Wrap(cell_[2][i] + oz + kz, nslow);
                if (plane < a || plane >= b) continue;
                const std::complex<T> vz = v * wz[kz];
                for (int ky = 0; ky < w; ++ky) {
                  const std::complex<T> vyz = vz * wy[ky];
                  std::complex<T>* g = grid + plane * plane_pitch + iy[ky] * row_pitch;
                  for (int k = 0; k < w; ++k) g[ix[k]] += vyz * wx[k];
                }
              }
            }
          }
        }
      },
      2 * w);
}

template <typename T>
void CpuNufftPlan<T>::Interpolate(std::complex<T>* c) const {
  const EsKernelParams& kp = setup_.kernel;
  const int w = kp.width, dim = setup_.dim;
  const int64_t n0 = setup_.fine[0], n1 = setup_.fine[1], n2 = setup_.fine[2];
  const int64_t row_pitch = layout().row_pitch, plane_pitch = layout().plane_pitch;
  const std::complex<T>* grid = grid_.get();
  ParallelForDynamic(m_, 4096, [&](int64_t begin, int64_t end, int) {
    T wx[kMaxKernelWidth], wy[kMaxKernelWidth], wz[kMaxKernelWidth];
    int64_t ix[kMaxKernelWidth], iy[kMaxKernelWidth];
    for (int64_t i = begin; i < end; ++i) {
      const int ox = KernelWeights(kp, frac_[0][i], wx);
      const int oy = KernelWeights(kp, frac_[1][i], wy);
      for (int k = 0; k < w; ++k) ix[k] = Wrap(cell_[0][i] + ox + k, n0);
      for (int k = 0; k < w; ++k) iy[k] = Wrap(cell_[1][i] + oy + k, n1);
      std::complex<T> sum(0, 0);
      if (dim == 2) {
        for (int ky = 0; ky < w; ++ky) {
          const std::complex<T>* g = grid + iy[ky] * row_pitch;
          std::complex<T> s(0, 0);
          for (int k = 0; k < w; ++k) s += g[ix[k]] * wx[k];
          sum += s * wy[ky];
        }
      } else {
        const int oz = KernelWeights(kp, frac_[2][i], wz);
        for (int kz = 0; kz < w; ++kz) {
          const int64_t plane = Wrap(cell_[2][i] + oz + kz, n2);
          std::complex<T> sz(0, 0);
          for (int ky = 0; ky < w; ++ky) {
            const std::complex<T>* g = grid + plane * plane_pitch + iy[ky] * row_pitch;
            std::complex<T> s(0, 0);
            for (int k = 0; k < w; ++k) s += g[ix[k]] * wx[k];
            sz += s * wy[ky];
          }
          sum += sz * wz[kz];
        }
      }
      c[perm_[i]] = sum;
    }
  });
}

template <typename T>
void CpuNufftPlan<T>::Deconvolve(std::complex<T>* f) const {
  const auto& n = setup_.modes;
  const FftwGrid& fine = layout();
  const auto& d = setup_.deconv;
  const auto& fi = setup_.fine_index;
  const std::complex<T>* grid = grid_.get();
  ParallelFor(n[1] * n[2], [&](int64_t begin, int64_t end, int) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t i1 = row % n[1], i2 = row / n[1];
      const double d12 = d[1][i1] * d[2][i2];
      const std::complex<T>* g = grid + fine.Index(0, fi[1][i1], fi[2][i2]);
      std::complex<T>* out = f + row * n[0];
      for (int64_t i0 = 0; i0 < n[0]; ++i0) out[i0] = g[fi[0][i0]] * static_cast<T>(d12 * d[0][i0]);
    }
  });
}

template <typename T>
void CpuNufftPlan<T>::Precorrect(const std::complex<T>* f) {
  const auto& n = setup_.modes;
  const FftwGrid& fine = layout();
  const auto& d = setup_.deconv;
  const auto& fi = setup_.fine_index;
  std::complex<T>* grid = grid_.get();
  std::fill(grid, grid + fine.elements(), std::complex<T>(0, 0));
  ParallelFor(n[1] * n[2], [&](int64_t begin, int64_t end, int) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t i1 = row % n[1], i2 = row / n[1];
      const double d12 = d[1][i1] * d[2][i2];
      std::complex<T>* g = grid + fine.Index(0, fi[1][i1], fi[2][i2]);
      const std::complex<T>* in = f + row * n[0];
      for (int64_t i0 = 0; i0 < n[0]; ++i0) g[fi[0][i0]] = in[i0] * static_cast<T>(d12 * d[0][i0]);
    }
  });
}

template <typename T>
absl::Status CpuNufftPlan<T>::Execute(std::complex<T>* c, std::complex<T>* f) {
  if ((c == nullptr && m_ > 0) || f == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("nufft: Execute got a null ", f == nullptr ? "f" : "c"));
  }
  const int64_t nmodes = setup_.num_modes();
  for (int t = 0; t < setup_.options.ntransforms; ++t) {
    if (setup_.type == NufftType::kType1) {
      Spread(c + t * m_);
      fft_->Execute(grid_.get());
      Deconvolve(f + t * nmodes);
    } else {
      Precorrect(f + t * nmodes);
      fft_->Execute(grid_.get());
      Interpolate(c + t * m_);
    }
  }
  return absl::OkStatus();
}

}  // namespace

template <typename T>
absl::StatusOr<std::unique_ptr<NufftPlan<T>>> MakeCpuNufftPlan(NufftSetup setup) {
  return CpuNufftPlan<T>::Create(std::move(setup));
}

template absl::StatusOr<std::unique_ptr<NufftPlan<float>>> MakeCpuNufftPlan<float>(NufftSetup);
template absl::StatusOr<std::unique_ptr<NufftPlan<double>>> MakeCpuNufftPlan<double>(NufftSetup);

}  // namespace nufft
}  // namespace recon
}  // namespace tessera

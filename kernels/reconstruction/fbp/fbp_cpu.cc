// CPU backend of FBP/FDK: FFTW row filtering and the voxel-driven back
// projection reference, threaded with common/parallel.
#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/fftw_planner_lock.h"
#include "common/parallel.h"
#include "kernels/reconstruction/fbp/fbp_backend.h"

namespace tessera {
namespace recon {
namespace fbp {
namespace {

struct FftwFree {
  void operator()(float* p) const { fftwf_free(p); }
};
using FftwBuffer = std::unique_ptr<float[], FftwFree>;

FftwBuffer AllocFftw(int64_t floats) {
  return FftwBuffer(static_cast<float*>(fftwf_malloc(sizeof(float) * static_cast<size_t>(floats))));
}

// In-place r2c / c2r plans of one padded row, executed on per-thread buffers
// with FFTW's new-array interface (same size, alignment and in-placeness).
class RowFilter {
 public:
  // hilbert: empty, or S[k] of the Hilbert kernel whose DFT is -i S[k]
  // (filter.h HilbertSpectrum), for RunPair.
  static absl::StatusOr<std::unique_ptr<RowFilter>> Create(int64_t cols, int64_t padded, std::vector<float> spectrum,
                                                           std::vector<float> hilbert = {}) {
    std::unique_ptr<RowFilter> f(new RowFilter(cols, padded, std::move(spectrum)));
    f->hilbert_ = std::move(hilbert);
    FftwBuffer probe = AllocFftw(padded + 2);
    if (probe == nullptr) return absl::ResourceExhaustedError("fbp: fftwf_malloc failed");
    std::lock_guard<std::mutex> lock(FftwPlannerMutex());
    const int n = static_cast<int>(padded);
    f->forward_ = fftwf_plan_dft_r2c_1d(n, probe.get(), reinterpret_cast<fftwf_complex*>(probe.get()), FFTW_ESTIMATE);
    f->inverse_ = fftwf_plan_dft_c2r_1d(n, reinterpret_cast<fftwf_complex*>(probe.get()), probe.get(), FFTW_ESTIMATE);
    if (f->forward_ == nullptr || f->inverse_ == nullptr) {
      return absl::InternalError(absl::StrCat("fbp: FFTW could not plan a length-", padded, " transform"));
    }
    return f;
  }

  ~RowFilter() {
    std::lock_guard<std::mutex> lock(FftwPlannerMutex());
    if (forward_ != nullptr) fftwf_destroy_plan(forward_);
    if (inverse_ != nullptr) fftwf_destroy_plan(inverse_);
  }

  // For each row: load(row, buf) writes cols samples, the rest is zeroed,
  // the row is filtered and store(row, buf) reads cols samples.
  absl::Status Run(int64_t num_rows, const std::function<void(int64_t, float*)>& load,
                   const std::function<void(int64_t, const float*)>& store) const {
    bool alloc_failed = false;
    std::mutex mu;
    ParallelFor(
        num_rows,
        [&](int64_t begin, int64_t end, int) {
          FftwBuffer buf = AllocFftw(padded_ + 2);
          if (buf == nullptr) {
            std::lock_guard<std::mutex> lock(mu);
            alloc_failed = true;
            return;
          }
          float* b = buf.get();
          fftwf_complex* z = reinterpret_cast<fftwf_complex*>(b);
          for (int64_t row = begin; row < end; ++row) {
            load(row, b);
            std::fill(b + cols_, b + padded_ + 2, 0.0f);
            fftwf_execute_dft_r2c(forward_, b, z);
            for (size_t k = 0; k < spectrum_.size(); ++k) {
              z[k][0] *= spectrum_[k];
              z[k][1] *= spectrum_[k];
            }
            fftwf_execute_dft_c2r(inverse_, z, b);
            store(row, b);
          }
        },
        /*min_per_chunk=*/8);
    if (alloc_failed) return absl::ResourceExhaustedError("fbp: fftwf_malloc failed");
    return absl::OkStatus();
  }

  // The derivative method's rows: load(row, x, y) writes cols samples of two
  // rows; store(row, buf) reads cols samples of Hilbert(x) + Ramp(y).
  absl::Status RunPair(int64_t num_rows, const std::function<void(int64_t, float*, float*)>& load,
                       const std::function<void(int64_t, const float*)>& store) const {
    bool alloc_failed = false;
    std::mutex mu;
    ParallelFor(
        num_rows,
        [&](int64_t begin, int64_t end, int) {
          FftwBuffer bx = AllocFftw(padded_ + 2), by = AllocFftw(padded_ + 2);
          if (bx == nullptr || by == nullptr) {
            std::lock_guard<std::mutex> lock(mu);
            alloc_failed = true;
            return;
          }
          float* x = bx.get();
          float* y = by.get();
          fftwf_complex* zx = reinterpret_cast<fftwf_complex*>(x);
          fftwf_complex* zy = reinterpret_cast<fftwf_complex*>(y);
          for (int64_t row = begin; row < end; ++row) {
            load(row, x, y);
            std::fill(x + cols_, x + padded_ + 2, 0.0f);
            std::fill(y + cols_, y + padded_ + 2, 0.0f);
            fftwf_execute_dft_r2c(forward_, x, zx);
            fftwf_execute_dft_r2c(forward_, y, zy);
            for (size_t k = 0; k < spectrum_.size(); ++k) {
              // X (-i S) + Y R: (re + i im) (-i S) = S im - i S re.
              const float re = hilbert_[k] * zx[k][1] + spectrum_[k] * zy[k][0];
              const float im = -hilbert_[k] * zx[k][0] + spectrum_[k] * zy[k][1];
              zx[k][0] = re;
              zx[k][1] = im;
            }
            fftwf_execute_dft_c2r(inverse_, zx, x);
            store(row, x);
          }
        },
        /*min_per_chunk=*/8);
    if (alloc_failed) return absl::ResourceExhaustedError("fbp: fftwf_malloc failed");
    return absl::OkStatus();
  }

 private:
  RowFilter(int64_t cols, int64_t padded, std::vector<float> spectrum)
      : cols_(cols), padded_(padded), spectrum_(std::move(spectrum)) {}
  int64_t cols_, padded_;
  std::vector<float> spectrum_;
  fftwf_plan forward_ = nullptr;
  fftwf_plan inverse_ = nullptr;
  std::vector<float> hilbert_;
};

class CpuBackend : public FbpBackend {
 public:
  CpuBackend(FbpBackendConfig config, std::unique_ptr<RowFilter> filter)
      : c_(std::move(config)),
        filter_(std::move(filter)),
        cols_(c_.geometry.projection.det_cols),
        rows_(c_.window_rows),
        in_cols_(c_.setup.input_cols),
        col0_(c_.setup.col0),
        view_size_(PaddedViewSize(cols_, rows_)),
        store_(static_cast<size_t>(c_.batch * view_size_), 0.0f) {}

  absl::Status FilterBatch(const float* views, int64_t view_stride, int64_t v0, int64_t n, int64_t row0) override {
    if (!c_.setup.derivative.empty()) return FilterDerivative(views, view_stride, v0, n);
    const float oc = 0.5f * static_cast<float>(cols_ - 1);
    const float orow = 0.5f * static_cast<float>(c_.geometry.projection.det_rows - 1);
    return filter_->Run(
        n * rows_,
        [&](int64_t row, float* buf) {
          const int64_t t = row / rows_, r = row % rows_;
          const PreWeightView& w = c_.setup.pre[v0 + t];
          const float* src = views + t * view_stride + r * in_cols_;
          const float rb = static_cast<float>(r + row0) - orow;
          for (int64_t col = 0; col < cols_; ++col) {
            const bool measured = col >= col0_ && col < col0_ + in_cols_;  // else a widening zero
            buf[col] = measured ? src[col - col0_] * PreWeight(w, static_cast<float>(col) - oc, rb) : 0.0f;
          }
          if (!c_.setup.column_weights.empty()) {
            const float* cw = c_.setup.column_weights.data() + (v0 + t) * cols_;
            for (int64_t col = 0; col < cols_; ++col) buf[col] *= cw[col];
          }
        },
        [&](int64_t row, const float* buf) {
          const int64_t t = row / rows_, r = row % rows_;
          std::memcpy(store_.data() + t * view_size_ + (r + 1) * (cols_ + 2) + 1, buf, sizeof(float) * cols_);
        });
  }

  absl::Status ExportBatch(int64_t v0, int64_t n, float* filtered) override {
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t r = 0; r < rows_; ++r) {
        std::memcpy(filtered + ((v0 + t) * rows_ + r) * in_cols_,
                    store_.data() + t * view_size_ + (r + 1) * (cols_ + 2) + 1 + col0_, sizeof(float) * in_cols_);
      }
    }
    return absl::OkStatus();
  }

  absl::Status BackprojectBatch(int64_t v0, int64_t n, const FbpWindow& window, bool accumulate,
                                float* volume) override {
    cpu::Backproject(c_.geometry.volume, cols_, rows_, c_.setup.back.data() + v0, n, store_.data(), accumulate, volume,
                     window, /*linear_weight=*/!c_.setup.derivative.empty());
    return absl::OkStatus();
  }

  absl::Status Synchronize() override { return absl::OkStatus(); }

  // The host sinogram is read in place.
  absl::StatusOr<const float*> StageViews(const float* sinogram, int64_t v0, int64_t /*n*/, int64_t row0,
                                          int64_t* view_stride) override {
    *view_stride = c_.geometry.projection.det_rows * in_cols_;
    return sinogram + v0 * *view_stride + row0 * in_cols_;
  }
  absl::StatusOr<float*> SlabVolume(float* host_slab, int64_t /*planes*/) override { return host_slab; }
  absl::Status FinishSlab(float* /*host_slab*/, int64_t /*planes*/) override { return absl::OkStatus(); }

 private:
  // Views [v0, v0 + n) by the derivative method (short_scan_derivative.h):
  // `views` is the whole sinogram (each view reads its neighbours), the two
  // rows of DerivativeTerms filtered, then the weights after the filter.
  absl::Status FilterDerivative(const float* views, int64_t view_stride, int64_t v0, int64_t n) {
    return filter_->RunPair(
        n * rows_,
        [&](int64_t row, float* x, float* y) {
          const int64_t t = row / rows_, r = row % rows_;
          const DerivativeView& w = c_.setup.derivative[v0 + t];
          const float* g = views + (v0 + t) * view_stride;
          const float* gp = views + w.view_prev * view_stride;
          const float* gn = views + w.view_next * view_stride;
          for (int64_t k = 0; k < cols_; ++k) DerivativeTerms(w, gp, g, gn, cols_, rows_, k, r, x + k, y + k);
        },
        [&](int64_t row, const float* buf) {
          const int64_t t = row / rows_, r = row % rows_;
          const float* pw = c_.setup.post_weights.data() + (v0 + t) * cols_;
          float* out = store_.data() + t * view_size_ + (r + 1) * (cols_ + 2) + 1;
          for (int64_t k = 0; k < cols_; ++k) out[k] = buf[k] * pw[k];
        });
  }

  FbpBackendConfig c_;
  std::unique_ptr<RowFilter> filter_;
  int64_t cols_, rows_, in_cols_, col0_, view_size_;
  std::vector<float> store_;  // batch x padded views; borders stay zero
};

}  // namespace

absl::StatusOr<std::unique_ptr<FbpBackend>> MakeCpuBackend(FbpBackendConfig config) {
  auto filter = RowFilter::Create(config.geometry.projection.det_cols, config.padded, config.spectrum, config.hilbert);
  if (!filter.ok()) return filter.status();
  return std::unique_ptr<FbpBackend>(new CpuBackend(std::move(config), std::move(*filter)));
}

namespace cpu {

absl::Status FilterRows(FilterKind kind, double cutoff, const float* in, float* out, int64_t num_rows, int64_t cols) {
  if (absl::Status s = ValidateCutoff(cutoff); !s.ok()) return s;
  if (num_rows < 0 || cols <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("fbp: bad row shape ", num_rows, " x ", cols));
  }
  const int64_t padded = PaddedLength(cols);
  auto filter = RowFilter::Create(cols, padded, FilterSpectrum(kind, cutoff, padded));
  if (!filter.ok()) return filter.status();
  return (*filter)->Run(
      num_rows, [&](int64_t row, float* buf) { std::memcpy(buf, in + row * cols, sizeof(float) * cols); },
      [&](int64_t row, const float* buf) { std::memcpy(out + row * cols, buf, sizeof(float) * cols); });
}

namespace {

// A sample times the back projection weight: 1 / D^2 (FDK, evaluated as
// before: (q inv) inv), or 1 / D (the derivative short-scan method,
// short_scan_derivative.h).
template <bool kLinear>
inline float Weighted(float q, float inv) {
  return kLinear ? q * inv : q * inv * inv;
}

// acc[i] += SamplePadded(view, pitch, (a_step i + a0) inv, b0 inv) inv^2 for
// i < nx: SamplePadded's arithmetic with its row interpolation hoisted (the
// same arithmetic, so the same sums bit for bit).
template <bool kLinear>
void AddParallelLine(const float* view, int64_t pitch, float a_step, float a0, float b0, float inv, float row0,
                     float cols, float rows, int64_t nx, float* acc) {
  const float b = b0 * inv - row0;  // exact: row0 is a whole row at or below b (fdk_chunking.h)
  if (!(b > -1.0f && b < rows)) return;
  const float fb = floorf(b), wb = b - fb;
  const float* top = view + (static_cast<int64_t>(fb) + 1) * pitch + 1;
  const float* bottom = top + pitch;
  for (int64_t i = 0; i < nx; ++i) {
    const float a = (a_step * static_cast<float>(i) + a0) * inv;
    if (!(a > -1.0f && a < cols)) continue;
    const float fa = floorf(a), wa = a - fa;
    const int64_t c = static_cast<int64_t>(fa);
    const float t = top[c] + wa * (top[c + 1] - top[c]);
    const float u = wb == 0.0f ? t : t + wb * ((bottom[c] + wa * (bottom[c + 1] - bottom[c])) - t);
    acc[i] += Weighted<kLinear>(u, inv);
  }
}

template <bool kLinear>
void BackprojectWeighted(const VolumeGeometry& vg, int64_t cols, int64_t rows, const BackprojectView* views,
                         int64_t num_views, const float* padded, bool accumulate, float* volume,
                         const FbpWindow& window) {
  const int64_t nx = vg.nx, ny = vg.ny, nz = window.nz < 0 ? vg.nz : window.nz;
  const float row0 = static_cast<float>(window.row0);
  const int64_t view_size = PaddedViewSize(cols, rows), pitch = cols + 2;
  const float fcols = static_cast<float>(cols), frows = static_cast<float>(rows);
  ParallelFor(
      ny * nz,
      [&](int64_t begin, int64_t end, int) {
        std::vector<float> acc(nx);
        for (int64_t line = begin; line < end; ++line) {
          const float fj = static_cast<float>(line % ny), fk = static_cast<float>(window.k0 + line / ny);
          std::fill(acc.begin(), acc.end(), 0.0f);
          for (int64_t t = 0; t < num_views; ++t) {
            const BackprojectView& w = views[t];
            const float* view = padded + t * view_size;
            // The (j, k) part of each affine map, then one step per voxel in x.
            const float a0 = w.a[1] * fj + w.a[2] * fk + w.a[3];
            const float b0 = w.b[1] * fj + w.b[2] * fk + w.b[3];
            const float d0 = w.d[1] * fj + w.d[2] * fk + w.d[3];
            if (w.d[0] == 0.0f && w.b[0] == 0.0f) {
              // Parallel rays along a line of x (every parallel-beam view; 2-D
              // fan views too when x is the ray-invariant axis): the weight and
              // the detector row are the same for the whole line, so the
              // bilinear sample is a linear one along the detector row and the
              // division happens once.
              AddParallelLine<kLinear>(view, pitch, w.a[0], a0, b0, 1.0f / d0, row0, fcols, frows, nx, acc.data());
              continue;
            }
            for (int64_t i = 0; i < nx; ++i) {
              const float fi = static_cast<float>(i);
              const float inv = 1.0f / (w.d[0] * fi + d0);
              const float a = (w.a[0] * fi + a0) * inv, b = (w.b[0] * fi + b0) * inv - row0;
              acc[i] += Weighted<kLinear>(SamplePadded(view, pitch, a, b, fcols, frows), inv);
            }
          }
          float* out = volume + line * nx;
          for (int64_t i = 0; i < nx; ++i) out[i] = accumulate ? out[i] + acc[i] : acc[i];
        }
      },
      /*min_per_chunk=*/4);
}

}  // namespace

void Backproject(const VolumeGeometry& vg, int64_t cols, int64_t rows, const BackprojectView* views,
                 int64_t num_views, const float* padded, bool accumulate, float* volume, const FbpWindow& window,
                 bool linear_weight) {
  if (linear_weight) {
    BackprojectWeighted<true>(vg, cols, rows, views, num_views, padded, accumulate, volume, window);
  } else {
    BackprojectWeighted<false>(vg, cols, rows, views, num_views, padded, accumulate, volume, window);
  }
}

}  // namespace cpu

}  // namespace fbp
}  // namespace recon
}  // namespace tessera

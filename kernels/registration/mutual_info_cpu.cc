// CPU reference for MattesMutualInformation (also the CPU backend): the
// definition in mutual_info.h evaluated in double, in the three steps of
// mutual_info_cpu_steps.h. Voxel ranges are split over threads; each thread
// keeps its own B x B histogram of fixed-point integers (issue 39: every
// Parzen product rounded to a multiple of 2^-bits, then summed exactly), so
// the histogram is the same whatever the split over threads or ranks. The
// per-voxel loops have AVX2 / AVX-512 paths (mutual_info_cpu_rows.h, issue
// 38) that give the same integers and floats; the loops here are the
// reference and take the voxels the vector paths leave.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/registration/mutual_info.h"
#include "kernels/registration/mutual_info_cpu_rows.h"
#include "kernels/registration/mutual_info_cpu_steps.h"
#include "kernels/registration/mutual_info_parzen.h"
#include "kernels/registration/reg_parallel.h"

namespace tessera {
namespace registration {
namespace {

using mi_internal::BinCoord;
using mi_internal::BoxBin;
using mi_internal::CubicWeights;
using mi_internal::CubicWeightsAndDerivatives;

constexpr int64_t kMinVoxelsPerThread = 1 << 16;

struct Mapping {
  double f_lo, f_inv, w_lo, w_inv, span;
  int bins;
  bool box;
};

// Fixed-image window: up to 4 bins from `start`.
inline int FixedWindow(const Mapping& m, double v, double w[4], int* taps) {
  bool inside;
  const double t = BinCoord(v, m.f_lo, m.f_inv, m.span, &inside);
  if (m.box) {
    w[0] = 1.0;
    *taps = 1;
    return BoxBin(t);
  }
  *taps = 4;
  return CubicWeights(t, w);
}

mi_rows::Mapping RowMapping(const Mapping& m, double scale) {
  return {m.f_lo, m.f_inv, m.w_lo, m.w_inv, m.span, m.bins, scale, m.box};
}

Mapping MappingOf(const MattesMiOptions& options) {
  Mapping m;
  m.f_lo = options.fixed_min;
  m.f_inv = 1.0 / (static_cast<double>(options.fixed_max) - options.fixed_min);
  m.w_lo = options.warped_min;
  m.w_inv = 1.0 / (static_cast<double>(options.warped_max) - options.warped_min);
  m.span = options.bins - 4;
  m.bins = options.bins;
  m.box = options.fixed_kernel == ParzenKernel::kBox;
  return m;
}

}  // namespace

namespace mi_cpu {

int HistogramFixedPointBits(int64_t total_voxels) {
  // Each voxel adds at most 1 (a product of two Parzen weights, each <= 1)
  // to a bin, so every bin stays below total * 2^bits <= 2^62.
  int log2_total = 0;
  while (log2_total < 62 && (int64_t{1} << log2_total) < total_voxels) ++log2_total;
  return std::max(0, std::min(52, 62 - log2_total));
}

std::vector<int64_t> JointHistogramFixedOnPath(SamplerCpuPath path, const float* F, const float* W, const uint8_t* M,
                                               int64_t n, const MattesMiOptions& options, int bits) {
  const Mapping m = MappingOf(options);
  const int B = options.bins;
  const double scale = std::ldexp(1.0, bits);
  path = ResolveSamplerCpuPath(path);
  const mi_rows::Mapping rm = RowMapping(m, scale);
  const int chunks = reg_internal::NumChunks(n, kMinVoxelsPerThread);
  std::vector<std::vector<int64_t>> partial(std::max(chunks, 1), std::vector<int64_t>(B * B, 0));
  reg_internal::ParallelChunks(n, kMinVoxelsPerThread, [&](int c, int64_t begin, int64_t end) {
    int64_t* h = partial[c].data();
    // The vector path's voxels, then the rest here (the reference).
    for (int64_t k = mi_rows::HistogramRange(path, rm, F, W, M, begin, end, h); k < end; ++k) {
      if (M != nullptr && M[k] == 0) continue;
      double wf[4], ww[4];
      int taps;
      const int a0 = FixedWindow(m, F[k], wf, &taps);
      bool inside;
      const int b0 = CubicWeights(BinCoord<double>(W[k], m.w_lo, m.w_inv, m.span, &inside), ww);
      for (int a = 0; a < taps; ++a) {
        int64_t* row = h + (a0 + a) * B + b0;
        // Round to nearest (the weights are >= 0; a rounding-negative product
        // becomes 0): the same integer for a voxel wherever it is summed.
        for (int b = 0; b < 4; ++b) row[b] += static_cast<int64_t>(std::max(0.0, wf[a] * ww[b]) * scale + 0.5);
      }
    }
  });
  // Integer sums: exact in any order.
  std::vector<int64_t> H(B * B, 0);
  for (const auto& p : partial) {
    for (int e = 0; e < B * B; ++e) H[e] += p[e];
  }
  return H;
}

std::vector<int64_t> JointHistogramFixed(const float* F, const float* W, const uint8_t* M, int64_t n,
                                         const MattesMiOptions& options, int bits) {
  return JointHistogramFixedOnPath(SamplerCpuPath::kAuto, F, W, M, n, options, bits);
}

std::vector<double> HistogramFromFixed(const std::vector<int64_t>& fixed, int bits) {
  std::vector<double> H(fixed.size());
  for (size_t e = 0; e < fixed.size(); ++e) H[e] = std::ldexp(static_cast<double>(fixed[e]), -bits);
  return H;
}

std::vector<double> JointHistogram(const float* F, const float* W, const uint8_t* M, int64_t n,
                                   const MattesMiOptions& options) {
  const int bits = HistogramFixedPointBits(n);
  return HistogramFromFixed(JointHistogramFixed(F, W, M, n, options, bits), bits);
}

MattesMiResult Finalize(const std::vector<double>& H, const MattesMiOptions& options, std::vector<double>* table) {
  const Mapping m = MappingOf(options);
  const int B = options.bins;
  double total = 0;
  for (double h : H) total += h;
  MattesMiResult result;
  result.total_weight = total;
  if (table != nullptr) table->assign(B * B, 0.0);
  if (total > 0) {
    std::vector<double> pf(B, 0.0), pw(B, 0.0);
    for (int a = 0; a < B; ++a) {
      for (int b = 0; b < B; ++b) {
        pf[a] += H[a * B + b] / total;
        pw[b] += H[a * B + b] / total;
      }
    }
    const double dtdw = m.span * m.w_inv;
    double mi = 0;
    for (int a = 0; a < B; ++a) {
      for (int b = 0; b < B; ++b) {
        const double p = H[a * B + b] / total;
        if (p <= 0) continue;
        const double g = std::log(p / (pf[a] * pw[b]));
        mi += p * g;
        if (table != nullptr) (*table)[a * B + b] = -g * dtdw / total;
      }
    }
    result.mutual_information = mi;
    result.loss = -mi;
  }
  return result;
}

void GradientFromTableOnPath(SamplerCpuPath path, const float* F, const float* W, const uint8_t* M, int64_t n,
                             const MattesMiOptions& options, const std::vector<double>& table, double total,
                             float* out) {
  const Mapping m = MappingOf(options);
  const int B = options.bins;
  path = total <= 0 ? SamplerCpuPath::kScalar : ResolveSamplerCpuPath(path);
  const mi_rows::Mapping rm = RowMapping(m, 0.0);
  // Recomputes the windows per voxel (no per-voxel storage).
  reg_internal::ParallelFor(n, kMinVoxelsPerThread, [&](int64_t begin, int64_t end) {
    for (int64_t k = mi_rows::GradientRange(path, rm, F, W, M, table.data(), begin, end, out); k < end; ++k) {
      if (total <= 0 || (M != nullptr && M[k] == 0)) {
        out[k] = 0.f;
        continue;
      }
      bool inside;
      const double t = BinCoord<double>(W[k], m.w_lo, m.w_inv, m.span, &inside);
      if (!inside) {
        out[k] = 0.f;
        continue;
      }
      double wf[4], ww[4], dw[4];
      int taps;
      const int a0 = FixedWindow(m, F[k], wf, &taps);
      const int b0 = CubicWeightsAndDerivatives(t, ww, dw);
      double g = 0;
      for (int a = 0; a < taps; ++a) {
        const double* row = table.data() + (a0 + a) * B + b0;
        double s = 0;
        for (int b = 0; b < 4; ++b) s += row[b] * dw[b];
        g += wf[a] * s;
      }
      out[k] = static_cast<float>(g);
    }
  });
}

void GradientFromTable(const float* F, const float* W, const uint8_t* M, int64_t n, const MattesMiOptions& options,
                       const std::vector<double>& table, double total, float* out) {
  GradientFromTableOnPath(SamplerCpuPath::kAuto, F, W, M, n, options, table, total, out);
}

}  // namespace mi_cpu

MattesMiResult MattesMutualInformationCpu(const NDArray& fixed, const NDArray& warped, const NDArray* mask,
                                          const MattesMiOptions& options, NDArray* grad) {
  const float* F = fixed.data<float>();
  const float* W = warped.data<float>();
  const uint8_t* M = mask != nullptr ? mask->data<uint8_t>() : nullptr;
  const int64_t n = fixed.num_elements();
  const std::vector<double> H = mi_cpu::JointHistogram(F, W, M, n, options);
  std::vector<double> table;
  MattesMiResult result = mi_cpu::Finalize(H, options, grad != nullptr ? &table : nullptr);
  if (grad != nullptr) mi_cpu::GradientFromTable(F, W, M, n, options, table, result.total_weight, grad->data<float>());
  return result;
}

}  // namespace registration
}  // namespace tessera

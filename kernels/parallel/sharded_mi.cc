// Sharded Mattes MI on the CPU: mutual_info.h's definition with the joint
// histogram as the one quantity that crosses ranks (FFDP's weighted
// all-reduce: P = sum_h (N_h / N) H_h / N_h = sum_h H_h / N). The Parzen
// windows are the kernels' own (mutual_info_parzen.h); the finalize and the
// gradient contraction follow mutual_info_cpu.cc step for step, which keeps
// them private, so they are restated here over the global histogram.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status.h"
#include "kernels/parallel/sharded_internal.h"
#include "kernels/parallel/sharded_ops.h"
#include "kernels/registration/mutual_info_parzen.h"

namespace tessera {
namespace parallel {
namespace {

using mi_internal::BinCoord;
using mi_internal::BoxBin;
using mi_internal::CubicWeights;
using mi_internal::CubicWeightsAndDerivatives;
using registration::MattesMiOptions;
using registration::MattesMiResult;
using registration::ParzenKernel;

constexpr int64_t kMinVoxelsPerThread = 1 << 16;

struct Mapping {
  double f_lo, f_inv, w_lo, w_inv, span;
  int bins;
  bool box;
};

int FixedWindow(const Mapping& m, double v, double w[4], int* taps) {
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

absl::Status CheckOptions(const MattesMiOptions& o) {
  if (o.bins < registration::kMattesMiMinBins || o.bins > registration::kMattesMiMaxBins) {
    return absl::InvalidArgumentError(absl::StrCat("bins must be in [", registration::kMattesMiMinBins, ", ",
                                                   registration::kMattesMiMaxBins, "], got ", o.bins));
  }
  if (!(o.fixed_max > o.fixed_min)) return absl::InvalidArgumentError("fixed_max must exceed fixed_min");
  if (!(o.warped_max > o.warped_min)) return absl::InvalidArgumentError("warped_max must exceed warped_min");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MattesMiResult> ShardedMattesMi(Communicator& comm, const SlabLayout& layout, const NDArray& fixed,
                                               const NDArray& warped, const NDArray* mask,
                                               const MattesMiOptions& options, NDArray* grad, const Stream& stream) {
  TESSERA_RETURN_IF_ERROR(CheckOptions(options));
  TESSERA_RETURN_IF_ERROR(sharded_internal::CheckLocal(fixed, layout, 1, stream, "fixed"));
  TESSERA_RETURN_IF_ERROR(sharded_internal::CheckLocal(warped, layout, 1, stream, "warped"));
  if (grad != nullptr) TESSERA_RETURN_IF_ERROR(sharded_internal::CheckLocal(*grad, layout, 1, stream, "grad"));
  if (mask != nullptr && (mask->dtype() != DType::kUInt8 || mask->shape() != layout.LocalShape(1))) {
    return absl::InvalidArgumentError(absl::StrCat("mask must be uint8 of shape ", ShapeToString(layout.LocalShape(1)),
                                                   ", got ", ShapeToString(mask->shape())));
  }
  if (stream.backend() != Backend::kCpu) {
    return absl::UnimplementedError("sharded MI runs on CPU streams only (no device version yet)");
  }
  const int B = options.bins;
  const int64_t off = layout.own_offset(), n = layout.own_voxels();
  const float* F = fixed.data<float>() + off;
  const float* W = warped.data<float>() + off;
  const uint8_t* M = mask != nullptr ? mask->data<uint8_t>() + off : nullptr;
  Mapping m;
  m.f_lo = options.fixed_min;
  m.f_inv = 1.0 / (static_cast<double>(options.fixed_max) - options.fixed_min);
  m.w_lo = options.warped_min;
  m.w_inv = 1.0 / (static_cast<double>(options.warped_max) - options.warped_min);
  m.span = B - 4;
  m.bins = B;
  m.box = options.fixed_kernel == ParzenKernel::kBox;

  // This rank's joint histogram (one per thread, merged in chunk order).
  const int chunks = std::max(ParallelChunks(n, kMinVoxelsPerThread), 1);
  std::vector<std::vector<double>> partial(chunks, std::vector<double>(B * B, 0.0));
  ParallelFor(
      n,
      [&](int64_t begin, int64_t end, int chunk) {
        double* h = partial[chunk].data();
        for (int64_t k = begin; k < end; ++k) {
          if (M != nullptr && M[k] == 0) continue;
          double wf[4], ww[4];
          int taps;
          const int a0 = FixedWindow(m, F[k], wf, &taps);
          bool inside;
          const int b0 = CubicWeights(BinCoord<double>(W[k], m.w_lo, m.w_inv, m.span, &inside), ww);
          for (int a = 0; a < taps; ++a) {
            double* row = h + (a0 + a) * B + b0;
            for (int b = 0; b < 4; ++b) row[b] += wf[a] * ww[b];
          }
        }
      },
      kMinVoxelsPerThread);
  std::vector<double> H(B * B, 0.0);
  for (const auto& p : partial) {
    for (int e = 0; e < B * B; ++e) H[e] += p[e];
  }
  // The only data that crosses ranks: B^2 values, independent of N.
  TESSERA_RETURN_IF_ERROR(comm.AllReduce(H.data(), H.size(), ReduceOp::kSum, stream));

  double total = 0;
  for (double h : H) total += h;
  MattesMiResult result;
  result.total_weight = total;
  std::vector<double> table(B * B, 0.0);  // T(a, b) = -G(a, b) * dt/dW / total
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
        table[a * B + b] = -g * dtdw / total;
      }
    }
    result.mutual_information = mi;
    result.loss = -mi;
  }
  if (grad == nullptr) return result;

  float* out = grad->data<float>() + off;
  ParallelFor(
      n,
      [&](int64_t begin, int64_t end, int) {
        for (int64_t k = begin; k < end; ++k) {
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
      },
      kMinVoxelsPerThread);
  return result;
}

}  // namespace parallel
}  // namespace tessera

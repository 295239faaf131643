// CUDA passes of bspline_field.h: one thread per output element, the same
// taps, weights and summation order as the CPU reference (no atomics).
#include "common/cuda_check.h"
#include "kernels/registration/bspline_field_internal.h"

namespace tessera {
namespace registration {
namespace cuda {
namespace {

constexpr int kThreads = 256;

__global__ void BsplinePassKernel(bspline_internal::Pass p, const float* __restrict__ in, float* __restrict__ out) {
  const int64_t n = p.inner * p.n_out * p.outer;
  for (int64_t e = blockIdx.x * int64_t{kThreads} + threadIdx.x; e < n; e += int64_t{gridDim.x} * kThreads) {
    const int64_t j = e % p.inner, r = e / p.inner;
    const int64_t o = r % p.n_out, outer = r / p.n_out;
    int64_t lo = 0, hi = -1;
    bspline_internal::TapRange(p, o, &lo, &hi);
    float acc = 0.f;
    for (int64_t i = lo; i <= hi; ++i) {
      const float w = bspline_internal::TapWeight(p, o, i);
      if (w == 0.f) continue;
      acc = __fadd_rn(acc, __fmul_rn(w, in[j + p.inner * (i + p.n_in * outer)]));  // no FMA, as the CPU
    }
    out[e] = acc;
  }
}

}  // namespace

absl::Status BsplinePass(const bspline_internal::Pass& pass, const float* in, float* out, const Stream& stream) {
  const int64_t n = pass.inner * pass.n_out * pass.outer;
  if (n == 0) return absl::OkStatus();
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t{65535} * 8);
  BsplinePassKernel<<<static_cast<int>(blocks), kThreads, 0, static_cast<cudaStream_t>(stream.native())>>>(pass, in,
                                                                                                         out);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("BsplinePassKernel");
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace registration
}  // namespace tessera

// CUDA evaluation of bspline_interpolation.h: one thread per position, the
// same taps as the CPU reference (BsplineAxisTaps), accumulated in double.
#include "common/cuda_check.h"
#include "kernels/registration/bspline_interpolation.h"

namespace tessera {
namespace registration {
namespace cuda {
namespace {

constexpr int kThreads = 256;

__global__ void BsplineSampleKernel(BsplineSampleArgs args, float* __restrict__ out) {
  const Dims3 d = args.image_dims;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < args.count; i += int64_t{gridDim.x} * kThreads) {
    const double x = args.positions[i], y = args.positions[args.count + i], z = args.positions[2 * args.count + i];
    if (!(InsideBuffer(x, d.nx) && InsideBuffer(y, d.ny) && InsideBuffer(z, d.nz))) {
      out[i] = args.default_value;
      continue;
    }
    const BsplineTaps tx = BsplineAxisTaps(x, d.nx), ty = BsplineAxisTaps(y, d.ny), tz = BsplineAxisTaps(z, d.nz);
    double sum = 0;
    for (int c = 0; c < 4; ++c) {
      for (int b = 0; b < 4; ++b) {
        const double wzy = tz.weight[c] * ty.weight[b];
        const float* row = args.coefficients + d.nx * (ty.index[b] + d.ny * tz.index[c]);
        for (int a = 0; a < 4; ++a) sum += wzy * tx.weight[a] * row[tx.index[a]];
      }
    }
    out[i] = static_cast<float>(sum);
  }
}

}  // namespace

absl::Status BsplineSample(const Stream& stream, const BsplineSampleArgs& args, float* out) {
  if (args.count == 0) return absl::OkStatus();
  const int64_t blocks = (args.count + kThreads - 1) / kThreads;
  const int grid = static_cast<int>(blocks < 65535 * 8 ? blocks : 65535 * 8);
  BsplineSampleKernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream.native())>>>(args, out);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("BsplineSampleKernel");
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace registration
}  // namespace tessera

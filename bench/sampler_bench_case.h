// The 1 mm Colin27-sized sampler case the registration kernel benchmarks time
// (CPU and CUDA): hash-filled image, displacement (a few hundredths of a
// voxel's normalised step) and upstream gradient, and a near-identity affine.
// Deterministic, never zeros, the same bytes in every benchmark.
#ifndef TESSERA_BENCH_SAMPLER_BENCH_CASE_H_
#define TESSERA_BENCH_SAMPLER_BENCH_CASE_H_

#include <cstdint>
#include <vector>

#include "kernels/registration/grid_sampler.h"
#include "kernels/registration/types.h"

namespace tessera::bench {

struct SamplerBenchCase {
  registration::Dims3 dims;
  std::vector<float> image, disp, grad_out;  // dims voxels; disp: 3 planar components
  std::vector<float> theta = {0.98f, 0.05f, -0.02f, 0.01f, -0.04f, 1.01f, 0.03f, -0.02f,
                              0.02f, -0.03f, 0.99f, 0.015f};

  // The moving image warped by theta and disp onto the same grid.
  registration::GridSampleArgs Args() const {
    registration::GridSampleArgs args;
    args.image = image.data();
    args.image_dims = dims;
    args.affine = theta.data();
    args.disp = disp.data();
    args.out_dims = dims;
    return args;
  }
};

inline SamplerBenchCase MakeSamplerBenchCase(registration::Dims3 d = {181, 217, 181}) {
  SamplerBenchCase c;
  c.dims = d;
  const int64_t n = d.size();
  c.image.resize(n);
  c.grad_out.resize(n);
  c.disp.resize(3 * n);
  for (int64_t v = 0; v < n; ++v) {
    const uint32_t h = static_cast<uint32_t>(v) * 2654435761u;
    c.image[v] = static_cast<float>((h >> 8) & 0xffff) / 65536.0f;
    c.grad_out[v] = static_cast<float>((h >> 12) & 0xff) / 128.0f - 1.0f;
    for (int k = 0; k < 3; ++k) c.disp[v + k * n] = 0.006f * (static_cast<float>((h >> (4 + k)) & 0xff) / 128.0f - 1.0f);
  }
  return c;
}

}  // namespace tessera::bench

#endif  // TESSERA_BENCH_SAMPLER_BENCH_CASE_H_

// The CPU smoothing's row loops (gaussian_smooth_cpu.cc: register-blocked,
// one clone per ISA level picked at load time) against a plain separable
// reference in float with the same order of operations: x, then y, then z,
// each output summing its taps in ascending order from 0. Bit for bit, on
// rows long enough for 64-voxel blocks (the last one overlapping), 16-voxel
// ones and the scalar loop, and y / z lengths that leave rows after the
// four-row blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/registration/gaussian_smooth.h"
#include "kernels/registration/reg_testing.h"

namespace tessera {
namespace registration {
namespace {

using reg_testing::HostFloat;
using reg_testing::RandomUniform;

// One axis of a planar field in place: stride between neighbours along the
// axis, n voxels along it.
void ReferencePass(std::vector<float>& v, const int64_t dims[3], int axis, const std::vector<float>& taps) {
  const int r = static_cast<int>(taps.size() / 2);
  if (r == 0) return;
  const int64_t stride = axis == 0 ? 1 : (axis == 1 ? dims[0] : dims[0] * dims[1]);
  const int64_t n = dims[axis];
  const std::vector<float> in = v;
  for (int64_t k = 0; k < dims[2]; ++k) {
    for (int64_t j = 0; j < dims[1]; ++j) {
      for (int64_t i = 0; i < dims[0]; ++i) {
        const int64_t idx = i + dims[0] * (j + dims[1] * k);
        const int64_t pos = axis == 0 ? i : (axis == 1 ? j : k);
        float acc = 0.f;
        for (int d = -r; d <= r; ++d) {
          const int64_t q = std::min<int64_t>(std::max<int64_t>(pos + d, 0), n - 1);
          acc += taps[d + r] * in[idx + (q - pos) * stride];
        }
        v[idx] = acc;
      }
    }
  }
}

void CheckSameBits(const int64_t dims[3], uint32_t seed) {
  std::mt19937 rng(seed);
  for (const std::array<double, 3>& sigma :
       {std::array<double, 3>{6.0, 1.3, 0.9}, std::array<double, 3>{0.147, 0.147, 0.147},
        std::array<double, 3>{2.5, 0.0, 1.7}, std::array<double, 3>{1.0, 6.0, 6.0}}) {
    NDArray in = RandomUniform({dims[0], dims[1], dims[2], 3}, rng, -2.f, 3.f);
    NDArray out = HostFloat(in.shape(), 0.f);
    ASSERT_TRUE(GaussianSmooth(in, &out, sigma, Stream::Cpu()).ok());
    const int64_t vox = dims[0] * dims[1] * dims[2];
    for (int c = 0; c < 3; ++c) {
      std::vector<float> ref(in.data<float>() + c * vox, in.data<float>() + (c + 1) * vox);
      for (int axis = 0; axis < 3; ++axis) ReferencePass(ref, dims, axis, GaussianTaps(sigma[axis]));
      EXPECT_EQ(std::memcmp(ref.data(), out.data<float>() + c * vox, vox * sizeof(float)), 0)
          << "dims " << dims[0] << "x" << dims[1] << "x" << dims[2] << " sigma " << sigma[0] << " component " << c;
    }
  }
}

TEST(GaussianSmoothCpuRows, SameBitsAsThePerVoxelSum) {
  // Rows of 181: blocks of 64 at 0, 64 and 117; 7 rows along y and 6 along
  // z: a four-row block and 3 / 2 rows after it.
  const int64_t brain_rows[3] = {181, 7, 6};
  CheckSameBits(brain_rows, 38);
  // Rows of 40 (16-voxel blocks, the last overlapping) and of 9 (scalar);
  // 9 and 13 rows: y / z lengths shorter than the sigma-6 radius.
  const int64_t short_rows[3] = {40, 9, 13};
  CheckSameBits(short_rows, 39);
  const int64_t shortest_rows[3] = {9, 13, 5};
  CheckSameBits(shortest_rows, 40);
}

}  // namespace
}  // namespace registration
}  // namespace tessera

// The CPU grid sampler's vector paths (grid_sampler_cpu_path.h) against its
// scalar reference on random inputs: the same floats bit for bit, including
// cells on and beyond the border, NaN positions, rows whose length is not a
// multiple of the vector width, jitter, slabs of a larger grid, dL/d[A|t],
// fp16 images, and the cases the vector paths hand to the scalar code (border
// padding's backward).
#include "kernels/registration/grid_sampler_cpu_path.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <algorithm>
#include <cstdio>
#include <vector>

#include "kernels/registration/storage16.h"
#include "kernels/registration/test_util.h"

namespace tessera {
namespace registration {
namespace {

using testing::CountDifferentBits;
using testing::kNaN;
using testing::ExpectSameBits;
using testing::RandomUniform;

struct Case {
  Dims3 image_dims{23, 19, 17};
  Dims3 out_dims{37, 21, 13};  // 37 = 2 * 16 + 5: a tail on both vector widths
  bool affine = true;
  bool disp = true;
  uint64_t jitter = 0;
  Padding padding = Padding::kZeros;
  int64_t grid_nz = 0, out_z0 = 0;
};

struct Inputs {
  std::vector<float> image, affine, disp, grad_out;
};

Inputs MakeInputs(const Case& c, uint32_t seed) {
  Inputs in;
  in.image = RandomUniform<float>(c.image_dims.size(), 0.5, 2.0, seed);
  in.affine = RandomUniform<float>(kAffineParams, -0.15, 0.15, seed + 1);
  in.affine[0] += 1;
  in.affine[5] += 1;
  in.affine[10] += 1;
  // Displacements up to 0.3 of the normalized extent: many cells cross the
  // border or leave the image.
  in.disp = RandomUniform<float>(3 * c.out_dims.size(), -0.3, 0.3, seed + 2);
  in.disp[5] = kNaN;
  in.disp[c.out_dims.size() + 77] = kNaN;
  in.grad_out = RandomUniform<float>(c.out_dims.size(), -1.0, 1.0, seed + 3);
  return in;
}

GridSampleArgs ArgsOf(const Case& c, const Inputs& in) {
  GridSampleArgs args;
  args.image = in.image.data();
  args.image_dims = c.image_dims;
  args.affine = c.affine ? in.affine.data() : nullptr;
  args.disp = c.disp ? in.disp.data() : nullptr;
  args.out_dims = c.out_dims;
  args.padding = c.padding;
  args.voxel_jitter_key = c.jitter;
  args.grid_nz = c.grid_nz;
  args.out_z0 = c.out_z0;
  // Slightly beyond [-1, 1]: the outer rows sample outside the image.
  for (int d = 0; d < 3; ++d) {
    args.grid_lo[d] = -1.08;
    args.grid_hi[d] = 1.05;
  }
  return args;
}

void CheckAllPaths(const Case& c, uint32_t seed) {
  const Inputs in = MakeInputs(c, seed);
  const GridSampleArgs args = ArgsOf(c, in);
  const int64_t n = c.out_dims.size();
  std::vector<float> ref_out(n), ref_grad(3 * n), ref_affine(kAffineParams);
  cpu::GridSampleForwardOnPath(SamplerCpuPath::kScalar, args, ref_out.data());
  GridSampleGrads grads;
  grads.grad_disp = ref_grad.data();
  cpu::GridSampleBackwardOnPath(SamplerCpuPath::kScalar, args, in.grad_out.data(), grads);
  // The reference's values are not trivial: most voxels nonzero.
  int64_t nonzero = 0;
  for (float v : ref_out) nonzero += v != 0.0f;
  EXPECT_GT(nonzero, n / 2);
  for (SamplerCpuPath path : AvailableSamplerCpuPaths()) {
    SCOPED_TRACE(SamplerCpuPathName(path));
    std::vector<float> out(n, 7.0f), grad(3 * n, 7.0f);
    cpu::GridSampleForwardOnPath(path, args, out.data());
    ExpectSameBits(ref_out, out, "forward");
    GridSampleGrads g;
    g.grad_disp = grad.data();
    cpu::GridSampleBackwardOnPath(path, args, in.grad_out.data(), g);
    ExpectSameBits(ref_grad, grad, "dL/du");
  }
}

TEST(GridSamplerCpuPathTest, ResolvesToARunnablePath) {
  const SamplerCpuPath p = ResolveSamplerCpuPath(SamplerCpuPath::kAuto);
  EXPECT_NE(p, SamplerCpuPath::kAuto);
  EXPECT_EQ(ResolveSamplerCpuPath(SamplerCpuPath::kScalar), SamplerCpuPath::kScalar);
  const std::vector<SamplerCpuPath> paths = AvailableSamplerCpuPaths();
  for (SamplerCpuPath requested : {SamplerCpuPath::kAvx2, SamplerCpuPath::kAvx512}) {
    const SamplerCpuPath resolved = ResolveSamplerCpuPath(requested);
    EXPECT_NE(std::find(paths.begin(), paths.end(), resolved), paths.end()) << SamplerCpuPathName(requested);
  }
  std::printf("sampler CPU paths: auto -> %s; %zu available\n", SamplerCpuPathName(p), paths.size());
}

TEST(GridSamplerCpuPathTest, AffineDispJitterMatchesScalar) {
  Case c;
  c.jitter = 0x9e3779b97f4a7c15ull;
  CheckAllPaths(c, 11);
}

TEST(GridSamplerCpuPathTest, EveryInputCombinationMatchesScalar) {
  for (int mask = 0; mask < 8; ++mask) {
    Case c;
    c.affine = mask & 1;
    c.disp = mask & 2;
    c.jitter = (mask & 4) ? 12345 : 0;
    SCOPED_TRACE(mask);
    CheckAllPaths(c, 100 + mask);
  }
}

TEST(GridSamplerCpuPathTest, SlabOfALargerGridMatchesScalar) {
  Case c;
  c.jitter = 77;
  c.grid_nz = 29;
  c.out_z0 = 9;
  CheckAllPaths(c, 21);
}

TEST(GridSamplerCpuPathTest, ShortRowsAndFlatImagesMatchScalar) {
  for (const auto& dims : {std::pair<Dims3, Dims3>{{5, 4, 3}, {7, 6, 5}}, {{16, 9, 2}, {16, 5, 4}},
                           {{30, 1, 8}, {33, 3, 3}}}) {
    Case c;
    c.image_dims = dims.first;
    c.out_dims = dims.second;
    c.jitter = 3;
    CheckAllPaths(c, 31);
  }
}

TEST(GridSamplerCpuPathTest, BorderPaddingMatchesScalar) {
  // The forward clamps on the vector paths; the backward runs the scalar code.
  for (int mask = 0; mask < 4; ++mask) {
    Case c;
    c.padding = Padding::kBorder;
    c.affine = mask & 1;
    c.jitter = (mask & 2) ? 99 : 0;
    SCOPED_TRACE(mask);
    CheckAllPaths(c, 41 + mask);
  }
}

// dL/d[A|t] (the linear stages' gradient), with and without dL/du, jitter
// and a field: the scalar code's double sums bit for bit.
TEST(GridSamplerCpuPathTest, AffineGradientMatchesScalar) {
  for (int mask = 0; mask < 8; ++mask) {
    Case z;
    z.disp = mask & 1;
    z.jitter = (mask & 2) ? 4242 : 0;
    const bool with_disp_grad = mask & 4;
    SCOPED_TRACE(mask);
    const Inputs in = MakeInputs(z, 51 + mask);
    const GridSampleArgs args = ArgsOf(z, in);
    const int64_t n = z.out_dims.size();
    std::vector<float> ref_grad(3 * n), ref_affine(kAffineParams);
    cpu::GridSampleBackwardOnPath(
        SamplerCpuPath::kScalar, args, in.grad_out.data(),
        GridSampleGrads{with_disp_grad ? ref_grad.data() : nullptr, ref_affine.data(), nullptr});
    for (SamplerCpuPath path : AvailableSamplerCpuPaths()) {
      SCOPED_TRACE(SamplerCpuPathName(path));
      std::vector<float> grad(3 * n), affine(kAffineParams, 7.0f);
      cpu::GridSampleBackwardOnPath(path, args, in.grad_out.data(),
                                    GridSampleGrads{with_disp_grad ? grad.data() : nullptr, affine.data(), nullptr});
      ExpectSameBits(ref_grad, grad, "dL/du with grad_affine");
      ExpectSameBits(ref_affine, affine, "dL/dA");
    }
  }
}

// An fp16 image (the mixed-precision stage): forward and bf16 dL/du.
void CheckHalfImage(const Case& c, uint32_t seed) {
  const Inputs in = MakeInputs(c, seed);
  std::vector<Half> image(in.image.size());
  for (size_t v = 0; v < image.size(); ++v) image[v] = FromFloat<Half>(in.image[v]);
  GridSampleArgs args = ArgsOf(c, in);
  args.image = nullptr;
  const int64_t n = c.out_dims.size();
  std::vector<float> ref_out(n);
  std::vector<BFloat16> ref_grad(3 * n);
  cpu::GridSampleForwardHalfImageOnPath(SamplerCpuPath::kScalar, args, image.data(), ref_out.data());
  cpu::GridSampleBackwardHalfImageOnPath(SamplerCpuPath::kScalar, args, image.data(), in.grad_out.data(),
                                         ref_grad.data());
  int64_t nonzero = 0;
  for (float v : ref_out) nonzero += v != 0.0f;
  EXPECT_GT(nonzero, n / 2);
  for (SamplerCpuPath path : AvailableSamplerCpuPaths()) {
    SCOPED_TRACE(SamplerCpuPathName(path));
    std::vector<float> out(n, 7.0f);
    std::vector<BFloat16> grad(3 * n, FromFloat<BFloat16>(7.0f));
    cpu::GridSampleForwardHalfImageOnPath(path, args, image.data(), out.data());
    ExpectSameBits(ref_out, out, "forward, fp16 image");
    cpu::GridSampleBackwardHalfImageOnPath(path, args, image.data(), in.grad_out.data(), grad.data());
    EXPECT_EQ(CountDifferentBits(grad, ref_grad), 0) << "bf16 dL/du, fp16 image";
  }
}

TEST(GridSamplerCpuPathTest, HalfImageMatchesScalar) {
  Case c;
  c.jitter = 5;
  CheckHalfImage(c, 61);
  c.image_dims = {16, 9, 2};  // whole vectors and flat images
  c.out_dims = {16, 5, 4};
  CheckHalfImage(c, 62);
  Case border;
  border.padding = Padding::kBorder;  // the forward on the vector paths; the backward scalar
  CheckHalfImage(border, 63);
  Case slab;
  slab.grid_nz = 29;
  slab.out_z0 = 9;
  slab.affine = false;
  CheckHalfImage(slab, 64);
}

}  // namespace
}  // namespace registration
}  // namespace tessera

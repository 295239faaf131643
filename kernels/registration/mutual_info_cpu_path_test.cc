// The CPU Mattes MI's vector paths (mutual_info_cpu_rows.h) against its
// scalar reference loops on random inputs: the same histogram integers and
// the same gradient floats bit for bit, with intensities beyond and exactly
// at the mapped range, masks, lengths that are not a multiple of the vector
// width, several chunks, other bin counts and fixed-point scales, both fixed
// windows (box and cubic), runs of one intensity pair (the vector paths
// count them) and a gradient written over the warped image.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/registration/grid_sampler_cpu_path.h"
#include "kernels/registration/mutual_info.h"
#include "kernels/registration/mutual_info_cpu_steps.h"
#include "kernels/registration/test_util.h"

namespace tessera {
namespace registration {
namespace {

using testing::ExpectSameBits;
using testing::RandomUniform;

struct Inputs {
  std::vector<float> fixed, warped;
  std::vector<uint8_t> mask;
};

// Intensities over [-0.2, 1.3] for a range mapped from [0, 1.1] (fixed) and
// [0.05, 1] (warped): some clamp on each side, a few sit on the ends.
Inputs MakeInputs(int64_t n, uint32_t seed) {
  Inputs in;
  in.fixed = RandomUniform<float>(n, -0.2, 1.3, seed);
  in.warped = RandomUniform<float>(n, -0.2, 1.3, seed + 1);
  for (int64_t k = 0; k < n; k += 97) in.warped[k] = 0.05f;
  for (int64_t k = 5; k < n; k += 89) in.warped[k] = 1.0f;
  for (int64_t k = 3; k < n; k += 83) in.fixed[k] = 1.1f;
  // Runs of one (fixed, warped) pair, as a background: zeros (outside the
  // warped range), a pair inside both ranges, runs that end mid-vector and
  // runs broken by one voxel.
  const int64_t runs[][2] = {{n / 10, n / 10 + n / 5}, {n / 2 + 3, n / 2 + 3 + n / 7}, {n - n / 9, n}};
  for (int r = 0; r < 3; ++r) {
    for (int64_t k = runs[r][0]; k < runs[r][1]; ++k) {
      in.fixed[k] = r == 1 ? 0.5f : 0.0f;
      in.warped[k] = r == 1 ? 0.7f : 0.0f;
    }
  }
  if (n > 100) in.warped[n / 10 + n / 20] = 0.3f;
  const std::vector<float> m = RandomUniform<float>(n, 0.0, 1.0, seed + 2);
  in.mask.resize(n);
  for (int64_t k = 0; k < n; ++k) in.mask[k] = m[k] < 0.8f ? 1 : 0;
  return in;
}

MattesMiOptions OptionsOf(int bins, bool box) {
  MattesMiOptions o;
  o.bins = bins;
  o.fixed_min = 0.0f;
  o.fixed_max = 1.1f;
  o.warped_min = 0.05f;
  o.warped_max = 1.0f;
  o.fixed_kernel = box ? ParzenKernel::kBox : ParzenKernel::kCubicBSpline;
  return o;
}

void CheckAllPaths(int64_t n, int bins, bool box, int bits, bool masked, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "n " << n << " bins " << bins << " box " << box << " bits " << bits
                                    << " masked " << masked);
  const Inputs in = MakeInputs(n, seed);
  const MattesMiOptions o = OptionsOf(bins, box);
  const uint8_t* mask = masked ? in.mask.data() : nullptr;
  const std::vector<int64_t> ref_h =
      mi_cpu::JointHistogramFixedOnPath(SamplerCpuPath::kScalar, in.fixed.data(), in.warped.data(), mask, n, o, bits);
  std::vector<double> table;
  const MattesMiResult r = mi_cpu::Finalize(mi_cpu::HistogramFromFixed(ref_h, bits), o, &table);
  ASSERT_GT(r.total_weight, 0);
  std::vector<float> ref_g(n, 7.0f);
  mi_cpu::GradientFromTableOnPath(SamplerCpuPath::kScalar, in.fixed.data(), in.warped.data(), mask, n, o, table,
                                  r.total_weight, ref_g.data());
  int64_t nonzero = 0;
  for (float g : ref_g) nonzero += g != 0.0f;
  if (n >= 100) EXPECT_GT(nonzero, n / 3);  // the reference's values are not trivial
  for (SamplerCpuPath path : AvailableSamplerCpuPaths()) {
    SCOPED_TRACE(SamplerCpuPathName(path));
    EXPECT_EQ(mi_cpu::JointHistogramFixedOnPath(path, in.fixed.data(), in.warped.data(), mask, n, o, bits), ref_h);
    std::vector<float> g(n, 7.0f);
    mi_cpu::GradientFromTableOnPath(path, in.fixed.data(), in.warped.data(), mask, n, o, table, r.total_weight,
                                    g.data());
    ExpectSameBits(ref_g, g);
    // In place: the gradient over the warped image.
    std::vector<float> w = in.warped;
    mi_cpu::GradientFromTableOnPath(path, in.fixed.data(), w.data(), mask, n, o, table, r.total_weight, w.data());
    ExpectSameBits(ref_g, w);
    // No weight: zeros.
    mi_cpu::GradientFromTableOnPath(path, in.fixed.data(), in.warped.data(), mask, n, o, table, 0.0, g.data());
    EXPECT_EQ(g, std::vector<float>(n, 0.0f));
  }
}

TEST(MutualInfoCpuPathTest, MatchesScalarUnmaskedAndMasked) {
  // Both fixed windows: the box (the registration's default) and the cubic.
  for (bool box : {true, false}) {
    for (bool masked : {false, true}) {
      CheckAllPaths(1003, 32, box, mi_cpu::HistogramFixedPointBits(1003), masked, 7);
    }
  }
}

TEST(MutualInfoCpuPathTest, SeveralChunksAndScales) {
  // 2^17 + 13 voxels: two chunks on two threads; the whole-volume bits of a
  // 1 mm brain (39) and the largest (52).
  const int64_t n = (int64_t{1} << 17) + 13;
  for (bool box : {true, false}) {
    CheckAllPaths(n, 32, box, mi_cpu::HistogramFixedPointBits(n), true, 21);
    CheckAllPaths(n, 32, box, 39, false, 22);
    CheckAllPaths(5001, 32, box, 52, false, 23);
  }
}

TEST(MutualInfoCpuPathTest, OtherBinCountsAndTheBoxWindow) {
  CheckAllPaths(777, kMattesMiMinBins, false, 40, false, 31);
  CheckAllPaths(2049, 64, false, 40, true, 32);
  CheckAllPaths(999, 32, true, 40, true, 33);
}

TEST(MutualInfoCpuPathTest, ShortRanges) {
  for (int64_t n : {3, 4, 7, 8, 9, 17}) {
    CheckAllPaths(n, 16, false, 45, false, 40 + static_cast<uint32_t>(n));
    CheckAllPaths(n, 16, true, 45, false, 50 + static_cast<uint32_t>(n));
  }
}

}  // namespace
}  // namespace registration
}  // namespace tessera

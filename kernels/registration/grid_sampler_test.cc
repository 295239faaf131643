// CPU tests of the composite grid sampler: the reference against an
// independent formulation (hat-function weights over all voxels, positions in
// double), exact cases, sharded output bounds, and finite-difference checks of
// every gradient in double precision.
#include "kernels/registration/grid_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/registration/test_util.h"

namespace tessera {
namespace registration {
namespace {

using testing::Cast;
using testing::RandomUniform;
using testing::RelL2;

// A near-identity affine: identity plus noise of `scale`.
template <typename T>
std::vector<T> RandomAffine(uint32_t seed, double scale) {
  std::vector<T> a = RandomUniform<T>(kAffineParams, -scale, scale, seed);
  a[0] += 1;
  a[5] += 1;
  a[10] += 1;
  return a;
}

// Independent reference: positions in double from the definition, value as
// sum over the image of tent weights max(0, 1 - |ix - i|) per axis.
std::vector<double> NaiveSample(const std::vector<double>& image, Dims3 id, const std::vector<double>* affine,
                                const std::vector<double>* disp, Dims3 od, Padding padding) {
  std::vector<double> out(od.size());
  const int64_t on[3] = {od.nx, od.ny, od.nz};
  const int64_t m[3] = {id.nx, id.ny, id.nz};
  for (int64_t k = 0; k < od.nz; ++k) {
    for (int64_t j = 0; j < od.ny; ++j) {
      for (int64_t i = 0; i < od.nx; ++i) {
        const int64_t idx[3] = {i, j, k};
        double x[3], ix[3];
        for (int d = 0; d < 3; ++d) x[d] = on[d] > 1 ? -1.0 + 2.0 * idx[d] / (on[d] - 1) : 0.0;
        for (int c = 0; c < 3; ++c) {
          double p = x[c];
          if (affine) p = (*affine)[4 * c] * x[0] + (*affine)[4 * c + 1] * x[1] + (*affine)[4 * c + 2] * x[2] +
                          (*affine)[4 * c + 3];
          if (disp) p += (*disp)[od.index(i, j, k) + c * od.size()];
          ix[c] = (p + 1) * 0.5 * (m[c] - 1);
          if (padding == Padding::kBorder) ix[c] = std::min(std::max(ix[c], 0.0), double(m[c] - 1));
        }
        double value = 0;
        for (int64_t kk = 0; kk < id.nz; ++kk) {
          const double wz = std::max(0.0, 1 - std::abs(ix[2] - kk));
          if (wz == 0) continue;
          for (int64_t jj = 0; jj < id.ny; ++jj) {
            const double wy = std::max(0.0, 1 - std::abs(ix[1] - jj));
            if (wy == 0) continue;
            for (int64_t ii = 0; ii < id.nx; ++ii) {
              const double wx = std::max(0.0, 1 - std::abs(ix[0] - ii));
              value += wx * wy * wz * image[id.index(ii, jj, kk)];
            }
          }
        }
        out[od.index(i, j, k)] = value;
      }
    }
  }
  return out;
}

struct Problem {
  Dims3 id{9, 8, 6};
  Dims3 od{7, 6, 5};
  std::vector<double> image, affine, disp, grad_out;
};

Problem MakeProblem(uint32_t seed, Dims3 id, Dims3 od, double disp_scale) {
  Problem p;
  p.id = id;
  p.od = od;
  p.image = RandomUniform<double>(id.size(), 0.5, 1.5, seed);
  p.affine = RandomAffine<double>(seed + 1, 0.1);
  // Displacements reach beyond the image so padding is exercised.
  p.disp = RandomUniform<double>(3 * od.size(), -disp_scale, disp_scale, seed + 2);
  p.grad_out = RandomUniform<double>(od.size(), -1.0, 1.0, seed + 3);
  return p;
}

template <typename T>
GridSampleArgsT<T> ArgsFor(const std::vector<T>& image, Dims3 id, const std::vector<T>* affine,
                           const std::vector<T>* disp, Dims3 od, Padding padding) {
  GridSampleArgsT<T> a;
  a.image = image.data();
  a.image_dims = id;
  a.affine = affine ? affine->data() : nullptr;
  a.disp = disp ? disp->data() : nullptr;
  a.out_dims = od;
  a.padding = padding;
  return a;
}

class GridSamplerCpu : public ::testing::TestWithParam<Padding> {};

TEST_P(GridSamplerCpu, MatchesIndependentFormula) {
  const Padding padding = GetParam();
  const Problem p = MakeProblem(11, {13, 11, 9}, {10, 12, 7}, 0.3);
  const std::vector<double> want = NaiveSample(p.image, p.id, &p.affine, &p.disp, p.od, padding);

  std::vector<double> got_d(p.od.size());
  cpu::GridSampleForward(ArgsFor(p.image, p.id, &p.affine, &p.disp, p.od, padding), got_d.data());
  EXPECT_LT(RelL2(got_d, want), 1e-12);

  const auto image_f = Cast<float>(p.image), affine_f = Cast<float>(p.affine), disp_f = Cast<float>(p.disp);
  std::vector<float> got_f(p.od.size(), testing::kNaN);
  ASSERT_TRUE(GridSample(Stream::Cpu(), ArgsFor(image_f, p.id, &affine_f, &disp_f, p.od, padding), got_f.data()).ok());
  EXPECT_LT(RelL2(got_f, want), 1e-5);

  // Without affine and displacement: the identity map.
  const std::vector<double> want_id = NaiveSample(p.image, p.id, nullptr, nullptr, p.od, padding);
  ASSERT_TRUE(GridSample(Stream::Cpu(), ArgsFor<float>(image_f, p.id, nullptr, nullptr, p.od, padding), got_f.data()).ok());
  EXPECT_LT(RelL2(got_f, want_id), 1e-5);
}

TEST_P(GridSamplerCpu, IdentityAndVoxelShift) {
  const Dims3 d{12, 10, 8};
  const auto image = RandomUniform<float>(d.size(), 0.5, 1.5, 5);
  std::vector<float> out(d.size());
  ASSERT_TRUE(GridSample(Stream::Cpu(), ArgsFor<float>(image, d, nullptr, nullptr, d, GetParam()), out.data()).ok());
  EXPECT_LT(RelL2(out, image), 1e-6);

  // t_x = one voxel: out(i) = I(i + 1); the last column is padding.
  std::vector<float> affine = {1, 0, 0, 2.0f / (d.nx - 1), 0, 1, 0, 0, 0, 0, 1, 0};
  ASSERT_TRUE(GridSample(Stream::Cpu(), ArgsFor<float>(image, d, &affine, nullptr, d, GetParam()), out.data()).ok());
  for (int64_t k = 0; k < d.nz; ++k) {
    for (int64_t j = 0; j < d.ny; ++j) {
      for (int64_t i = 0; i + 1 < d.nx; ++i) {
        ASSERT_NEAR(out[d.index(i, j, k)], image[d.index(i + 1, j, k)], 1e-5) << i << "," << j << "," << k;
      }
      const float last = out[d.index(d.nx - 1, j, k)];
      if (GetParam() == Padding::kZeros) {
        EXPECT_NEAR(last, 0.0f, 1e-5);
      } else {
        EXPECT_NEAR(last, image[d.index(d.nx - 1, j, k)], 1e-5);
      }
    }
  }
}

TEST_P(GridSamplerCpu, ShardedBoundsMatchFullGrid) {
  const Padding padding = GetParam();
  const Problem p = MakeProblem(21, {11, 9, 13}, {9, 8, 12}, 0.2);
  const auto image = Cast<float>(p.image), affine = Cast<float>(p.affine), disp = Cast<float>(p.disp);
  std::vector<float> full(p.od.size());
  ASSERT_TRUE(GridSample(Stream::Cpu(), ArgsFor(image, p.id, &affine, &disp, p.od, padding), full.data()).ok());

  // Output slices k in [3, 8) as a shard: its own bounds, its own u slab.
  const int64_t k0 = 3, nk = 5;
  const Dims3 sd{p.od.nx, p.od.ny, nk};
  std::vector<float> shard_disp(3 * sd.size());
  for (int c = 0; c < 3; ++c) {
    for (int64_t v = 0; v < sd.size(); ++v) {
      shard_disp[v + c * sd.size()] = disp[v + k0 * p.od.nx * p.od.ny + c * p.od.size()];
    }
  }
  GridSampleArgs args = ArgsFor(image, p.id, &affine, &shard_disp, sd, padding);
  const double step = 2.0 / (p.od.nz - 1);
  args.grid_lo[2] = -1 + k0 * step;
  args.grid_hi[2] = -1 + (k0 + nk - 1) * step;
  std::vector<float> shard(sd.size(), testing::kNaN);
  ASSERT_TRUE(GridSample(Stream::Cpu(), args, shard.data()).ok());
  std::vector<float> want(full.begin() + k0 * p.od.nx * p.od.ny, full.begin() + (k0 + nk) * p.od.nx * p.od.ny);
  EXPECT_LT(RelL2(shard, want), 1e-5);
}

// L = sum_x g(x) out(x): checks dL/du, dL/d[A|t] and dL/dI against central
// differences, all in double.
TEST_P(GridSamplerCpu, GradientsMatchFiniteDifferences) {
  const Padding padding = GetParam();
  Problem p = MakeProblem(31, {9, 8, 6}, {7, 6, 5}, 0.3);
  auto loss = [&](const Problem& q) {
    std::vector<double> out(q.od.size());
    cpu::GridSampleForward(ArgsFor(q.image, q.id, &q.affine, &q.disp, q.od, padding), out.data());
    double l = 0;
    for (size_t v = 0; v < out.size(); ++v) l += q.grad_out[v] * out[v];
    return l;
  };
  std::vector<double> g_disp(p.disp.size()), g_affine(kAffineParams), g_image(p.image.size());
  GridSampleGradsT<double> grads{g_disp.data(), g_affine.data(), g_image.data()};
  cpu::GridSampleBackward(ArgsFor(p.image, p.id, &p.affine, &p.disp, p.od, padding), p.grad_out.data(), grads);

  const double h = 1e-6;
  auto check = [&](std::vector<double>& param, const std::vector<double>& analytic, const char* what) {
    double max_err = 0, max_ref = 0;
    for (size_t e = 0; e < param.size(); ++e) {
      const double saved = param[e];
      param[e] = saved + h;
      const double lp = loss(p);
      param[e] = saved - h;
      const double lm = loss(p);
      param[e] = saved;
      const double fd = (lp - lm) / (2 * h);
      max_err = std::max(max_err, std::abs(fd - analytic[e]));
      max_ref = std::max(max_ref, std::abs(fd));
    }
    EXPECT_GT(max_ref, 1e-3) << what << ": gradient unexpectedly zero";
    EXPECT_LT(max_err / max_ref, 1e-5) << what << ": max error " << max_err << " of " << max_ref;
  };
  check(p.disp, g_disp, "dL/du");
  check(p.affine, g_affine, "dL/d[A|t]");
  check(p.image, g_image, "dL/dI");

  // The float path agrees with the double reference.
  const auto image = Cast<float>(p.image), affine = Cast<float>(p.affine), disp = Cast<float>(p.disp),
             grad_out = Cast<float>(p.grad_out);
  std::vector<float> f_disp(g_disp.size(), testing::kNaN), f_affine(kAffineParams, testing::kNaN),
      f_image(g_image.size(), testing::kNaN);
  ASSERT_TRUE(GridSampleBackward(Stream::Cpu(), ArgsFor(image, p.id, &affine, &disp, p.od, padding), grad_out.data(),
                                 GridSampleGrads{f_disp.data(), f_affine.data(), f_image.data()})
                  .ok());
  EXPECT_LT(RelL2(f_disp, g_disp), 1e-5);
  EXPECT_LT(RelL2(f_affine, g_affine), 1e-5);
  EXPECT_LT(RelL2(f_image, g_image), 1e-5);
}

// The affine gradient without an affine is the gradient at the identity.
TEST(GridSamplerCpuNoAffine, GradientIsAtIdentity) {
  Problem p = MakeProblem(41, {8, 7, 6}, {6, 6, 5}, 0.2);
  const std::vector<double> identity = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
  std::vector<double> with(kAffineParams), without(kAffineParams);
  cpu::GridSampleBackward(ArgsFor(p.image, p.id, &identity, &p.disp, p.od, Padding::kZeros), p.grad_out.data(),
                          GridSampleGradsT<double>{nullptr, with.data(), nullptr});
  cpu::GridSampleBackward(ArgsFor<double>(p.image, p.id, nullptr, &p.disp, p.od, Padding::kZeros), p.grad_out.data(),
                          GridSampleGradsT<double>{nullptr, without.data(), nullptr});
  EXPECT_LT(RelL2(without, with), 1e-12);
}

TEST_P(GridSamplerCpu, NearestPicksRoundedVoxel) {
  const Padding padding = GetParam();
  const Problem p = MakeProblem(51, {13, 11, 9}, {10, 12, 7}, 0.3);
  std::vector<int32_t> labels(p.id.size());
  for (size_t v = 0; v < labels.size(); ++v) labels[v] = static_cast<int32_t>(1 + (v * 7919) % 1000);
  const auto affine = Cast<float>(p.affine), disp = Cast<float>(p.disp);
  std::vector<int32_t> out(p.od.size(), -1);
  GridSampleArgs args = ArgsFor<float>({}, p.id, &affine, &disp, p.od, padding);
  ASSERT_TRUE(GridSampleNearest(Stream::Cpu(), labels.data(), args, out.data()).ok());
  int64_t checked = 0;
  const int64_t m[3] = {p.id.nx, p.id.ny, p.id.nz};
  for (int64_t k = 0; k < p.od.nz; ++k) {
    for (int64_t j = 0; j < p.od.ny; ++j) {
      for (int64_t i = 0; i < p.od.nx; ++i) {
        const int64_t idx[3] = {i, j, k};
        const int64_t on[3] = {p.od.nx, p.od.ny, p.od.nz};
        int64_t r[3];
        bool ambiguous = false, inside = true;
        for (int c = 0; c < 3; ++c) {
          double x[3];
          for (int d = 0; d < 3; ++d) x[d] = -1.0 + 2.0 * idx[d] / (on[d] - 1);
          double q = p.affine[4 * c] * x[0] + p.affine[4 * c + 1] * x[1] + p.affine[4 * c + 2] * x[2] +
                     p.affine[4 * c + 3] + p.disp[p.od.index(i, j, k) + c * p.od.size()];
          double ix = (q + 1) * 0.5 * (m[c] - 1);
          if (padding == Padding::kBorder) ix = std::min(std::max(ix, 0.0), double(m[c] - 1));
          if (std::abs(ix - std::floor(ix) - 0.5) < 1e-3) ambiguous = true;
          r[c] = static_cast<int64_t>(std::llround(ix));
          if (r[c] < 0 || r[c] >= m[c]) inside = false;
        }
        if (ambiguous) continue;
        ++checked;
        const int32_t want = inside ? labels[p.id.index(r[0], r[1], r[2])] : 0;
        ASSERT_EQ(out[p.od.index(i, j, k)], want) << i << "," << j << "," << k;
      }
    }
  }
  EXPECT_GT(checked, p.od.size() * 9 / 10);
}

INSTANTIATE_TEST_SUITE_P(Padding, GridSamplerCpu, ::testing::Values(Padding::kZeros, Padding::kBorder),
                         [](const ::testing::TestParamInfo<Padding>& info) {
                           return info.param == Padding::kZeros ? std::string("Zeros") : std::string("Border");
                         });

TEST(GridSamplerArgs, RejectsBadArguments) {
  std::vector<float> image(8, 1.0f), out(8);
  GridSampleArgs args;
  args.image = image.data();
  args.image_dims = {2, 2, 2};
  args.out_dims = {2, 2, 0};
  EXPECT_EQ(GridSample(Stream::Cpu(), args, out.data()).code(), absl::StatusCode::kInvalidArgument);
  args.out_dims = {2, 2, 2};
  EXPECT_EQ(GridSample(Stream::Cpu(), args, nullptr).code(), absl::StatusCode::kInvalidArgument);
  args.image = nullptr;
  EXPECT_EQ(GridSample(Stream::Cpu(), args, out.data()).code(), absl::StatusCode::kInvalidArgument);
  args.image = image.data();
  EXPECT_EQ(GridSampleBackward(Stream::Cpu(), args, nullptr, GridSampleGrads{}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(GridSample(Stream::Cpu(), args, out.data()).ok());
  EXPECT_LT(RelL2(out, image), 1e-6);
}

}  // namespace
}  // namespace registration
}  // namespace tessera

// The fused in-place greedy composition (lean_compose.h) against the
// out-of-place pipeline it replaces (step field -> AdamStep / scaled gradient
// -> ScaleComponents -> border GridSample of u at x + s -> + s), on random
// fields at the smallest safe slab depth (so the one-slab lag is exercised at
// its limit), and CUDA against the CPU reference.
#include "kernels/registration/lean_compose.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "common/buffer.h"
#include "common/ndarray.h"
#include "common/testing/gpu_test.h"
#include "kernels/registration/adam.h"
#include "kernels/registration/grid_sampler.h"

namespace tessera {
namespace registration {
namespace {

std::vector<float> RandomValues(int64_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::array<float, 3> ToNormalized(Dims3 d) {
  auto f = [](int64_t n) { return n > 1 ? 2.f / static_cast<float>(n - 1) : 0.f; };
  return {f(d.nx), f(d.ny), f(d.nz)};
}

// The standard pipeline's composition: u <- s_n + u o (x + s_n), out of place.
std::vector<float> ComposeOutOfPlace(const std::vector<float>& u, const std::vector<float>& step_voxels, Dims3 d) {
  const int64_t n = d.size();
  const std::array<float, 3> to_n = ToNormalized(d);
  std::vector<float> s = step_voxels;
  for (int c = 0; c < 3; ++c)
    for (int64_t i = 0; i < n; ++i) s[c * n + i] *= to_n[c];
  std::vector<float> out(3 * n);
  for (int c = 0; c < 3; ++c) {
    GridSampleArgs a;
    a.image = u.data() + c * n;
    a.image_dims = d;
    a.disp = s.data();
    a.out_dims = d;
    a.padding = Padding::kBorder;
    cpu::GridSampleForward(a, out.data() + c * n);
  }
  for (int64_t i = 0; i < 3 * n; ++i) out[i] += s[i];
  return out;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a[i]) - double(b[i])));
  return m;
}

double MaxAbs(const std::vector<float>& a) {
  double m = 0;
  for (float x : a) m = std::max(m, std::abs(double(x)));
  return m;
}

// u of a few voxels' amplitude, in normalised units.
std::vector<float> RandomDisplacement(Dims3 d, std::mt19937& rng) {
  std::vector<float> u = RandomValues(3 * d.size(), -3.f, 3.f, rng);
  const std::array<float, 3> to_n = ToNormalized(d);
  for (int c = 0; c < 3; ++c)
    for (int64_t i = 0; i < d.size(); ++i) u[c * d.size() + i] *= to_n[c];
  return u;
}

TEST(LeanComposeCpu, ScaledRuleEqualsOutOfPlaceCompositionAtTheSmallestSlab) {
  std::mt19937 rng(11);
  const Dims3 d{19, 13, 23};
  const int64_t n = d.size();
  const std::vector<float> u0 = RandomDisplacement(d, rng);
  const std::vector<float> g = RandomValues(3 * n, -2.f, 2.f, rng);
  for (double lr : {0.5, 0.9, 2.5}) {
    GreedyStep step;
    step.rule = GreedyStep::Rule::kScaled;
    step.max_abs_grad = static_cast<float>(MaxAbs(g));
    step.scale = static_cast<float>(-lr / step.max_abs_grad);
    step.to_normalized = ToNormalized(d);
    step.slab_depth = ComposeHaloSlices(GreedyStepBoundVoxels(step));
    ASSERT_EQ(step.slab_depth, static_cast<int64_t>(std::floor(lr)) + 1);
    std::vector<float> s(3 * n);
    for (int64_t i = 0; i < 3 * n; ++i) s[i] = step.scale * g[i];
    const std::vector<float> want = ComposeOutOfPlace(u0, s, d);
    std::vector<float> u = u0;
    ASSERT_TRUE(ComposeGreedyStepInPlace(Stream::Cpu(), u.data(), g.data(), d, step).ok());
    // Same positions (the sampler's arithmetic); only the interpolation sum's order differs.
    EXPECT_LE(MaxAbsDiff(u, want), 1e-6 * (MaxAbs(u0) + 1)) << "lr " << lr;
    EXPECT_GT(MaxAbsDiff(u, u0), 1e-3) << "the update moved nothing";
  }
}

TEST(LeanComposeCpu, AdamRuleEqualsAdamStepThenComposition) {
  std::mt19937 rng(12);
  const Dims3 d{17, 11, 21};
  const int64_t n = d.size();
  std::vector<float> u_lean = RandomDisplacement(d, rng), u_ref = u_lean;
  std::vector<float> m_lean(3 * n, 0.f), v_lean(3 * n, 0.f);
  NDArray m_ref = NDArray::Allocate({d.nx, d.ny, d.nz, 3}, DType::kFloat32).value();
  NDArray v_ref = NDArray::Allocate({d.nx, d.ny, d.nz, 3}, DType::kFloat32).value();
  NDArray p = NDArray::Allocate({d.nx, d.ny, d.nz, 3}, DType::kFloat32).value();
  NDArray gr = NDArray::Allocate({d.nx, d.ny, d.nz, 3}, DType::kFloat32).value();
  std::fill(m_ref.data<float>(), m_ref.data<float>() + 3 * n, 0.f);
  std::fill(v_ref.data<float>(), v_ref.data<float>() + 3 * n, 0.f);
  AdamOptions adam;
  adam.lr = 0.5;
  for (int64_t t = 1; t <= 6; ++t) {
    // Gradients that grow and change sign: large Adam steps.
    std::vector<float> g = RandomValues(3 * n, -1.f, 1.f, rng);
    for (float& x : g) x *= static_cast<float>(t * t);
    std::copy(g.begin(), g.end(), gr.data<float>());
    std::fill(p.data<float>(), p.data<float>() + 3 * n, 0.f);
    ASSERT_TRUE(AdamStep(p, gr, m_ref, v_ref, adam, t, Stream::Cpu()).ok());
    const std::vector<float> s(p.data<float>(), p.data<float>() + 3 * n);
    u_ref = ComposeOutOfPlace(u_ref, s, d);

    GreedyStep step;
    step.rule = GreedyStep::Rule::kAdam;
    step.adam = adam;
    step.t = t;
    step.m = m_lean.data();
    step.v = v_lean.data();
    step.to_normalized = ToNormalized(d);
    const double bound = GreedyStepBoundVoxels(step);
    EXPECT_LE(MaxAbs(s), bound * (1 + 1e-6)) << "t " << t;  // float rounding; the halo has a 1e-3 margin
    step.slab_depth = ComposeHaloSlices(bound);
    ASSERT_TRUE(ComposeGreedyStepInPlace(Stream::Cpu(), u_lean.data(), g.data(), d, step).ok());
    EXPECT_LE(MaxAbsDiff(m_lean, std::vector<float>(m_ref.data<float>(), m_ref.data<float>() + 3 * n)), 1e-6 * t * t);
    EXPECT_LE(MaxAbsDiff(u_lean, u_ref), 2e-6 * (MaxAbs(u_ref) + 1)) << "t " << t;
  }
}

// Adam's step never exceeds the bound the halo is sized from, even for the
// adversarial sequence of geometrically growing gradients.
TEST(LeanComposeCpu, AdamStepBoundHolds) {
  AdamOptions adam;
  adam.lr = 1.0;
  for (double growth : {1.0, 1.02, 1.05, 1.2, 3.0}) {
    double m = 0, v = 0, g = 1e-3, worst = 0;
    for (int t = 1; t <= 400; ++t, g *= growth) {
      m = adam.beta1 * m + (1 - adam.beta1) * g;
      v = adam.beta2 * v + (1 - adam.beta2) * g * g;
      const double bc1 = 1 - std::pow(adam.beta1, t), bc2 = 1 - std::pow(adam.beta2, t);
      const double s = adam.lr / bc1 * m / (std::sqrt(v / bc2) + adam.eps);
      GreedyStep step;
      step.rule = GreedyStep::Rule::kAdam;
      step.adam = adam;
      step.t = t;
      EXPECT_LE(s, GreedyStepBoundVoxels(step) * (1 + 1e-9)) << "growth " << growth << " t " << t;
      worst = std::max(worst, s / adam.lr);
    }
    if (growth == 1.0) EXPECT_NEAR(worst, 1.0, 1e-4);  // a constant gradient steps lr (less eps)
  }
  GreedyStep step;
  step.rule = GreedyStep::Rule::kAdam;
  step.t = 1;
  EXPECT_NEAR(GreedyStepBoundVoxels(step), step.adam.lr, 1e-12);  // first step: exactly lr
}

// The slab depth: about 2^21 voxels a slab, up to 2^23 while the two slab
// buffers stay within an eighth of u (nz / 16 slices), never below the halo.
TEST(LeanComposeCpu, SlabDepth) {
  EXPECT_EQ(ComposeSlabDepth(Dims3{512, 512, 512}, 0.5), 32);    // 2^23 voxels (was 8)
  EXPECT_EQ(ComposeSlabDepth(Dims3{1024, 1024, 1024}, 0.5), 8);  // 2^23 voxels (was 2)
  EXPECT_EQ(ComposeSlabDepth(Dims3{256, 256, 256}, 0.5), 32);    // 2^21 voxels: nz / 16 = 16 is less
  EXPECT_EQ(ComposeSlabDepth(Dims3{181, 217, 181}, 0.5), 53);    // 2^21 voxels
  EXPECT_EQ(ComposeSlabDepth(Dims3{512, 512, 64}, 0.5), 8);      // a thin shard: 2^21 voxels
  EXPECT_EQ(ComposeSlabDepth(Dims3{512, 512, 512}, 40.0), 41);   // the halo
  EXPECT_EQ(ComposeSlabDepth(Dims3{64, 64, 20}, 0.5), 20);       // the whole grid
}

TEST(LeanComposeCpu, RejectsBadArguments) {
  std::vector<float> u(3 * 8, 0.1f), g(3 * 8, 0.2f);
  GreedyStep step;
  step.scale = -1.f;
  step.max_abs_grad = 3.f;  // bound 3 voxels: halo 4
  step.slab_depth = 2;
  absl::Status s = ComposeGreedyStepInPlace(Stream::Cpu(), u.data(), g.data(), Dims3{2, 2, 2}, step);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("halo"), std::string::npos) << s;
  step.slab_depth = 0;
  EXPECT_EQ(ComposeGreedyStepInPlace(Stream::Cpu(), nullptr, g.data(), Dims3{2, 2, 2}, step).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ComposeGreedyStepInPlace(Stream::Cpu(), u.data(), g.data(), Dims3{2, 0, 2}, step).code(),
            absl::StatusCode::kInvalidArgument);
  step.rule = GreedyStep::Rule::kAdam;
  EXPECT_EQ(ComposeGreedyStepInPlace(Stream::Cpu(), u.data(), g.data(), Dims3{2, 2, 2}, step).code(),
            absl::StatusCode::kInvalidArgument);
}

// CUDA vs CPU on random inputs, both rules, automatic and smallest slabs;
// the (x, y, slice) launch (cuda_grid_3d) equals the linear one exactly.
// Tolerance: 1e-5 * (max|u| + max|s_n|) (FMA contraction in the Adam update
// and the interpolation sum; positions are bit-identical).
TEST(LeanComposeParity, CudaMatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  std::mt19937 rng(13);
  for (Dims3 d : {Dims3{37, 29, 41}, Dims3{64, 48, 33}, Dims3{30, 20, 1}}) {
    const int64_t n = d.size();
    for (int rule = 0; rule < 2; ++rule) {
      for (bool smallest : {false, true}) {
        const std::vector<float> u0 = RandomDisplacement(d, rng);
        const std::vector<float> g = RandomValues(3 * n, -2.f, 2.f, rng);
        std::vector<float> m0 = RandomValues(3 * n, -0.5f, 0.5f, rng), v0 = RandomValues(3 * n, 0.01f, 1.f, rng);
        GreedyStep step;
        step.rule = rule == 0 ? GreedyStep::Rule::kScaled : GreedyStep::Rule::kAdam;
        step.max_abs_grad = static_cast<float>(MaxAbs(g));
        step.scale = static_cast<float>(-0.9 / step.max_abs_grad);
        step.t = 5;
        step.to_normalized = ToNormalized(d);
        if (smallest) step.slab_depth = ComposeHaloSlices(GreedyStepBoundVoxels(step));
        // CPU.
        std::vector<float> u_cpu = u0, m_cpu = m0, v_cpu = v0;
        step.m = m_cpu.data();
        step.v = v_cpu.data();
        ASSERT_TRUE(ComposeGreedyStepInPlace(Stream::Cpu(), u_cpu.data(), g.data(), d, step).ok());
        // CUDA.
        auto upload = [&](const std::vector<float>& h) {
          NDArray a = NDArray::Allocate({3 * n}, DType::kFloat32, MemoryKind::kDevice).value();
          EXPECT_TRUE(CopyBytes(a.raw_data(), MemoryKind::kDevice, h.data(), MemoryKind::kHost, h.size() * 4, stream).ok());
          return a;
        };
        // Both launch shapes (GreedyStep::cuda_grid_3d), and the 3d one with
        // 32-bit indices (cuda_index32), from the same inputs: the same bits.
        std::vector<float> u_gpu(3 * n), m_gpu(3 * n), u_3d(3 * n), m_3d(3 * n), u_32(3 * n), m_32(3 * n);
        for (const int shape : {0, 1, 2}) {
          NDArray u_dev = upload(u0), g_dev = upload(g), m_dev = upload(m0), v_dev = upload(v0);
          step.m = m_dev.data<float>();
          step.v = v_dev.data<float>();
          step.cuda_grid_3d = shape > 0;
          step.cuda_index32 = shape == 2;
          Workspace ws;
          ASSERT_TRUE(ComposeGreedyStepInPlace(stream, u_dev.data<float>(), g_dev.data<float>(), d, step, &ws).ok());
          std::vector<float>& uo = shape == 2 ? u_32 : (shape == 1 ? u_3d : u_gpu);
          std::vector<float>& mo = shape == 2 ? m_32 : (shape == 1 ? m_3d : m_gpu);
          ASSERT_TRUE(CopyBytes(uo.data(), MemoryKind::kHost, u_dev.raw_data(), MemoryKind::kDevice, 12 * n, stream).ok());
          ASSERT_TRUE(CopyBytes(mo.data(), MemoryKind::kHost, m_dev.raw_data(), MemoryKind::kDevice, 12 * n, stream).ok());
          ASSERT_TRUE(stream.Synchronize().ok());
        }
        const double tol = 1e-5 * (MaxAbs(u0) + 4.0 * 2.0 / 19.0);
        EXPECT_LE(MaxAbsDiff(u_gpu, u_cpu), tol) << DimsToString(d) << " rule " << rule << " smallest " << smallest;
        if (rule == 1) EXPECT_LE(MaxAbsDiff(m_gpu, m_cpu), 1e-6);
        EXPECT_EQ(MaxAbsDiff(u_3d, u_gpu), 0.0) << "3d grid, " << DimsToString(d) << " rule " << rule;
        EXPECT_EQ(MaxAbsDiff(m_3d, m_gpu), 0.0) << "3d grid, " << DimsToString(d) << " rule " << rule;
        EXPECT_EQ(MaxAbsDiff(u_32, u_gpu), 0.0) << "32-bit indices, " << DimsToString(d) << " rule " << rule;
        EXPECT_EQ(MaxAbsDiff(m_32, m_gpu), 0.0) << "32-bit indices, " << DimsToString(d) << " rule " << rule;
      }
    }
  }
}

}  // namespace
}  // namespace registration
}  // namespace tessera

// CUDA distance-driven projector against the CPU reference on random
// (non-zero) volumes and sinograms, for every geometry kind, the detector
// variants and both execution modes: relative L2 <= 1e-5 (host runs of the
// same code measure ~3e-7), the adjoint identity on the GPU to 1e-5
// relative, bit-identical repeated runs, the back projection in chunks of
// views, and compact subsets. The adjoint bound allows for cancellation in
// the signed dot product (see CheckGeometry).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/device.h"
#include "common/testing/device_array.h"
#include "common/testing/gpu_test.h"
#include "kernels/reconstruction/ct/dd_projector.h"
#include "kernels/reconstruction/ct/dd_test_geometries.h"

namespace tessera {
namespace recon {
namespace ct {
namespace {

using ::tessera::testing::DeviceArray;
using ::tessera::testing::kNaN;
using ::tessera::testing::RandomUniform;
using ::tessera::testing::RelL2;

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

bool BitIdentical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<testing::NamedGeometry> Cases() {
  std::vector<testing::NamedGeometry> cases = testing::AllKinds();
  for (auto& named : testing::LargerKinds()) cases.push_back(named);
  for (auto& named : testing::VariantKinds()) cases.push_back(named);
  return cases;
}

void CheckGeometry(const testing::NamedGeometry& named, ExecutionMode mode, const Stream& stream,
                   int64_t back_scratch_bytes = kDefaultBackScratchBytes) {
  SCOPED_TRACE(named.name + " " + ExecutionModeName(mode) + " scratch " + std::to_string(back_scratch_bytes));
  const CtGeometry& g = named.geometry;
  auto projector = DdProjector::Create(g, stream, {mode, 1, back_scratch_bytes});
  ASSERT_TRUE(projector.ok()) << projector.status();
  DdProjector& p = **projector;
  const auto views = SubsetViews(g.projection.num_views(), 1, kAllSubsets);
  const size_t nv = g.volume.size(), ns = g.projection.sinogram_size();
  const auto x = RandomUniform<float>(nv, 0.2, 1.8, 11);
  const auto y = RandomUniform<float>(ns, 0.1, 2.0, 12);
  std::vector<float> ref_fwd(ns), ref_back(nv);
  cpu::Forward(p.system(), x.data(), views, ref_fwd.data());
  cpu::Back(p.system(), y.data(), views, ref_back.data());

  auto dx = DeviceArray<float>::FromHost(x, stream);
  auto dy = DeviceArray<float>::FromHost(y, stream);
  auto fwd = DeviceArray<float>::Allocate(ns, stream);
  auto back = DeviceArray<float>::Allocate(nv, stream);
  fwd.Poison(kNaN);
  back.Poison(kNaN);
  ASSERT_TRUE(p.Forward(dx.data(), fwd.data()).ok());
  ASSERT_TRUE(p.Back(dy.data(), back.data()).ok());
  const std::vector<float> gpu_fwd = fwd.Download(), gpu_back = back.Download();
  EXPECT_LE(RelL2(gpu_fwd, ref_fwd), 1e-5);
  EXPECT_LE(RelL2(gpu_back, ref_back), 1e-5);

  // Repeated runs are bit-identical (both modes gather in a fixed order;
  // kDeterministic promises it).
  fwd.Poison(kNaN);
  back.Poison(kNaN);
  ASSERT_TRUE(p.Forward(dx.data(), fwd.data()).ok());
  ASSERT_TRUE(p.Back(dy.data(), back.data()).ok());
  EXPECT_TRUE(BitIdentical(fwd.Download(), gpu_fwd));
  EXPECT_TRUE(BitIdentical(back.Download(), gpu_back));

  // Adjoint on the GPU with a signed sinogram. The sum cancels (fan2d_96:
  // <Ax, y> = 107 from terms whose magnitudes add to 3.1e5) while the float
  // forward's rounding scales with the terms (its <Ax, y> is 2.4e-3 off the
  // double reference's there, on the host too), so the bound is 1e-5 of
  // |lhs| or 1e-8 of the terms' sum, whichever is larger; a cell-voxel pair
  // missed or weighed twice would be off by a whole term (~10).
  const auto ys = RandomUniform<float>(ns, -1.0, 1.0, 13);
  dy.Upload(ys);
  ASSERT_TRUE(p.Back(dy.data(), back.data()).ok());
  const double lhs = Dot(gpu_fwd, ys), rhs = Dot(x, back.Download());
  double terms = 0;
  for (size_t i = 0; i < ns; ++i) terms += std::fabs(static_cast<double>(gpu_fwd[i]) * ys[i]);
  EXPECT_LE(std::fabs(lhs - rhs), std::max(1e-5 * std::fabs(lhs), 1e-8 * terms)) << lhs << " vs " << rhs;
}

TEST(DdProjectorCuda, MatchesCpuReferenceAdjointAndRepeatsBitForBit) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda, 0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  for (const auto& named : Cases()) {
    for (ExecutionMode mode : {ExecutionMode::kDefault, ExecutionMode::kDeterministic}) {
      CheckGeometry(named, mode, *stream);
    }
  }
}

// A scratch budget of about three views: the back projection runs in chunks
// of views, each launch adding to the volume.
TEST(DdProjectorCuda, ChunkedBackProjectionMatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda, 0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  for (const auto& named : testing::LargerKinds()) {
    const CtGeometry& g = named.geometry;
    const int64_t cells = g.projection.det_cols * g.projection.det_rows;
    CheckGeometry(named, ExecutionMode::kDeterministic, *stream, 3 * (g.projection.is_2d ? 16 : 4) * cells + 16);
  }
}

// The 3-D back projection's z run is a speed knob: every run length gives the
// CPU reference's result and (the same float sums) the run-4 result.
TEST(DdProjectorCuda, ZRunsGiveTheSameBackProjection) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda, 0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::vector<testing::NamedGeometry> cases = {{"cone3d_40", testing::Cone3D(40, 36, 48, 56)},
                                               {"cone_vec_24", testing::ConeVec(24, 40, 30, 36)}};
  for (const auto& [name, g] : cases) {
    SCOPED_TRACE(name);
    const auto y = RandomUniform<float>(g.projection.sinogram_size(), 0.1, 2.0, 40);
    auto dy = DeviceArray<float>::FromHost(y, *stream);
    std::vector<float> run4;
    for (int run : {4, 1, 2, 8, 0}) {
      DdProjectorOptions o;
      o.mode = ExecutionMode::kDeterministic;
      o.back_z_run = run;
      auto p = DdProjector::Create(g, *stream, o);
      ASSERT_TRUE(p.ok()) << p.status();
      std::vector<float> ref(g.volume.size());
      const auto views = SubsetViews(g.projection.num_views(), 1, kAllSubsets);
      if (run == 4) cpu::Back((*p)->system(), y.data(), views, ref.data());
      auto back = DeviceArray<float>::Allocate(g.volume.size(), *stream);
      back.Poison(kNaN);
      ASSERT_TRUE((*p)->Back(dy.data(), back.data()).ok());
      const std::vector<float> got = back.Download();
      if (run == 4) {
        EXPECT_LE(RelL2(got, ref), 1e-5);
        run4 = got;
      } else {
        EXPECT_LE(RelL2(got, run4), 1e-6) << "z run " << run;
      }
    }
  }
}

TEST(DdProjectorCuda, CompactSubsetsMatchCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda, 0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  for (const auto& [name, g] : testing::AllKinds()) {
    SCOPED_TRACE(name);
    const int subsets = 5;
    auto gpu = DdProjector::Create(g, *stream, {ExecutionMode::kDeterministic, subsets});
    auto cpu = DdProjector::Create(g, Stream::Cpu(), {ExecutionMode::kDeterministic, subsets});
    ASSERT_TRUE(gpu.ok() && cpu.ok());
    const auto x = RandomUniform<float>(g.volume.size(), 0.2, 1.8, 21);
    auto dx = DeviceArray<float>::FromHost(x, *stream);
    for (int s = 0; s < subsets; ++s) {
      const size_t n = (*gpu)->range_size(s);
      std::vector<float> ref(n), ref_back(x.size());
      ASSERT_TRUE((*cpu)->Forward(x.data(), ref.data(), s).ok());
      auto out = DeviceArray<float>::Allocate(n, *stream);
      out.Poison(kNaN);
      ASSERT_TRUE((*gpu)->Forward(dx.data(), out.data(), s).ok());
      EXPECT_LE(RelL2(out.Download(), ref), 1e-5) << "subset " << s;

      const auto y = RandomUniform<float>(n, 0.1, 2.0, 30 + s);
      ASSERT_TRUE((*cpu)->Back(y.data(), ref_back.data(), s).ok());
      auto dy = DeviceArray<float>::FromHost(y, *stream);
      auto back = DeviceArray<float>::Allocate(x.size(), *stream);
      back.Poison(kNaN);
      ASSERT_TRUE((*gpu)->Back(dy.data(), back.data(), s).ok());
      EXPECT_LE(RelL2(back.Download(), ref_back), 1e-5) << "subset " << s;
    }
  }
}

}  // namespace
}  // namespace ct
}  // namespace recon
}  // namespace tessera

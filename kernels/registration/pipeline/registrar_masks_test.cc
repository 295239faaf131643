// Issue 34: fixed/moving masks through every path of the registrar (CPU):
// linear stages on every voxel and on the CPU's random samples, the greedy
// lean and standard loops, the B-spline stage and the mixed-precision lean
// stage, for mse, lncc and mi. Invariants:
// - a fixed mask of ones gives the unmasked run bit for bit;
// - a partial mask changes the result (the metric sees it);
// - at the identity on identical grids, a moving mask M gives the same loss
//   as the fixed mask M;
// - shards > 1 and out of core refuse masks; an empty mask is
//   FAILED_PRECONDITION naming the level;
// and the initial transform: the true affine as initial transform starts at
// a lower loss than the centre of mass and is the affine of a deformable-only
// run. Built twice: on the CPU (registrar_masks_test) and with
// TESSERA_MASKS_TEST_CUDA on the GPU (registrar_masks_gpu_test, tagged gpu,
// skipped without one; the linear stages there use every voxel).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "common/testing/gpu_test.h"
#include "kernels/registration/pipeline/metric_mask.h"
#include "kernels/registration/pipeline/registrar.h"
#include "kernels/registration/pipeline/registration_plan.h"
#include "kernels/registration/pipeline/space.h"
#include "kernels/registration/pipeline/synthetic.h"

namespace tessera::registration {
namespace {

#ifdef TESSERA_MASKS_TEST_CUDA
constexpr char kDevice[] = "cuda";
#define SKIP_WITHOUT_DEVICE() TESSERA_SKIP_WITHOUT_GPU()
#else
constexpr char kDevice[] = "cpu";
#define SKIP_WITHOUT_DEVICE() \
  do {                        \
  } while (0)
#endif

struct Case {
  Volume fixed, moving;
};

const Case& TheCase() {
  static const Case* c = [] {
    auto* out = new Case;
    Phantom p = MakePhantom(32).value();
    out->fixed = p.image;
    SyntheticOptions s;
    s.seed = 3;
    s.deformation_mm = 3;
    out->moving = MakeSyntheticPair(p.image, nullptr, s).value().moving;
    return out;
  }();
  return *c;
}

std::shared_ptr<const Volume> MaskOf(const Volume& like, const std::function<bool(int64_t, int64_t, int64_t)>& in) {
  auto m = std::make_shared<Volume>();
  m->geometry = like.geometry;
  m->data = NDArray::Allocate(like.data.shape(), DType::kUInt8).value();
  const int64_t nx = like.data.dim(0), ny = like.data.dim(1), nz = like.data.dim(2);
  for (int64_t k = 0; k < nz; ++k)
    for (int64_t j = 0; j < ny; ++j)
      for (int64_t i = 0; i < nx; ++i) m->data.data<uint8_t>()[i + nx * (j + ny * k)] = in(i, j, k) ? 1 : 0;
  return m;
}

enum class Path { kLinearFull, kLinearSampled, kGreedyLean, kGreedyStandard, kBspline, kMixed };

const char* PathName(Path p) {
  switch (p) {
    case Path::kLinearFull: return "linear_full";
    case Path::kLinearSampled: return "linear_sampled";
    case Path::kGreedyLean: return "greedy_lean";
    case Path::kGreedyStandard: return "greedy_standard";
    case Path::kBspline: return "bspline";
    case Path::kMixed: return "mixed";
  }
  return "";
}

RegistrationOptions OptionsFor(Path path, Metric metric) {
  RegistrationOptions o;
  o.metric = metric;
  o.device = kDevice;
  o.scales = {2, 1};
  o.rigid_iterations = {6, 4};
  o.affine_iterations = {6, 4};
  o.deformable_iterations = {4, 3};
  o.metric_options.lncc_window = 5;
  o.precision = Precision::kFull;
  o.linear_samples = 0;
  switch (path) {
    case Path::kLinearFull:
      o.stages = {Stage::kRigid, Stage::kAffine};
      break;
    case Path::kLinearSampled:
      o.stages = {Stage::kRigid, Stage::kAffine};
      o.linear_samples = 1000;  // levels of 4096 and 32768 voxels: both sampled (mse, mi)
      break;
    case Path::kGreedyLean:
      o.stages = {Stage::kDeformable};
      break;
    case Path::kGreedyStandard:
      o.stages = {Stage::kDeformable};
      o.memory_mode = MemoryMode::kStandard;
      break;
    case Path::kBspline:
      o.stages = {Stage::kDeformable};
      o.deformable_model = DeformableModel::kBspline;
      break;
    case Path::kMixed:
      o.stages = {Stage::kDeformable};
      o.precision = Precision::kMixed;  // applies to lncc; the others run full
      break;
  }
  return o;
}

RegistrationResult RunCase(const RegistrationOptions& o) {
  const Case& c = TheCase();
  auto r = Register(c.fixed, c.moving, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : RegistrationResult();
}

bool SameResult(const RegistrationResult& a, const RegistrationResult& b) {
  if (a.affine_ras != b.affine_ras || a.final_loss != b.final_loss) return false;
  if (a.displacement_ras.shape() != b.displacement_ras.shape()) return false;
  return a.displacement_ras.empty() ||
         std::memcmp(a.displacement_ras.raw_data(), b.displacement_ras.raw_data(), a.displacement_ras.nbytes()) == 0;
}

class MaskedPaths : public ::testing::TestWithParam<std::tuple<Path, Metric>> {};

TEST_P(MaskedPaths, OnesAreUnmaskedAndAPartialMaskChangesTheResult) {
  SKIP_WITHOUT_DEVICE();
  const auto [path, metric] = GetParam();
  const Case& c = TheCase();
  RegistrationOptions o = OptionsFor(path, metric);
  const RegistrationResult plain = RunCase(o);

  RegistrationOptions ones = o;
  ones.fixed_mask = MaskOf(c.fixed, [](int64_t, int64_t, int64_t) { return true; });
  const RegistrationResult with_ones = RunCase(ones);
  EXPECT_TRUE(SameResult(plain, with_ones)) << PathName(path) << " " << OptionName(metric);

  // Half the head excluded (a large "lesion" region), and a moving mask.
  RegistrationOptions partial = o;
  partial.fixed_mask = MaskOf(c.fixed, [](int64_t i, int64_t j, int64_t k) { return !(i > 16 && j > 10 && k > 8); });
  const RegistrationResult masked = RunCase(partial);
  EXPECT_FALSE(SameResult(plain, masked)) << PathName(path) << " " << OptionName(metric);
  partial.moving_mask = MaskOf(c.moving, [](int64_t i, int64_t, int64_t k) { return i < 26 || k < 20; });
  const RegistrationResult both = RunCase(partial);
  EXPECT_FALSE(SameResult(masked, both)) << PathName(path) << " " << OptionName(metric);
  EXPECT_TRUE(std::isfinite(both.final_loss));
}

INSTANTIATE_TEST_SUITE_P(
    AllPaths, MaskedPaths,
    ::testing::Combine(::testing::Values(Path::kLinearFull, Path::kLinearSampled, Path::kGreedyLean,
                                         Path::kGreedyStandard, Path::kBspline, Path::kMixed),
                       ::testing::Values(Metric::kMse, Metric::kLncc, Metric::kMi)),
    [](const auto& info) {
      return std::string(PathName(std::get<0>(info.param))) + "_" + OptionName(std::get<1>(info.param));
    });

TEST(Masks, MovingMaskAtTheIdentityEqualsTheFixedMask) {
  SKIP_WITHOUT_DEVICE();
  const Case& c = TheCase();
  for (Metric metric : {Metric::kMse, Metric::kLncc, Metric::kMi}) {
    RegistrationOptions o = OptionsFor(Path::kLinearFull, metric);
    o.init = Init::kNone;
    o.rigid_iterations = {0};
    o.stages = {Stage::kRigid};
    const auto in = [](int64_t i, int64_t j, int64_t) { return (i - 15) * (i - 15) + (j - 14) * (j - 14) < 120; };
    // The moving image on the fixed grid: identity maps voxels onto voxels.
    Volume moving_on_fixed = c.moving;
    moving_on_fixed.geometry = c.fixed.geometry;
    RegistrationOptions fixed_masked = o, moving_masked = o;
    fixed_masked.fixed_mask = MaskOf(c.fixed, in);
    moving_masked.moving_mask = MaskOf(c.fixed, in);
    auto a = Register(c.fixed, moving_on_fixed, fixed_masked);
    auto b = Register(c.fixed, moving_on_fixed, moving_masked);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(a->initial_loss, b->initial_loss) << OptionName(metric);
    EXPECT_EQ(a->final_loss, b->final_loss) << OptionName(metric);
    auto plain = Register(c.fixed, moving_on_fixed, o);
    ASSERT_TRUE(plain.ok());
    EXPECT_NE(plain->initial_loss, a->initial_loss) << OptionName(metric);
  }
}

TEST(Masks, RefusedWhereNotSupportedAndEmptyIsAFailedPrecondition) {
  SKIP_WITHOUT_DEVICE();
  const Case& c = TheCase();
  RegistrationOptions o = OptionsFor(Path::kGreedyLean, Metric::kMse);
  o.fixed_mask = MaskOf(c.fixed, [](int64_t, int64_t, int64_t) { return true; });
  RegistrationOptions sharded = o;
  sharded.shards = 2;
  auto plan = PlanRegistration(sharded);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << plan.status();
  EXPECT_NE(plan.status().message().find("shards > 1"), std::string::npos);
  RegistrationOptions ooc = o;
  ooc.force_out_of_core = true;
  EXPECT_EQ(PlanRegistration(ooc).status().code(), absl::StatusCode::kInvalidArgument);
  // Masks added after planning are checked by Register too.
  RegistrationOptions plain_sharded = OptionsFor(Path::kGreedyLean, Metric::kMse);
  plain_sharded.shards = 2;
  RegistrationPlan p = PlanRegistration(plain_sharded).value();
  p.options.moving_mask = o.fixed_mask;
  EXPECT_EQ(Register(c.fixed, c.moving, p).status().code(), absl::StatusCode::kInvalidArgument);

  RegistrationOptions empty = o;
  empty.fixed_mask = MaskOf(c.fixed, [](int64_t, int64_t, int64_t) { return false; });
  auto r = Register(c.fixed, c.moving, empty);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_NE(r.status().message().find("level x"), std::string::npos) << r.status();
  // A moving mask far from where the fixed voxels map.
  RegistrationOptions apart = OptionsFor(Path::kGreedyLean, Metric::kMse);
  auto far = std::make_shared<Volume>(*MaskOf(c.moving, [](int64_t, int64_t, int64_t) { return true; }));
  far->geometry.origin = {500, 500, 500};
  apart.moving_mask = far;
  r = Register(c.fixed, c.moving, apart);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  // Not 3-D.
  RegistrationOptions flat = o;
  auto four = std::make_shared<Volume>();
  four->data = NDArray::Allocate({4, 4, 4, 2}, DType::kUInt8).value();
  flat.fixed_mask = four;
  EXPECT_EQ(PlanRegistration(flat).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Masks, ResampleNearestFollowsPhysicalSpace) {
  // A mask on a grid twice as fine and shifted: nearest at physical points.
  Volume mask;
  mask.geometry.spacing = {1, 1, 1};
  mask.geometry.origin = {-0.25, 0, 0};
  mask.data = NDArray::Allocate({8, 2, 2}, DType::kFloat32).value();
  for (int64_t v = 0; v < 32; ++v) mask.data.data<float>()[v] = (v % 8) >= 4 ? 2.5f : 0.f;
  GridSpace grid;
  grid.dims = {4, 1, 1};
  grid.geometry.spacing = {2, 1, 1};
  // Grid x = 0, 2, 4, 6 -> mask index (x + 0.25) = 0.25, 2.25, 4.25, 6.25 -> 0, 2, 4, 6.
  NDArray out = ResampleMaskNearest(mask, grid, DType::kUInt8).value();
  EXPECT_EQ(out.data<uint8_t>()[0], 0);
  EXPECT_EQ(out.data<uint8_t>()[1], 0);
  EXPECT_EQ(out.data<uint8_t>()[2], 1);
  EXPECT_EQ(out.data<uint8_t>()[3], 1);
  grid.geometry.origin = {20, 0, 0};  // outside the mask's extent
  out = ResampleMaskNearest(mask, grid, DType::kUInt8).value();
  for (int v = 0; v < 4; ++v) EXPECT_EQ(out.data<uint8_t>()[v], 0);
}

// The true affine as moving header transform: moving(T x) = fixed(x).
TEST(InitialTransform, TheTrueAffineStartsLowerThanTheCentreOfMass) {
  SKIP_WITHOUT_DEVICE();
  const Case& c = TheCase();
  const double a = 0.17;  // ~10 degrees about z, plus a shift
  const Mat4 t = {std::cos(a), -std::sin(a), 0, 6, std::sin(a), std::cos(a), 0, -4, 0, 0, 1, 3, 0, 0, 0, 1};
  Volume moving = c.fixed;
  moving.geometry = Geometry::FromAffine(Multiply(t, c.fixed.geometry.IndexToWorld())).value();
  for (Metric metric : {Metric::kMse, Metric::kLncc, Metric::kMi}) {
    RegistrationOptions o = OptionsFor(Path::kLinearFull, metric);
    o.rigid_iterations = {2};
    o.affine_iterations = {2};
    auto com = Register(c.fixed, moving, o);
    o.initial_transform = t;
    auto given = Register(c.fixed, moving, o);
    ASSERT_TRUE(com.ok()) << com.status();
    ASSERT_TRUE(given.ok()) << given.status();
    EXPECT_LT(given->initial_loss, com->initial_loss) << OptionName(metric);
    EXPECT_NE(given->log.front().find("init: given transform"), std::string::npos) << given->log.front();
    EXPECT_NE(com->log.front().find("centre-of-mass"), std::string::npos) << com->log.front();
  }
  // Deformable only: the given transform is the affine.
  RegistrationOptions o = OptionsFor(Path::kGreedyLean, Metric::kMse);
  o.initial_transform = t;
  auto r = Register(c.fixed, moving, o);
  ASSERT_TRUE(r.ok()) << r.status();
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(r->affine_ras[i], t[i], 1e-9) << i;
}

}  // namespace
}  // namespace tessera::registration

#include "kernels/registration/mutual_info.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/buffer.h"
#include "common/testing/gpu_test.h"
#include "kernels/registration/mutual_info_unfused.h"
#include "kernels/registration/reg_testing.h"

namespace tessera {
namespace registration {
namespace {

using reg_testing::Compare;
using reg_testing::HostFloat;
using reg_testing::PoisonedDevice;
using reg_testing::RandomUniform;
using reg_testing::ToDevice;
using reg_testing::ToHost;

// --- An independent, brute-force Mattes MI: every (voxel, bin, bin) term. ---
double Beta3(double u) {
  const double a = std::abs(u);
  if (a < 1) return (4 - 6 * a * a + 3 * a * a * a) / 6;
  if (a < 2) return (2 - a) * (2 - a) * (2 - a) / 6;
  return 0;
}

double DirectMi(const NDArray& f, const NDArray& w, const NDArray* mask, const MattesMiOptions& o) {
  const int B = o.bins;
  std::vector<double> H(B * B, 0.0);
  auto coord = [&](double v, double lo, double hi) {
    double x = (v - lo) / (hi - lo);
    x = std::min(1.0, std::max(0.0, x));
    return 1 + x * (B - 4);
  };
  for (int64_t k = 0; k < f.num_elements(); ++k) {
    if (mask && mask->data<uint8_t>()[k] == 0) continue;
    const double tf = coord(f.data<float>()[k], o.fixed_min, o.fixed_max);
    const double tw = coord(w.data<float>()[k], o.warped_min, o.warped_max);
    for (int a = 0; a < B; ++a) {
      const double wa = o.fixed_kernel == ParzenKernel::kBox ? (a == int(std::floor(tf + 0.5)) ? 1.0 : 0.0)
                                                             : Beta3(a - tf);
      if (wa == 0) continue;
      for (int b = 0; b < B; ++b) H[a * B + b] += wa * Beta3(b - tw);
    }
  }
  double total = 0;
  for (double h : H) total += h;
  std::vector<double> pf(B, 0), pw(B, 0);
  for (int a = 0; a < B; ++a)
    for (int b = 0; b < B; ++b) pf[a] += H[a * B + b] / total, pw[b] += H[a * B + b] / total;
  double mi = 0;
  for (int a = 0; a < B; ++a)
    for (int b = 0; b < B; ++b) {
      const double p = H[a * B + b] / total;
      if (p > 0) mi += p * std::log(p / (pf[a] * pw[b]));
    }
  return mi;
}

// A smooth random "image" in [0.05, 0.95] plus a related second image: the
// pair has real, but not perfect, dependence.
struct Pair {
  NDArray fixed, warped;
};
Pair RelatedPair(const Shape& shape, std::mt19937& rng, double noise = 0.05, double background = 0.0) {
  Pair p{HostFloat(shape), HostFloat(shape)};
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<double> g(0, noise);
  const double fx = 0.5 + u(rng), fy = 0.3 + u(rng), fz = 0.7 + u(rng);
  const int64_t nx = shape[0], ny = shape.size() > 1 ? shape[1] : 1;
  for (int64_t i = 0; i < p.fixed.num_elements(); ++i) {
    const double x = i % nx, y = (i / nx) % ny, z = i / (nx * ny);
    double f = 0.5 + 0.2 * std::sin(0.3 * fx * x) + 0.15 * std::cos(0.25 * fy * y + 0.2 * fz * z) + g(rng) * 0.5;
    if (u(rng) < background) f = 0.0;  // a constant background
    f = std::min(0.95, std::max(0.0, f));
    double w = 0.2 + 0.6 * f * f + g(rng);  // a nonlinear, noisy function of f
    p.fixed.data<float>()[i] = float(f);
    p.warped.data<float>()[i] = float(std::min(1.2, std::max(-0.2, w)));
  }
  return p;
}

MattesMiOptions Options(int bins = 32, ParzenKernel fixed_kernel = ParzenKernel::kCubicBSpline) {
  MattesMiOptions o;
  o.bins = bins;
  o.fixed_min = -0.02f;
  o.fixed_max = 1.0f;
  o.warped_min = -0.1f;
  o.warped_max = 1.1f;
  o.fixed_kernel = fixed_kernel;
  return o;
}

NDArray RandomMask(const Shape& shape, std::mt19937& rng, double keep) {
  NDArray m = NDArray::Allocate(shape, DType::kUInt8).value();
  std::bernoulli_distribution b(keep);
  for (int64_t i = 0; i < m.num_elements(); ++i) m.data<uint8_t>()[i] = b(rng) ? uint8_t(1 + i % 200) : 0;
  return m;
}

// ---------------------------------------------------------------------------
// CPU reference against the brute-force definition and known cases.
// ---------------------------------------------------------------------------
TEST(MattesMiCpu, MatchesDirectHistogram) {
  std::mt19937 rng(1);
  Pair p = RelatedPair({15, 11, 9}, rng);
  NDArray mask = RandomMask({15, 11, 9}, rng, 0.7);
  for (int bins : {8, 32, 64}) {
    for (ParzenKernel kernel : {ParzenKernel::kCubicBSpline, ParzenKernel::kBox}) {
      for (const NDArray* m : {static_cast<const NDArray*>(nullptr), static_cast<const NDArray*>(&mask)}) {
        const MattesMiOptions o = Options(bins, kernel);
        const MattesMiResult r = MattesMutualInformation(p.fixed, p.warped, m, o, nullptr, Stream::Cpu()).value();
        const double direct = DirectMi(p.fixed, p.warped, m, o);
        SCOPED_TRACE(testing::Message() << "bins " << bins << " box " << (kernel == ParzenKernel::kBox)
                                        << " mask " << (m != nullptr));
        EXPECT_GT(direct, 0.05);
        EXPECT_NEAR(r.mutual_information, direct, 1e-12 * std::max(1.0, direct));
        EXPECT_DOUBLE_EQ(r.loss, -r.mutual_information);
        int64_t in_mask = 0;
        for (int64_t i = 0; i < p.fixed.num_elements(); ++i) in_mask += m ? (m->data<uint8_t>()[i] != 0) : 1;
        EXPECT_NEAR(r.total_weight, double(in_mask), 1e-9 * in_mask);
      }
    }
  }
}

TEST(MattesMiCpu, SelfInformationExceedsNoise) {
  std::mt19937 rng(2);
  const Shape shape = {32, 30, 28};
  NDArray f = RandomUniform(shape, rng, 0.f, 1.f);
  NDArray noise = RandomUniform(shape, rng, 0.f, 1.f);
  MattesMiOptions o;  // [0, 1] ranges, 32 bins
  const double self = MattesMutualInformation(f, f, nullptr, o, nullptr, Stream::Cpu())->mutual_information;
  const double indep = MattesMutualInformation(f, noise, nullptr, o, nullptr, Stream::Cpu())->mutual_information;
  // Uniform F over 28 bins: MI(F, F) is close to the Parzen-smoothed entropy,
  // ~ log(28) minus the window's blur; independent noise gives ~0 (finite-sample bias only).
  EXPECT_GT(self, 2.0);
  EXPECT_LT(indep, 0.05);
  EXPECT_GE(indep, 0.0);
}

TEST(MattesMiCpu, InvariantToMonotonicIntensityMaps) {
  std::mt19937 rng(3);
  const Shape shape = {40, 36, 30};
  Pair p = RelatedPair(shape, rng, 0.08);
  const MattesMiOptions o = Options();
  const double base = MattesMutualInformation(p.fixed, p.warped, nullptr, o, nullptr, Stream::Cpu())->mutual_information;
  ASSERT_GT(base, 0.2);
  // (1) Affine map with the window mapped alongside: identical normalised values.
  NDArray affine = HostFloat(shape);
  for (int64_t i = 0; i < affine.num_elements(); ++i) affine.data<float>()[i] = 250.f * p.warped.data<float>()[i] + 40.f;
  MattesMiOptions oa = o;
  oa.warped_min = 250.f * o.warped_min + 40.f;
  oa.warped_max = 250.f * o.warped_max + 40.f;
  EXPECT_NEAR(MattesMutualInformation(p.fixed, affine, nullptr, oa, nullptr, Stream::Cpu())->mutual_information,
              base, 1e-5 * base);
  // (2) Reversal (v -> lo + hi - v): the window is symmetric, so the
  // histogram is mirrored and MI is unchanged up to rounding.
  NDArray reversed = HostFloat(shape);
  for (int64_t i = 0; i < reversed.num_elements(); ++i)
    reversed.data<float>()[i] = o.warped_min + o.warped_max - p.warped.data<float>()[i];
  EXPECT_NEAR(MattesMutualInformation(p.fixed, reversed, nullptr, o, nullptr, Stream::Cpu())->mutual_information,
              base, 1e-5 * base);
  // (3) A nonlinear monotonic map (cube root, window mapped too): continuous MI
  // is invariant; the 32-bin Parzen estimate only approximately.
  NDArray curved = HostFloat(shape);
  auto g = [](double v) { return std::cbrt(v + 0.2); };
  for (int64_t i = 0; i < curved.num_elements(); ++i) curved.data<float>()[i] = float(g(p.warped.data<float>()[i]));
  MattesMiOptions oc = o;
  oc.warped_min = float(g(o.warped_min));
  oc.warped_max = float(g(o.warped_max));
  const double mapped =
      MattesMutualInformation(p.fixed, curved, nullptr, oc, nullptr, Stream::Cpu())->mutual_information;
  EXPECT_NEAR(mapped, base, 0.1 * base);
  // ...while destroying the relation does change it a lot.
  std::vector<float> shuffled(p.warped.data<float>(), p.warped.data<float>() + p.warped.num_elements());
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  std::copy(shuffled.begin(), shuffled.end(), curved.data<float>());
  EXPECT_LT(MattesMutualInformation(p.fixed, curved, nullptr, oc, nullptr, Stream::Cpu())->mutual_information,
            0.2 * base);
}

TEST(MattesMiCpu, MaskEqualsCompactedSubset) {
  std::mt19937 rng(4);
  const Shape shape = {21, 19, 17};
  Pair p = RelatedPair(shape, rng);
  NDArray mask = RandomMask(shape, rng, 0.4);
  std::vector<float> fs, ws;
  for (int64_t i = 0; i < mask.num_elements(); ++i) {
    if (mask.data<uint8_t>()[i]) fs.push_back(p.fixed.data<float>()[i]), ws.push_back(p.warped.data<float>()[i]);
  }
  NDArray fc = HostFloat({int64_t(fs.size())}), wc = HostFloat({int64_t(ws.size())});
  std::copy(fs.begin(), fs.end(), fc.data<float>());
  std::copy(ws.begin(), ws.end(), wc.data<float>());
  const MattesMiOptions o = Options();
  NDArray grad = HostFloat(shape, std::nanf(""));
  NDArray grad_c = HostFloat({int64_t(fs.size())}, std::nanf(""));
  const double masked = MattesMutualInformation(p.fixed, p.warped, &mask, o, &grad, Stream::Cpu())->mutual_information;
  const double compact = MattesMutualInformation(fc, wc, nullptr, o, &grad_c, Stream::Cpu())->mutual_information;
  EXPECT_NEAR(masked, compact, 1e-12);
  int64_t j = 0;
  for (int64_t i = 0; i < mask.num_elements(); ++i) {
    if (mask.data<uint8_t>()[i]) {
      EXPECT_FLOAT_EQ(grad.data<float>()[i], grad_c.data<float>()[j++]);
    } else {
      EXPECT_EQ(grad.data<float>()[i], 0.f);
    }
  }
}

// dLoss/dW against central differences of the loss, per voxel.
TEST(MattesMiCpu, GradientMatchesFiniteDifferences) {
  std::mt19937 rng(5);
  const Shape shape = {12, 10, 8};
  for (ParzenKernel kernel : {ParzenKernel::kCubicBSpline, ParzenKernel::kBox}) {
    Pair p = RelatedPair(shape, rng, 0.1);
    NDArray mask = RandomMask(shape, rng, 0.85);
    const MattesMiOptions o = Options(16, kernel);
    NDArray grad = HostFloat(shape, std::nanf(""));
    ASSERT_TRUE(MattesMutualInformation(p.fixed, p.warped, &mask, o, &grad, Stream::Cpu()).ok());
    double max_grad = 0;
    for (int64_t i = 0; i < grad.num_elements(); ++i) max_grad = std::max(max_grad, double(std::abs(grad.data<float>()[i])));
    ASSERT_GT(max_grad, 0);
    std::uniform_int_distribution<int64_t> pick(0, p.warped.num_elements() - 1);
    int checked = 0;
    for (int trial = 0; trial < 80; ++trial) {
      const int64_t k = pick(rng);
      const float w0 = p.warped.data<float>()[k];
      const float h = 2e-3f;
      if (w0 - h <= o.warped_min || w0 + h >= o.warped_max) continue;  // clamped: gradient 0 by definition
      auto loss_at = [&](float v) {
        p.warped.data<float>()[k] = v;
        return MattesMutualInformation(p.fixed, p.warped, &mask, o, nullptr, Stream::Cpu())->loss;
      };
      const float hi = w0 + h, lo = w0 - h;
      const double fd = (loss_at(hi) - loss_at(lo)) / (double(hi) - double(lo));
      p.warped.data<float>()[k] = w0;
      SCOPED_TRACE(testing::Message() << "voxel " << k << " box " << (kernel == ParzenKernel::kBox));
      EXPECT_NEAR(grad.data<float>()[k], fd, 2e-3 * max_grad + 1e-4 * std::abs(fd));
      ++checked;
    }
    EXPECT_GT(checked, 50);
  }
}

TEST(MattesMiCpu, ClampedAndMaskedVoxelsHaveZeroGradient) {
  const Shape shape = {8, 4, 2};
  std::mt19937 rng(6);
  Pair p = RelatedPair(shape, rng);
  p.warped.data<float>()[3] = 5.f;    // above the window
  p.warped.data<float>()[7] = -5.f;   // below
  NDArray grad = HostFloat(shape, 1.f);
  ASSERT_TRUE(MattesMutualInformation(p.fixed, p.warped, nullptr, Options(), &grad, Stream::Cpu()).ok());
  EXPECT_EQ(grad.data<float>()[3], 0.f);
  EXPECT_EQ(grad.data<float>()[7], 0.f);
  NDArray none = NDArray::Allocate(shape, DType::kUInt8).value();
  std::fill(none.data<uint8_t>(), none.data<uint8_t>() + none.num_elements(), 0);
  MattesMiResult r = MattesMutualInformation(p.fixed, p.warped, &none, Options(), &grad, Stream::Cpu()).value();
  EXPECT_EQ(r.mutual_information, 0.0);
  EXPECT_EQ(r.total_weight, 0.0);
  for (int64_t i = 0; i < grad.num_elements(); ++i) EXPECT_EQ(grad.data<float>()[i], 0.f);
}

TEST(MattesMi, RejectsBadArguments) {
  NDArray a = HostFloat({4, 4, 4}, 0.5f), b = HostFloat({4, 4, 3}, 0.5f);
  MattesMiOptions o;
  EXPECT_EQ(MattesMutualInformation(a, b, nullptr, o, nullptr, Stream::Cpu()).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.bins = 4;
  EXPECT_EQ(MattesMutualInformation(a, a, nullptr, o, nullptr, Stream::Cpu()).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.bins = 32;
  o.warped_max = o.warped_min;
  EXPECT_EQ(MattesMutualInformation(a, a, nullptr, o, nullptr, Stream::Cpu()).status().code(),
            absl::StatusCode::kInvalidArgument);
  o = MattesMiOptions();
  NDArray grad = HostFloat({4, 4, 4});
  EXPECT_EQ(MattesMutualInformation(a, grad, nullptr, o, &grad, Stream::Cpu()).status().code(),
            absl::StatusCode::kInvalidArgument);  // grad aliases warped
  NDArray i32 = NDArray::Allocate({4, 4, 4}, DType::kInt32).value();
  EXPECT_EQ(MattesMutualInformation(a, i32, nullptr, o, nullptr, Stream::Cpu()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// CUDA parity. Tolerances (mutual_info.h): MI within 1e-4 * max(1, MI);
// gradient per voxel within 2e-3 * max |grad_cpu| + 1e-5 * g_unit, where
// g_unit = (B - 4) / ((max_W - min_W) * sum H) is the gradient of a unit
// entry of G (the floor matters only when MI ~ 0, e.g. N = 1). With the box
// kernel a voxel whose fixed bin coordinate lies within 1e-4 of a bin edge may
// fall in the neighbouring bin (float vs double): such voxels are exempt.
// ---------------------------------------------------------------------------
bool NearBoxEdge(float v, const MattesMiOptions& o) {
  if (o.fixed_kernel != ParzenKernel::kBox) return false;
  double x = (double(v) - o.fixed_min) / (double(o.fixed_max) - o.fixed_min);
  x = std::min(1.0, std::max(0.0, x));
  const double t = 1 + x * (o.bins - 4) + 0.5;
  const double frac = t - std::floor(t);
  return frac < 1e-4 || frac > 1 - 1e-4;
}

void ExpectParity(const Pair& p, const NDArray* mask, const MattesMiOptions& o, const Stream& stream,
                  Buffer* scratch = nullptr) {
  NDArray grad_cpu = HostFloat(p.fixed.shape(), std::nanf(""));
  const MattesMiResult ref = MattesMutualInformation(p.fixed, p.warped, mask, o, &grad_cpu, Stream::Cpu()).value();
  NDArray df = ToDevice(p.fixed, stream), dw = ToDevice(p.warped, stream);
  NDArray dm = mask ? ToDevice(*mask, stream) : NDArray();
  NDArray dg = PoisonedDevice(p.fixed.shape(), stream);
  auto got = MattesMutualInformation(df, dw, mask ? &dm : nullptr, o, &dg, stream, scratch);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_NEAR(got->mutual_information, ref.mutual_information, 1e-4 * std::max(1.0, ref.mutual_information));
  EXPECT_NEAR(got->total_weight, ref.total_weight, 1e-5 * std::max(1.0, ref.total_weight));
  const NDArray hg = ToHost(dg, stream);
  const auto d = Compare(hg, grad_cpu);
  EXPECT_EQ(d.nonfinite, 0);
  const double g_unit = (o.bins - 4) / ((double(o.warped_max) - o.warped_min) * std::max(1.0, ref.total_weight));
  const double tol = 2e-3 * d.max_ref + 1e-5 * g_unit;
  int64_t bad = 0, exempt = 0;
  double worst = 0;
  for (int64_t i = 0; i < hg.num_elements(); ++i) {
    const double diff = std::abs(double(hg.data<float>()[i]) - grad_cpu.data<float>()[i]);
    if (!(diff <= tol)) {
      if (NearBoxEdge(p.fixed.data<float>()[i], o)) {
        ++exempt;
      } else {
        ++bad;
        worst = std::max(worst, diff);
      }
    }
  }
  EXPECT_EQ(bad, 0) << "worst " << worst << " tolerance " << tol << " max |grad| " << d.max_ref;
  EXPECT_LE(exempt, std::max<int64_t>(10, hg.num_elements() / 100000));
  // Forward only gives the same value.
  auto fwd = MattesMutualInformation(df, dw, mask ? &dm : nullptr, o, nullptr, stream, scratch);
  ASSERT_TRUE(fwd.ok()) << fwd.status();
  EXPECT_NEAR(fwd->mutual_information, got->mutual_information, 1e-6 * std::max(1.0, ref.mutual_information));
}

TEST(MattesMiParity, CudaMatchesCpuOnRandomInputs) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  std::mt19937 rng(11);
  const Shape shapes[] = {{1}, {7}, {1023}, {33, 17, 5}, {64, 64, 64}, {181, 217, 181}};
  for (const Shape& shape : shapes) {
    for (int variant = 0; variant < 4; ++variant) {
      SCOPED_TRACE(ShapeToString(shape) + " variant " + std::to_string(variant));
      // variant 2 and 3: a large constant background (exercises warp-uniform windows).
      Pair p = RelatedPair(shape, rng, 0.05, variant >= 2 ? 0.6 : 0.0);
      NDArray mask = RandomMask(shape, rng, 0.8);
      const MattesMiOptions o = Options(variant == 3 ? 64 : 32,
                                        variant == 1 ? ParzenKernel::kBox : ParzenKernel::kCubicBSpline);
      ExpectParity(p, variant % 2 == 0 ? nullptr : &mask, o, stream);
    }
  }
}

TEST(MattesMiParity, ScratchIsTheOnlyDeviceMemoryAndIsReusable) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  std::mt19937 rng(12);
  const Shape shape = {96, 80, 72};
  Pair p = RelatedPair(shape, rng);
  NDArray df = ToDevice(p.fixed, stream), dw = ToDevice(p.warped, stream);
  NDArray dg = PoisonedDevice(shape, stream);
  const MattesMiOptions o = Options();
  const size_t scratch_bytes = MattesMiScratchBytes(o.bins, stream.ordinal()).value();
  EXPECT_LT(scratch_bytes, size_t{16} << 20);  // independent of N; ~2 MB on an H200
  auto own_scratch = std::make_shared<DeviceMemoryTracker>();
  double mi1 = 0;
  {
    ScopedDeviceMemoryCharge charge(own_scratch);
    mi1 = MattesMutualInformation(df, dw, nullptr, o, &dg, stream)->mutual_information;
  }
  EXPECT_EQ(own_scratch->peak_bytes(), scratch_bytes);
  auto scratch = Buffer::Allocate(MemoryKind::kDevice, scratch_bytes, stream.ordinal()).value();
  auto given_scratch = std::make_shared<DeviceMemoryTracker>();
  double mi2 = 0, mi3 = 0;
  {
    ScopedDeviceMemoryCharge charge(given_scratch);
    mi2 = MattesMutualInformation(df, dw, nullptr, o, &dg, stream, scratch.get())->mutual_information;
    mi3 = MattesMutualInformation(df, dw, nullptr, o, &dg, stream, scratch.get())->mutual_information;
  }
  EXPECT_EQ(given_scratch->peak_bytes(), 0u);  // nothing allocated
  EXPECT_NEAR(mi1, mi2, 1e-6 * mi1);
  EXPECT_NEAR(mi2, mi3, 1e-6 * mi1);
  // Too-small scratch is rejected.
  auto tiny = Buffer::Allocate(MemoryKind::kDevice, 256, stream.ordinal()).value();
  EXPECT_EQ(MattesMutualInformation(df, dw, nullptr, o, &dg, stream, tiny.get()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The benchmark's unfused baseline computes the same function.
TEST(MattesMiParity, UnfusedBaselineMatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  std::mt19937 rng(13);
  const Shape shape = {48, 40, 36};
  for (int variant = 0; variant < 2; ++variant) {
    auto unfused = MattesMiUnfused::Create(stream).value();  // fresh: its tables are cached per object
    Pair p = RelatedPair(shape, rng, 0.05, 0.3);
    NDArray mask = RandomMask(shape, rng, 0.8);
    const MattesMiOptions o = Options(32, variant ? ParzenKernel::kBox : ParzenKernel::kCubicBSpline);
    const NDArray* m = variant ? &mask : nullptr;
    NDArray grad_cpu = HostFloat(shape);
    const MattesMiResult ref = MattesMutualInformation(p.fixed, p.warped, m, o, &grad_cpu, Stream::Cpu()).value();
    NDArray df = ToDevice(p.fixed, stream), dw = ToDevice(p.warped, stream), dg = PoisonedDevice(shape, stream);
    NDArray dm = m ? ToDevice(mask, stream) : NDArray();
    auto tracker = std::make_shared<DeviceMemoryTracker>();
    absl::StatusOr<MattesMiResult> got;
    {
      ScopedDeviceMemoryCharge charge(tracker);
      got = unfused->Run(df, dw, m ? &dm : nullptr, o, &dg);
    }
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_GE(tracker->peak_bytes(), MattesMiUnfused::DeviceBytes(p.fixed.num_elements(), o.bins, true));
    EXPECT_NEAR(got->mutual_information, ref.mutual_information, 1e-3 * ref.mutual_information);
    const auto d = Compare(ToHost(dg, stream), grad_cpu);
    EXPECT_EQ(d.nonfinite, 0);
    EXPECT_LE(d.max_abs, 1e-2 * d.max_ref);
  }
}

}  // namespace
}  // namespace registration
}  // namespace tessera

// CUDA PET against the CPU reference on random (non-zero) inputs; skipped
// without a GPU. Geometries avoid views at exactly 45 degrees, where the two
// backends may round a ray's dominant axis differently (both right, but
// sampled along different axes). Tolerances (relative L2 unless stated):
//   projector forward, float scatter, fixed-point scatter and gather back
//     projections: 1e-4;
//   fixed-point scatter and gather repeated, deterministic OSEM repeated:
//     bit-identical;
//   fixed-point scatter with the LORs in natural, reversed and shuffled thread
//     order: bit-identical (the float scatter's differing voxels are printed,
//     not asserted: that depends on the hardware's scheduling); fixed point vs
//     the float scatter on the GPU 1e-5; non-finite data: NaN everywhere;
//   EM ops: ratio 1e-6, log-likelihood 1e-9 (relative), first invalid index exact;
//   OSEM (S = 4, 2 iterations, attenuation, background): 1e-4, log-likelihoods
//     (and with detection efficiencies, EfficienciesMatchCpu: projections and OSEM 1e-4)
//     within 1e-5 of (|LL| + total counts) (the sum cancels);
//   list-mode data term: naive vs bucketed (fixed-point scatter, gather and
//     float scatter) 1e-5, each vs CPU 1e-4; log terms within 1e-5 (vs CPU)
//     and 1e-6 (naive vs bucketed) of (|sum| + events);
//   bucketed deterministic repeated, and with the events in another order:
//     bit-identical; list-mode OSEM vs CPU 1e-4.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "common/testing/device_array.h"
#include "common/testing/gpu_test.h"
#include "kernels/reconstruction/pet/em_ops.h"
#include "kernels/reconstruction/pet/listmode_osem.h"
#include "kernels/reconstruction/pet/osem.h"
#include "kernels/reconstruction/pet/pet_testing.h"
#include "kernels/reconstruction/pet/projector.h"

namespace tessera {
namespace recon {
namespace pet {
namespace {

using ::tessera::testing::DeviceArray;
using testing::RelL2;
using testing::Tof;

std::vector<double> Angles(int n, double range) {
  std::vector<double> a = EvenAngles(n, range);
  for (double& x : a) x += 0.05;
  return a;
}

std::vector<PetGeometry> Geometries() {
  PetGeometry fan;
  fan.ct.volume = CenteredVolume(40, 36);
  fan.ct.projection = FanBeam2D(Angles(60, 2 * M_PI), 1.5, 64, 90, 70);
  fan.tof = Tof(7, 8.0, 12.0);
  PetGeometry parallel;
  parallel.ct.volume = CenteredVolume(33, 30);
  parallel.ct.projection = ParallelBeam2D(Angles(45, M_PI), 1.0, 50);
  PetGeometry cone = testing::Cone3D(Tof(5, 4.0, 7.0));
  cone.ct.projection = ConeBeam(Angles(20, 2 * M_PI), 1.5, 1.5, 14, 20, 50, 40);
  return {fan, parallel, cone};
}

absl::StatusOr<Stream> Gpu() { return Stream::Create(Backend::kCuda); }

TEST(PetCudaTest, ProjectorMatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto gpu = Gpu();
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const Stream cpu = Stream::Cpu();
  for (const PetGeometry& g : Geometries()) {
    const std::vector<float> mu = testing::Random(g.ct.volume.size(), 11, 0.0f, 0.01f);
    auto d_mu = DeviceArray<float>::FromHost(mu, *gpu);
    auto A_cpu = PetProjector::Create(g, cpu, {3, ExecutionMode::kDefault, mu.data()});
    auto A_gpu = PetProjector::Create(g, *gpu, {3, ExecutionMode::kDefault, d_mu.data()});
    auto A_gather = PetProjector::Create(
        g, *gpu, {3, ExecutionMode::kDeterministic, d_mu.data(), DeterministicBack::kGather});
    ASSERT_TRUE(A_cpu.ok() && A_gpu.ok() && A_gather.ok()) << A_gpu.status();
    ASSERT_EQ((*A_gpu)->deterministic_back(), DeterministicBack::kFixedPoint);
    for (int subset : {kAllSubsets, 2}) {
      const std::vector<float> x = testing::Random((*A_cpu)->domain_size(), 1);
      const std::vector<float> y = testing::Random((*A_cpu)->range_size(subset), 2);
      std::vector<float> ax((*A_cpu)->range_size(subset)), aty((*A_cpu)->domain_size());
      ASSERT_TRUE((*A_cpu)->Forward(x.data(), ax.data(), subset).ok());
      ASSERT_TRUE((*A_cpu)->Back(y.data(), aty.data(), subset).ok());
      auto dx = DeviceArray<float>::FromHost(x, *gpu);
      auto dy = DeviceArray<float>::FromHost(y, *gpu);
      auto dax = DeviceArray<float>::Allocate(ax.size(), *gpu);
      auto daty = DeviceArray<float>::Allocate(aty.size(), *gpu);
      dax.Poison(::tessera::testing::kNaN);
      daty.Poison(::tessera::testing::kNaN);
      ASSERT_TRUE((*A_gpu)->Forward(dx.data(), dax.data(), subset).ok());
      EXPECT_LT(RelL2(dax.Download(), ax), 1e-4) << Describe(g) << " subset " << subset;
      for (ExecutionMode mode : {ExecutionMode::kDefault, ExecutionMode::kDeterministic}) {
        daty.Poison(::tessera::testing::kNaN);
        ASSERT_TRUE((*A_gpu)->BackWithMode(dy.data(), daty.data(), subset, mode).ok());
        EXPECT_LT(RelL2(daty.Download(), aty), 1e-4) << Describe(g) << " " << ExecutionModeName(mode);
      }
      daty.Poison(::tessera::testing::kNaN);
      ASSERT_TRUE((*A_gather)->Back(dy.data(), daty.data(), subset).ok());
      EXPECT_LT(RelL2(daty.Download(), aty), 1e-4) << Describe(g) << " gather";
    }
  }
}

TEST(PetCudaTest, DeterministicBackProjectionIsBitIdentical) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto gpu = Gpu();
  ASSERT_TRUE(gpu.ok());
  for (const PetGeometry& g : Geometries()) {
    for (DeterministicBack back : {DeterministicBack::kAuto, DeterministicBack::kGather}) {
      auto A = PetProjector::Create(g, *gpu, {1, ExecutionMode::kDeterministic, nullptr, back});
      ASSERT_TRUE(A.ok());
      auto dy = DeviceArray<float>::FromHost(testing::Random((*A)->range_size(), 5), *gpu);
      auto a = DeviceArray<float>::Allocate((*A)->domain_size(), *gpu);
      auto b = DeviceArray<float>::Allocate((*A)->domain_size(), *gpu);
      ASSERT_TRUE((*A)->Back(dy.data(), a.data()).ok());
      ASSERT_TRUE((*A)->Back(dy.data(), b.data()).ok());
      EXPECT_EQ(a.Download(), b.Download()) << Describe(g) << " " << DeterministicBackName(back);
    }
  }
}

// Thread l of the scatter takes LOR order[l]: the order of the atomics changes
// completely, the fixed-point sums do not.
TEST(PetCudaTest, FixedPointScatterIsIndependentOfTheLorOrder) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto gpu = Gpu();
  ASSERT_TRUE(gpu.ok());
  const Stream cpu = Stream::Cpu();
  for (const PetGeometry& g : Geometries()) {
    const std::vector<float> mu = testing::Random(g.ct.volume.size(), 11, 0.0f, 0.01f);
    auto d_mu = DeviceArray<float>::FromHost(mu, *gpu);
    auto A = PetProjector::Create(g, *gpu, {3, ExecutionMode::kDeterministic, d_mu.data()});
    auto A_cpu = PetProjector::Create(
        g, cpu, {3, ExecutionMode::kDeterministic, mu.data(), DeterministicBack::kFixedPoint});
    ASSERT_TRUE(A.ok() && A_cpu.ok());
    auto scratch = (*A)->fixed_point_scratch();
    ASSERT_TRUE(scratch.ok());
    const ProjectorParams& p = (*A)->params();
    for (int subset : {kAllSubsets, 1}) {
      const ViewRange range = *(*A)->Range(subset);
      const int64_t lors = static_cast<int64_t>(p.cols) * p.rows * range.count;
      std::vector<int64_t> reversed(lors), shuffled(lors);
      std::iota(reversed.rbegin(), reversed.rend(), int64_t{0});
      std::iota(shuffled.begin(), shuffled.end(), int64_t{0});
      std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(7));
      auto d_reversed = DeviceArray<int64_t>::FromHost(reversed, *gpu);
      auto d_shuffled = DeviceArray<int64_t>::FromHost(shuffled, *gpu);
      const std::vector<float> y = testing::Random((*A)->range_size(subset), 12, -0.5f, 1.0f);
      auto dy = DeviceArray<float>::FromHost(y, *gpu);
      auto out = DeviceArray<float>::Allocate((*A)->domain_size(), *gpu);
      std::vector<std::vector<float>> fixed, floats;
      const int64_t* orders[] = {nullptr, d_reversed.data(), d_shuffled.data()};
      for (const int64_t* order : orders) {
        out.Poison(::tessera::testing::kNaN);
        ASSERT_TRUE(cuda::BackFixedPoint(*gpu, p, range, dy.data(), out.data(), *scratch, order).ok());
        fixed.push_back(out.Download());
        out.Poison(::tessera::testing::kNaN);
        ASSERT_TRUE(cuda::BackScatter(*gpu, p, range, dy.data(), out.data(), order).ok());
        floats.push_back(out.Download());
      }
      EXPECT_EQ(fixed[1], fixed[0]) << Describe(g) << " reversed, subset " << subset;
      EXPECT_EQ(fixed[2], fixed[0]) << Describe(g) << " shuffled, subset " << subset;
      int64_t differ = 0;
      for (size_t v = 0; v < floats[0].size(); ++v) differ += floats[2][v] != floats[0][v];
      std::printf("%s subset %d: float scatter, shuffled vs natural LOR order: %lld of %zu voxels differ\n",
                  Describe(g).c_str(), subset, static_cast<long long>(differ), floats[0].size());
      EXPECT_LT(RelL2(fixed[0], floats[0]), 1e-5) << Describe(g) << " fixed point vs float scatter";
      std::vector<float> ref((*A_cpu)->domain_size());
      ASSERT_TRUE((*A_cpu)->Back(y.data(), ref.data(), subset).ok());
      EXPECT_LT(RelL2(fixed[0], ref), 1e-4) << Describe(g) << " vs CPU fixed point";
    }
  }
}

TEST(PetCudaTest, FixedPointScatterOfNonFiniteDataIsNan) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto gpu = Gpu();
  ASSERT_TRUE(gpu.ok());
  const PetGeometry g = Geometries()[0];
  auto A = PetProjector::Create(g, *gpu, {1, ExecutionMode::kDeterministic, nullptr});
  ASSERT_TRUE(A.ok());
  std::vector<float> y((*A)->range_size(), 0.0f);
  auto dy = DeviceArray<float>::FromHost(y, *gpu);
  auto out = DeviceArray<float>::Allocate((*A)->domain_size(), *gpu);
  out.Poison(::tessera::testing::kNaN);
  ASSERT_TRUE((*A)->Back(dy.data(), out.data()).ok());
  EXPECT_EQ(out.Download(), std::vector<float>((*A)->domain_size(), 0.0f));
  y = testing::Random((*A)->range_size(), 13);
  y[y.size() / 3] = INFINITY;
  dy.Upload(y);
  ASSERT_TRUE((*A)->Back(dy.data(), out.data()).ok());
  const std::vector<float> x = out.Download();
  EXPECT_TRUE(std::all_of(x.begin(), x.end(), [](float v) { return std::isnan(v); }));
}

TEST(PetCudaTest, EmOpsMatchCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto gpu = Gpu();
  ASSERT_TRUE(gpu.ok());
  const Stream cpu = Stream::Cpu();
  const int64_t n = 1000003;
  std::vector<float> y = testing::Random(n, 1, 0.0f, 20.0f), fwd = testing::Random(n, 2, 0.0f, 10.0f);
  const std::vector<float> r = testing::Random(n, 3, 0.0f, 0.5f);
  for (int64_t i = 0; i < n; i += 97) fwd[i] = 0;  // some zero denominators without background
  std::vector<float> ratio(n);
  const double ll = *PoissonRatio(cpu, y.data(), fwd.data(), nullptr, ratio.data(), n);
  const double ll_r = *PoissonRatio(cpu, y.data(), fwd.data(), r.data(), ratio.data(), n);
  auto dy = DeviceArray<float>::FromHost(y, *gpu), dfwd = DeviceArray<float>::FromHost(fwd, *gpu);
  auto dr = DeviceArray<float>::FromHost(r, *gpu);
  auto dratio = DeviceArray<float>::Allocate(n, *gpu);
  auto gll = PoissonRatio(*gpu, dy.data(), dfwd.data(), nullptr, dratio.data(), n);
  ASSERT_TRUE(gll.ok()) << gll.status();
  EXPECT_NEAR(*gll / ll, 1.0, 1e-9);
  auto gll_r = PoissonRatio(*gpu, dy.data(), dfwd.data(), dr.data(), dratio.data(), n);
  EXPECT_NEAR(*gll_r / ll_r, 1.0, 1e-9);
  EXPECT_LT(RelL2(dratio.Download(), ratio), 1e-6);

  std::vector<float> image = testing::Random(n, 4, 0.1f, 3.0f), sens = testing::Random(n, 5, 0.0f, 2.0f);
  for (int64_t i = 0; i < n; i += 101) sens[i] = 0;
  auto dimage = DeviceArray<float>::FromHost(image, *gpu), dsens = DeviceArray<float>::FromHost(sens, *gpu);
  ASSERT_TRUE(EmUpdate(cpu, y.data(), sens.data(), 1e-12f, image.data(), n).ok());
  ASSERT_TRUE(EmUpdate(*gpu, dy.data(), dsens.data(), 1e-12f, dimage.data(), n).ok());
  EXPECT_LT(RelL2(dimage.Download(), image), 1e-6);

  y[777777] = -1;
  y[900000] = NAN;
  dy.Upload(y);
  EXPECT_EQ(*FirstInvalid(*gpu, dy.data(), n), 777777);
  EXPECT_EQ(*FirstInvalid(*gpu, dfwd.data(), n), -1);
  std::vector<float> e = testing::Random(n, 6, 0.0f, 3.0f);
  auto de = DeviceArray<float>::FromHost(e, *gpu);
  ASSERT_TRUE(ExpNegate(cpu, e.data(), n).ok());
  ASSERT_TRUE(ExpNegate(*gpu, de.data(), n).ok());
  EXPECT_LT(RelL2(de.Download(), e), 1e-6);
}

TEST(PetCudaTest, OsemMatchesCpuAndDeterministicModeRepeats) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto gpu = Gpu();
  ASSERT_TRUE(gpu.ok());
  const Stream cpu = Stream::Cpu();
  const PetGeometry g = Geometries()[0];
  const std::vector<float> mu = testing::DiscMuMap(g.ct.volume);
  const std::vector<float> truth = testing::DiscPhantom(g.ct.volume, 3.0f);
  auto A_cpu = PetProjector::Create(g, cpu, {4, ExecutionMode::kDefault, mu.data()});
  ASSERT_TRUE(A_cpu.ok());
  std::vector<float> mean((*A_cpu)->range_size());
  ASSERT_TRUE((*A_cpu)->Forward(truth.data(), mean.data()).ok());
  const std::vector<float> background = testing::Random(mean.size(), 8, 0.05f, 0.2f);
  for (size_t i = 0; i < mean.size(); ++i) mean[i] += background[i];
  const std::vector<float> counts = testing::Poisson(mean, 3);
  double total_counts = 0;
  for (float c : counts) total_counts += c;

  std::vector<double> ll_cpu;
  OsemOptions options;
  options.iterations = 2;
  options.background = background.data();
  options.progress = [&ll_cpu](int, int, double ll) {
    ll_cpu.push_back(ll);
    return absl::OkStatus();
  };
  std::vector<float> image(truth.size(), 1.0f);
  ASSERT_TRUE(Osem(**A_cpu, counts.data(), image.data(), options).ok());

  auto d_mu = DeviceArray<float>::FromHost(mu, *gpu);
  auto d_counts = DeviceArray<float>::FromHost(counts, *gpu);
  auto d_background = DeviceArray<float>::FromHost(background, *gpu);
  std::vector<std::vector<float>> results;
  for (ExecutionMode mode : {ExecutionMode::kDefault, ExecutionMode::kDeterministic, ExecutionMode::kDeterministic}) {
    auto A = PetProjector::Create(g, *gpu, {4, mode, d_mu.data()});
    ASSERT_TRUE(A.ok());
    auto d_image = DeviceArray<float>::FromHost(std::vector<float>(truth.size(), 1.0f), *gpu);
    std::vector<double> ll_gpu;
    OsemOptions gpu_options = options;
    gpu_options.background = d_background.data();
    gpu_options.progress = [&ll_gpu](int, int, double ll) {
      ll_gpu.push_back(ll);
      return absl::OkStatus();
    };
    ASSERT_TRUE(Osem(**A, d_counts.data(), d_image.data(), gpu_options).ok());
    results.push_back(d_image.Download());
    EXPECT_LT(RelL2(results.back(), image), 1e-4) << ExecutionModeName(mode);
    ASSERT_EQ(ll_gpu.size(), ll_cpu.size());
    // LL = sum (y log ybar - ybar) cancels: scale the tolerance by the counts too.
    for (size_t i = 0; i < ll_cpu.size(); ++i) {
      EXPECT_NEAR(ll_gpu[i], ll_cpu[i], 1e-5 * (std::fabs(ll_cpu[i]) + total_counts)) << i;
    }
  }
  EXPECT_EQ(results[1], results[2]);  // deterministic mode: bit-identical
}

// Normalisation (issue 36): detection efficiencies in [0.5, 2] (above 1: the
// fixed-point bound must cover them) folded into the LOR factors with a
// mu-map, on every geometry: forward and all back projections vs the CPU
// (1e-4); OSEM with efficiencies and a background vs the CPU (1e-4), and
// deterministic OSEM repeated bit-identical.
TEST(PetCudaTest, EfficienciesMatchCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto gpu = Gpu();
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const Stream cpu = Stream::Cpu();
  for (const PetGeometry& g : Geometries()) {
    const std::vector<float> mu = testing::Random(g.ct.volume.size(), 11, 0.0f, 0.01f);
    const std::vector<float> eff = testing::Random(g.num_lors(), 12, 0.5f, 2.0f);
    auto d_mu = DeviceArray<float>::FromHost(mu, *gpu);
    PetProjectorOptions host_options;
    host_options.num_subsets = 3;
    host_options.mu_map = mu.data();
    host_options.efficiency = eff.data();
    PetProjectorOptions gpu_options = host_options;
    gpu_options.mu_map = d_mu.data();  // efficiencies stay host memory
    auto A_cpu = PetProjector::Create(g, cpu, host_options);
    auto A_gpu = PetProjector::Create(g, *gpu, gpu_options);
    gpu_options.mode = ExecutionMode::kDeterministic;
    gpu_options.deterministic_back = DeterministicBack::kGather;
    auto A_gather = PetProjector::Create(g, *gpu, gpu_options);
    ASSERT_TRUE(A_cpu.ok() && A_gpu.ok() && A_gather.ok()) << A_gpu.status();
    const std::vector<float> x = testing::Random((*A_cpu)->domain_size(), 1);
    const std::vector<float> y = testing::Random((*A_cpu)->range_size(), 2);
    std::vector<float> ax((*A_cpu)->range_size()), aty((*A_cpu)->domain_size());
    ASSERT_TRUE((*A_cpu)->Forward(x.data(), ax.data()).ok());
    ASSERT_TRUE((*A_cpu)->Back(y.data(), aty.data()).ok());
    auto dx = DeviceArray<float>::FromHost(x, *gpu);
    auto dy = DeviceArray<float>::FromHost(y, *gpu);
    auto dax = DeviceArray<float>::Allocate(ax.size(), *gpu);
    auto daty = DeviceArray<float>::Allocate(aty.size(), *gpu);
    dax.Poison(::tessera::testing::kNaN);
    ASSERT_TRUE((*A_gpu)->Forward(dx.data(), dax.data()).ok());
    EXPECT_LT(RelL2(dax.Download(), ax), 1e-4) << Describe(g);
    for (ExecutionMode mode : {ExecutionMode::kDefault, ExecutionMode::kDeterministic}) {
      daty.Poison(::tessera::testing::kNaN);
      ASSERT_TRUE((*A_gpu)->BackWithMode(dy.data(), daty.data(), kAllSubsets, mode).ok());
      EXPECT_LT(RelL2(daty.Download(), aty), 1e-4) << Describe(g) << " " << ExecutionModeName(mode);
    }
    daty.Poison(::tessera::testing::kNaN);
    ASSERT_TRUE((*A_gather)->Back(dy.data(), daty.data()).ok());
    EXPECT_LT(RelL2(daty.Download(), aty), 1e-4) << Describe(g) << " gather";
  }

  const PetGeometry g = Geometries()[0];
  const std::vector<float> mu = testing::DiscMuMap(g.ct.volume);
  const std::vector<float> eff = testing::Random(g.num_lors(), 13, 0.7f, 1.3f);
  const std::vector<float> truth = testing::DiscPhantom(g.ct.volume, 3.0f);
  PetProjectorOptions po;
  po.num_subsets = 4;
  po.mu_map = mu.data();
  po.efficiency = eff.data();
  auto A_cpu = PetProjector::Create(g, cpu, po);
  ASSERT_TRUE(A_cpu.ok());
  std::vector<float> mean((*A_cpu)->range_size());
  ASSERT_TRUE((*A_cpu)->Forward(truth.data(), mean.data()).ok());
  const std::vector<float> background = testing::Random(mean.size(), 8, 0.05f, 0.2f);
  for (size_t i = 0; i < mean.size(); ++i) mean[i] += background[i];
  const std::vector<float> counts = testing::Poisson(mean, 3);
  OsemOptions options;
  options.iterations = 2;
  options.background = background.data();
  std::vector<float> image(truth.size(), 1.0f);
  ASSERT_TRUE(Osem(**A_cpu, counts.data(), image.data(), options).ok());
  auto d_mu = DeviceArray<float>::FromHost(mu, *gpu);
  auto d_counts = DeviceArray<float>::FromHost(counts, *gpu);
  auto d_background = DeviceArray<float>::FromHost(background, *gpu);
  std::vector<std::vector<float>> results;
  for (ExecutionMode mode : {ExecutionMode::kDefault, ExecutionMode::kDeterministic, ExecutionMode::kDeterministic}) {
    PetProjectorOptions gpo = po;
    gpo.mu_map = d_mu.data();
    gpo.mode = mode;
    auto A = PetProjector::Create(g, *gpu, gpo);
    ASSERT_TRUE(A.ok());
    auto d_image = DeviceArray<float>::FromHost(std::vector<float>(truth.size(), 1.0f), *gpu);
    OsemOptions gpu_options = options;
    gpu_options.background = d_background.data();
    ASSERT_TRUE(Osem(**A, d_counts.data(), d_image.data(), gpu_options).ok());
    results.push_back(d_image.Download());
    EXPECT_LT(RelL2(results.back(), image), 1e-4) << ExecutionModeName(mode);
  }
  EXPECT_EQ(results[1], results[2]);  // deterministic mode: bit-identical
}

struct ListModeSetup {
  PetGeometry geometry;
  std::vector<float> mu;
  std::vector<ListModeEvent> events;
};

ListModeSetup MakeListMode() {
  ListModeSetup s;
  s.geometry = Geometries()[2];  // cone, TOF
  s.mu = testing::DiscMuMap(s.geometry.ct.volume);
  const Stream cpu = Stream::Cpu();
  auto A = PetProjector::Create(s.geometry, cpu, {1, ExecutionMode::kDefault, s.mu.data()});
  EXPECT_TRUE(A.ok());
  std::vector<float> mean((*A)->range_size());
  EXPECT_TRUE((*A)->Forward(testing::DiscPhantom(s.geometry.ct.volume, 4.0f).data(), mean.data()).ok());
  s.events = testing::EventsFromCounts(s.geometry, testing::Poisson(mean, 17), 23);
  return s;
}

TEST(PetCudaTest, ListModeNaiveBucketedAndCpuAgree) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto gpu = Gpu();
  ASSERT_TRUE(gpu.ok());
  const Stream cpu = Stream::Cpu();
  const ListModeSetup s = MakeListMode();
  const int subsets = 4;
  auto lm_cpu = ListModeReconstructor::Create(s.geometry, cpu, {subsets, ListModeMethod::kBucketed, s.mu.data()});
  ASSERT_TRUE(lm_cpu.ok());
  ASSERT_TRUE((*lm_cpu)->SetEvents(s.events.data(), s.events.size()).ok());
  auto d_mu = DeviceArray<float>::FromHost(s.mu, *gpu);
  auto naive = ListModeReconstructor::Create(s.geometry, *gpu, {subsets, ListModeMethod::kNaive, d_mu.data()});
  auto bucketed = ListModeReconstructor::Create(s.geometry, *gpu, {subsets, ListModeMethod::kBucketed, d_mu.data()});
  auto bucketed_scatter = ListModeReconstructor::Create(
      s.geometry, *gpu, {subsets, ListModeMethod::kBucketed, d_mu.data(), ExecutionMode::kDefault});
  ListModeOptions gather_options{subsets, ListModeMethod::kBucketed, d_mu.data()};
  gather_options.deterministic_back = DeterministicBack::kGather;
  auto bucketed_gather = ListModeReconstructor::Create(s.geometry, *gpu, gather_options);
  // The same events in another order (one sort later: the same buckets).
  auto reordered = ListModeReconstructor::Create(s.geometry, *gpu, {subsets, ListModeMethod::kBucketed, d_mu.data()});
  ASSERT_TRUE(naive.ok() && bucketed.ok() && bucketed_scatter.ok() && bucketed_gather.ok() && reordered.ok())
      << bucketed.status();
  ASSERT_TRUE((*naive)->SetEvents(s.events.data(), s.events.size()).ok());
  ASSERT_TRUE((*bucketed)->SetEvents(s.events.data(), s.events.size()).ok());
  ASSERT_TRUE((*bucketed_scatter)->SetEvents(s.events.data(), s.events.size()).ok());
  ASSERT_TRUE((*bucketed_gather)->SetEvents(s.events.data(), s.events.size()).ok());
  std::vector<ListModeEvent> shuffled = s.events;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(31));
  ASSERT_TRUE((*reordered)->SetEvents(shuffled.data(), shuffled.size()).ok());

  // Merging: one record per distinct (view, col, row, TOF bin) with weight > 0.
  std::set<std::tuple<uint32_t, uint16_t, uint16_t, int16_t>> distinct;
  for (const ListModeEvent& e : s.events) {
    if (e.weight > 0) distinct.insert({e.view, e.col, e.row, e.tof_bin});
  }
  EXPECT_EQ((*bucketed)->num_unique(), static_cast<int64_t>(distinct.size()));
  EXPECT_EQ((*naive)->num_events(), (*lm_cpu)->num_events());
  EXPECT_LT((*bucketed)->num_unique(), (*bucketed)->num_events());

  const std::vector<float> image = testing::Random(s.geometry.ct.volume.size(), 9, 0.5f, 2.0f);
  auto d_image = DeviceArray<float>::FromHost(image, *gpu);
  auto d_out = DeviceArray<float>::Allocate(image.size(), *gpu);
  for (int subset = 0; subset < subsets; ++subset) {
    std::vector<float> ref(image.size());
    const double ll_ref = *(*lm_cpu)->DataTerm(image.data(), ref.data(), subset);
    d_out.Poison(::tessera::testing::kNaN);
    auto ll_naive = (*naive)->DataTerm(d_image.data(), d_out.data(), subset);
    ASSERT_TRUE(ll_naive.ok()) << ll_naive.status();
    const std::vector<float> out_naive = d_out.Download();
    d_out.Poison(::tessera::testing::kNaN);
    auto ll_bucketed = (*bucketed)->DataTerm(d_image.data(), d_out.data(), subset);
    ASSERT_TRUE(ll_bucketed.ok()) << ll_bucketed.status();
    const std::vector<float> out_bucketed = d_out.Download();
    EXPECT_LT(RelL2(out_bucketed, out_naive), 1e-5) << "subset " << subset;
    d_out.Poison(::tessera::testing::kNaN);
    ASSERT_TRUE((*bucketed_scatter)->DataTerm(d_image.data(), d_out.data(), subset).ok());
    EXPECT_LT(RelL2(d_out.Download(), out_naive), 1e-5) << "bucketed scatter, subset " << subset;
    d_out.Poison(::tessera::testing::kNaN);
    ASSERT_TRUE((*bucketed_gather)->DataTerm(d_image.data(), d_out.data(), subset).ok());
    EXPECT_LT(RelL2(d_out.Download(), out_naive), 1e-5) << "bucketed gather, subset " << subset;
    d_out.Poison(::tessera::testing::kNaN);
    ASSERT_TRUE((*reordered)->DataTerm(d_image.data(), d_out.data(), subset).ok());
    EXPECT_EQ(d_out.Download(), out_bucketed) << "bucketed, events reordered, subset " << subset;
    EXPECT_LT(RelL2(out_naive, ref), 1e-4) << "subset " << subset;
    EXPECT_LT(RelL2(out_bucketed, ref), 1e-4) << "subset " << subset;
    const double scale = std::fabs(ll_ref) + static_cast<double>((*naive)->num_events());
    EXPECT_NEAR(*ll_naive, ll_ref, 1e-5 * scale);
    EXPECT_NEAR(*ll_bucketed, ll_ref, 1e-5 * scale);
    EXPECT_NEAR(*ll_bucketed, *ll_naive, 1e-6 * scale);
    // Bucketed again: bit-identical.
    auto ll_again = (*bucketed)->DataTerm(d_image.data(), d_out.data(), subset);
    ASSERT_TRUE(ll_again.ok());
    EXPECT_EQ(d_out.Download(), out_bucketed) << "subset " << subset;
    EXPECT_EQ(*ll_again, *ll_bucketed);
  }
}

TEST(PetCudaTest, ListModeOsemMatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto gpu = Gpu();
  ASSERT_TRUE(gpu.ok());
  const Stream cpu = Stream::Cpu();
  const ListModeSetup s = MakeListMode();
  auto lm_cpu = ListModeReconstructor::Create(s.geometry, cpu, {4, ListModeMethod::kBucketed, s.mu.data()});
  ASSERT_TRUE(lm_cpu.ok());
  ASSERT_TRUE((*lm_cpu)->SetEvents(s.events.data(), s.events.size()).ok());
  std::vector<float> ref(s.geometry.ct.volume.size(), 1.0f);
  ASSERT_TRUE((*lm_cpu)->Run(ref.data(), 2).ok());
  auto d_mu = DeviceArray<float>::FromHost(s.mu, *gpu);
  for (ListModeMethod method : {ListModeMethod::kNaive, ListModeMethod::kBucketed}) {
    auto lm = ListModeReconstructor::Create(s.geometry, *gpu, {4, method, d_mu.data()});
    ASSERT_TRUE(lm.ok());
    ASSERT_TRUE((*lm)->SetEvents(s.events.data(), s.events.size()).ok());
    auto d_image = DeviceArray<float>::FromHost(std::vector<float>(ref.size(), 1.0f), *gpu);
    ASSERT_TRUE((*lm)->Run(d_image.data(), 2).ok());
    EXPECT_LT(RelL2(d_image.Download(), ref), 1e-4) << ListModeMethodName(method);
  }
}

}  // namespace
}  // namespace pet
}  // namespace recon
}  // namespace tessera

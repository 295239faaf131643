// The batched CUDA extractor against the CPU reference (ExtractMinutiae) on
// random synthetic prints of different sizes in one batch, stage by stage at
// the tolerances of extract_parity.h; determinism; the plan reused across
// batches of other sizes; the checks. Skipped without a GPU. The parity on
// the real FVC2002 images is in bench/fingerprint_extract_gpu_bench.
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "common/testing/gpu_test.h"
#include "services/fingerprint/extract/extract_cuda.h"
#include "services/fingerprint/extract/extract_parity.h"
#include "services/fingerprint/extract/extractor.h"

namespace tessera {
namespace fingerprint {
namespace {

constexpr double kPi = 3.14159265358979323846;

// A random print: curved ridges (period 7-12 px) with a few phase
// dislocations (minutiae) inside a random ellipse, noise everywhere, a light
// noisy background around it. Never constant.
GrayImage RandomPrint(int w, int h, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  GrayImage img;
  img.width = w;
  img.height = h;
  img.ppi = 500;
  img.pixels.resize(static_cast<size_t>(w) * h);
  const double period = 7 + 5 * u(rng);
  const double cx = w * (0.3 + 0.4 * u(rng)), cy = h * (0.2 + 0.6 * u(rng));  // the core-like centre
  const double ex = w * (0.5 + 0.3 * u(rng)), ey = h * (0.5 + 0.3 * u(rng));
  const double ax = w * (0.3 + 0.15 * u(rng)), ay = h * (0.3 + 0.15 * u(rng));
  const double tilt = 2 * kPi * u(rng);
  struct Dislocation {
    double x, y, sign;
  };
  std::vector<Dislocation> dis;
  for (int i = 0; i < 6; ++i) {
    dis.push_back({ex + (u(rng) - 0.5) * ax, ey + (u(rng) - 0.5) * ay, u(rng) < 0.5 ? -1.0 : 1.0});
  }
  std::normal_distribution<double> noise(0, 8);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const double dx = x - cx, dy = y - cy;
      // Loops around the centre, stretched along `tilt`.
      const double rx = dx * std::cos(tilt) + dy * std::sin(tilt), ry = -dx * std::sin(tilt) + dy * std::cos(tilt);
      double phase = 2 * kPi * std::sqrt(rx * rx + 2.2 * ry * ry) / period;
      for (const Dislocation& d : dis) phase += d.sign * std::atan2(y - d.y, x - d.x);
      const double ux = (x - ex) / ax, uy = (y - ey) / ay;
      const bool inside = ux * ux + uy * uy < 1;
      const double v = inside ? 120 + 80 * std::cos(phase) + noise(rng) : 215 + 0.4 * noise(rng);
      img.at(x, y) = static_cast<uint8_t>(std::max(0.0, std::min(255.0, v)));
    }
  }
  return img;
}

std::vector<GrayImage> RandomBatch(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> size(160, 420);
  std::vector<GrayImage> out;
  for (int i = 0; i < n; ++i) {
    const int w = size(rng), h = size(rng);
    out.push_back(RandomPrint(w, h, seed * 100 + i));
  }
  return out;
}

std::unique_ptr<ExtractCudaPlan> MakePlan() {
  absl::StatusOr<std::unique_ptr<ExtractCudaPlan>> plan = ExtractCudaPlan::Create();
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? std::move(*plan) : nullptr;
}

// Every image of the batch against ExtractMinutiae, each within the tolerances.
void ExpectParity(const std::vector<GrayImage>& images, const ExtractOptions& options, ExtractCudaPlan& plan) {
  absl::StatusOr<std::vector<Extraction>> gpu = ExtractMinutiaeBatchCuda(images, options, plan);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_EQ(gpu->size(), images.size());
  ExtractParity total;
  for (size_t i = 0; i < images.size(); ++i) {
    absl::StatusOr<Extraction> cpu = ExtractMinutiae(images[i], options);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    EXPECT_EQ((*gpu)[i].view.width, images[i].width);
    EXPECT_EQ((*gpu)[i].view.height, images[i].height);
    const ExtractParity p = CompareExtractions((*gpu)[i], *cpu);
    EXPECT_EQ(ParityViolations(p), "") << "image " << i << " (" << images[i].width << " x " << images[i].height
                                       << "): " << p.Describe();
    total.Add(p);
  }
  std::printf("%zu images: %s\n", images.size(), total.Describe().c_str());
  EXPECT_GT(total.cpu_minutiae, 0);  // the prints have minutiae to compare
}

TEST(ExtractCudaTest, MatchesTheCpuReferenceOnRandomPrintsOfMixedSizes) {
  TESSERA_SKIP_WITHOUT_GPU();
  std::unique_ptr<ExtractCudaPlan> plan = MakePlan();
  ASSERT_NE(plan, nullptr);
  ExpectParity(RandomBatch(12, 7), ExtractOptions{}, *plan);
}

TEST(ExtractCudaTest, OptionsTravelWithTheCall) {
  TESSERA_SKIP_WITHOUT_GPU();
  std::unique_ptr<ExtractCudaPlan> plan = MakePlan();
  ASSERT_NE(plan, nullptr);
  const std::vector<GrayImage> images = RandomBatch(4, 11);
  ExpectParity(images, ExtractOptions{}, *plan);
  ExtractOptions other;
  other.field.block = 12;
  other.field.angle_sigma_blocks = 1.0f;
  other.gabor.directions = 12;
  other.gabor.radius = 6;
  other.field.contrast_share = 0.4f;
  ExpectParity(images, other, *plan);
  ExpectParity(images, ExtractOptions{}, *plan);  // and back
}

TEST(ExtractCudaTest, DeterministicAndThePlanIsReusedAcrossBatchSizes) {
  TESSERA_SKIP_WITHOUT_GPU();
  std::unique_ptr<ExtractCudaPlan> plan = MakePlan();
  ASSERT_NE(plan, nullptr);
  const std::vector<GrayImage> small = RandomBatch(2, 3);
  const std::vector<GrayImage> large = RandomBatch(9, 5);
  absl::StatusOr<std::vector<Extraction>> a = ExtractMinutiaeBatchCuda(small, {}, *plan);
  absl::StatusOr<std::vector<Extraction>> big = ExtractMinutiaeBatchCuda(large, {}, *plan);  // grows the plan
  absl::StatusOr<std::vector<Extraction>> b = ExtractMinutiaeBatchCuda(small, {}, *plan);
  ASSERT_TRUE(a.ok() && big.ok() && b.ok());
  for (size_t i = 0; i < small.size(); ++i) {
    EXPECT_EQ((*a)[i].enhanced.v, (*b)[i].enhanced.v) << i;
    EXPECT_EQ((*a)[i].skeleton, (*b)[i].skeleton) << i;
    EXPECT_EQ((*a)[i].field.orientation, (*b)[i].field.orientation) << i;
    EXPECT_EQ((*a)[i].field.wavelength, (*b)[i].field.wavelength) << i;
    EXPECT_EQ((*a)[i].view.minutiae, (*b)[i].view.minutiae) << i;
  }
  // One image alone gives what it gave inside the large batch.
  absl::StatusOr<std::vector<Extraction>> one = ExtractMinutiaeBatchCuda({large[4]}, {}, *plan);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ((*one)[0].skeleton, (*big)[4].skeleton);
  EXPECT_EQ((*one)[0].enhanced.v, (*big)[4].enhanced.v);
  EXPECT_EQ((*one)[0].view.minutiae, (*big)[4].view.minutiae);
  // Without the response copied back: the same minutiae, an empty `enhanced` of the image's size.
  ExtractBatchSettings lean;
  lean.return_enhanced = false;
  absl::StatusOr<std::vector<Extraction>> c = ExtractMinutiaeBatchCuda(small, {}, *plan, lean);
  ASSERT_TRUE(c.ok());
  for (size_t i = 0; i < small.size(); ++i) {
    EXPECT_TRUE((*c)[i].enhanced.v.empty());
    EXPECT_EQ((*c)[i].enhanced.width, small[i].width);
    EXPECT_EQ((*c)[i].view.minutiae, (*a)[i].view.minutiae);
  }
}

TEST(ExtractCudaTest, BlankAndNoisyImagesAsTheCpuDoes) {
  TESSERA_SKIP_WITHOUT_GPU();
  std::unique_ptr<ExtractCudaPlan> plan = MakePlan();
  ASSERT_NE(plan, nullptr);
  GrayImage blank;
  blank.width = 64;
  blank.height = 48;
  blank.ppi = 500;
  blank.pixels.assign(64 * 48, 200);
  GrayImage noise = blank;
  std::mt19937 rng(9);
  for (uint8_t& p : noise.pixels) p = static_cast<uint8_t>(rng() & 0xff);
  {
    absl::StatusOr<std::vector<Extraction>> gpu = ExtractMinutiaeBatchCuda({blank, noise}, {}, *plan);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    for (int i = 0; i < 2; ++i) {
      absl::StatusOr<Extraction> cpu = ExtractMinutiae(i == 0 ? blank : noise);
      ASSERT_TRUE(cpu.ok());
      const ExtractParity p = CompareExtractions((*gpu)[i], *cpu);
      EXPECT_EQ(ParityViolations(p), "") << i << ": " << p.Describe();
    }
    EXPECT_TRUE((*gpu)[0].view.minutiae.empty());
  }
}

TEST(ExtractCudaTest, RejectsWhatTheCpuRejects) {
  TESSERA_SKIP_WITHOUT_GPU();
  std::unique_ptr<ExtractCudaPlan> plan = MakePlan();
  ASSERT_NE(plan, nullptr);
  std::vector<GrayImage> images = RandomBatch(2, 1);
  GrayImage tiny;
  tiny.width = tiny.height = 16;
  tiny.pixels.assign(256, 1);
  images.push_back(tiny);
  absl::StatusOr<std::vector<Extraction>> r = ExtractMinutiaeBatchCuda(images, {}, *plan);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("image 2"), absl::string_view::npos) << r.status();
  absl::StatusOr<std::vector<Extraction>> none = ExtractMinutiaeBatchCuda({}, {}, *plan);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera

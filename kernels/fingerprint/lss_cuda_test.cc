// CUDA LSS / LSS-R (one probe against a device-resident gallery) against the
// CPU matcher: every score must be identical (tolerance stated by the brief:
// 1e-5; the implementation is bit-exact by construction, so the test also
// counts exact matches and expects all of them). Real FVC2002 templates when
// the data is found (TESSERA_FINGERPRINT_DATA), synthetic ones otherwise.
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/testing/gpu_test.h"
#include "kernels/fingerprint/lss.h"
#include "kernels/fingerprint/mcc.h"
#include "kernels/fingerprint/test_templates.h"

namespace tessera {
namespace fingerprint {
namespace {

std::vector<MccTemplate> Build(const std::vector<std::vector<MinutiaPoint>>& pts) {
  std::vector<MccTemplate> out;
  for (const auto& p : pts) out.push_back(cpu::BuildMccTemplate(p));
  return out;
}

// 30 synthetic templates (`seed`), large ones (100, 150 minutiae: nb > 32
// lanes, several 16-row and 8-column tiles, ragged edges; minutiae from
// `rng_seed`), an empty one and a 3-minutia one.
std::vector<MccTemplate> EdgeCaseTemplates(int seed, int rng_seed) {
  auto pts = testing::SyntheticTemplates(30, seed);
  std::mt19937 rng(rng_seed);
  for (int n : {100, 150}) {
    std::vector<MinutiaPoint> t;
    for (int i = 0; i < n; ++i) {
      t.push_back({static_cast<float>(rng() % 500), static_cast<float>(rng() % 500),
                   static_cast<float>((rng() % 256) * (2 * M_PI / 256))});
    }
    pts.push_back(t);
  }
  pts.push_back({});
  pts.push_back({{100, 100, 0.5f}, {130, 100, 1.0f}, {100, 130, 2.0f}});
  return Build(pts);
}

// Scores every probe against the gallery on both backends.
void CompareAll(const Stream& stream, const std::vector<MccTemplate>& probes, const std::vector<MccTemplate>& gallery_t,
                MccScore kind) {
  const LssConstants c = MakeLssConstants(LssParams());
  MccGallery g;
  for (const MccTemplate& t : gallery_t) g.Append(t);
  auto device = MccDeviceGallery::Upload(g, stream);
  ASSERT_TRUE(device.ok()) << device.status();
  long long exact = 0, total = 0;
  double worst = 0;
  for (size_t i = 0; i < probes.size(); ++i) {
    const LssProbe probe = PrepareProbe(probes[i]);
    std::vector<float> cpu_scores(g.num_templates()), gpu_scores(g.num_templates(), -1.0f);
    cpu::ScoreGallery(probe, g, kind, c, cpu_scores.data(), 2);
    ASSERT_TRUE(ScoreGallery(stream, probe, *device, kind, c, gpu_scores.data()).ok());
    for (int j = 0; j < g.num_templates(); ++j) {
      worst = std::max(worst, static_cast<double>(std::fabs(gpu_scores[j] - cpu_scores[j])));
      exact += gpu_scores[j] == cpu_scores[j];
      ++total;
      ASSERT_NEAR(gpu_scores[j], cpu_scores[j], 1e-5) << "probe " << i << " template " << j;
    }
  }
  std::printf("%s: %lld scores, %lld bit-identical, largest difference %.3g\n",
              kind == MccScore::kLssR ? "LSS-R" : "LSS", total, exact, worst);
  EXPECT_EQ(exact, total);
}

TEST(LssCuda, ScoresEqualCpuOnFvcTemplates) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok()) << stream.status();
  for (int db = 1; db <= 4; ++db) {
    const auto t = Build(testing::TestTemplates(db, 80, 200 + db));
    for (MccScore kind : {MccScore::kLssR, MccScore::kLss}) CompareAll(*stream, t, t, kind);
  }
}

TEST(LssCuda, EdgeCasesAndLargeTemplates) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const auto t = EdgeCaseTemplates(303, 4);
  for (MccScore kind : {MccScore::kLssR, MccScore::kLss}) CompareAll(*stream, t, t, kind);
}

#if TESSERA_WITH_CUDA  // the cuda:: entry points exist only in CUDA builds
// Scores every probe against `view` (the device copy of `g`) with `variant`
// through the asynchronous entry point: every score identical to the CPU's.
// The device scores start at -7, so a template no launch scores fails.
void ExpectKernelEqualsCpu(const Stream& stream, const std::vector<MccTemplate>& probes, const MccGallery& g,
                           const MccDeviceGalleryView& view, MccScore kind, cuda::LssCudaKernel variant,
                           const std::string& label) {
  const LssConstants c = MakeLssConstants(LssParams());
  auto out = Buffer::Allocate(MemoryKind::kDevice, sizeof(float) * g.num_templates(), stream.ordinal());
  ASSERT_TRUE(out.ok()) << out.status();
  long long exact = 0, total = 0;
  for (size_t i = 0; i < probes.size(); ++i) {
    const LssProbe probe = PrepareProbe(probes[i]);
    std::vector<float> cpu_scores(g.num_templates()), gpu_scores(g.num_templates(), -7.0f);
    cpu::ScoreGallery(probe, g, kind, c, cpu_scores.data(), 2);
    auto d_probe = cuda::DeviceLssProbe::Upload(stream, probe);
    ASSERT_TRUE(d_probe.ok()) << d_probe.status();
    ASSERT_TRUE(CopyBytes((*out)->data(), MemoryKind::kDevice, gpu_scores.data(), MemoryKind::kHost,
                          sizeof(float) * g.num_templates(), stream)
                    .ok());
    const absl::Status st =
        cuda::EnqueueScoreGallery(stream, *d_probe, view, kind, c, static_cast<float*>((*out)->data()), variant);
    ASSERT_TRUE(st.ok()) << st;
    ASSERT_TRUE(CopyBytes(gpu_scores.data(), MemoryKind::kHost, (*out)->data(), MemoryKind::kDevice,
                          sizeof(float) * g.num_templates(), stream)
                    .ok());
    ASSERT_TRUE(stream.Synchronize().ok());
    for (int j = 0; j < g.num_templates(); ++j) {
      exact += gpu_scores[j] == cpu_scores[j];
      ++total;
      ASSERT_NEAR(gpu_scores[j], cpu_scores[j], 1e-5)
          << label << ": probe " << i << " (" << probes[i].cylinders.size() << " cylinders) template " << j << " ("
          << g.start[j + 1] - g.start[j] << " cylinders)";
    }
  }
  std::printf("%s kernel %s, %s: %lld scores, %lld bit-identical\n", cuda::LssCudaKernelName(variant),
              kind == MccScore::kLssR ? "LSS-R" : "LSS", label.c_str(), total, exact);
  EXPECT_EQ(exact, total) << label;
}

// ExpectKernelEqualsCpu on a gallery of `gallery_t` (the warp-mma scratch
// sized by Upload's default percentile).
void CompareKernel(const Stream& stream, const std::vector<MccTemplate>& probes,
                   const std::vector<MccTemplate>& gallery_t, MccScore kind, cuda::LssCudaKernel variant) {
  MccGallery g;
  for (const MccTemplate& t : gallery_t) g.Append(t);
  auto device = MccDeviceGallery::Upload(g, stream);
  ASSERT_TRUE(device.ok()) << device.status();
  ExpectKernelEqualsCpu(stream, probes, g, device->view(), kind, variant, "default scratch");
}

// The block kernel (kBlock, no longer the default: ScoreGallery above runs
// the tensor-core one) on the same kinds of inputs: templates of every
// database, large (100, 150 minutiae), empty and tiny ones.
TEST(LssCuda, BlockKernelEqualsCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok()) << stream.status();
  for (int db = 1; db <= 4; ++db) {
    const auto t = Build(testing::TestTemplates(db, 80, 500 + db));
    for (MccScore kind : {MccScore::kLssR, MccScore::kLss}) {
      CompareKernel(*stream, t, t, kind, cuda::LssCudaKernel::kBlock);
    }
  }
  const auto edge = EdgeCaseTemplates(606, 6);
  for (MccScore kind : {MccScore::kLssR, MccScore::kLss}) CompareKernel(*stream, edge, edge, kind, cuda::LssCudaKernel::kBlock);
}

// The tensor-core kernel on real (or synthetic) templates, large templates
// (100, 150 minutiae: several 16-row and 8-column tiles, ragged edges), an
// empty one, a 3-minutia one, and latent-sized crops (the 12-30-minutia
// probes the issue's throughput goal is about) against whole impressions.
TEST(LssCuda, TensorCoreKernelEqualsCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok()) << stream.status();
  constexpr auto kMma = cuda::LssCudaKernel::kWarpMma;
  for (int db = 1; db <= 4; ++db) {
    const auto t = Build(testing::TestTemplates(db, 80, 700 + db));
    for (MccScore kind : {MccScore::kLssR, MccScore::kLss}) CompareKernel(*stream, t, t, kind, kMma);
    // Crops: the first 12..30 minutiae of each impression.
    std::vector<std::vector<MinutiaPoint>> crops;
    const auto pts = testing::TestTemplates(db, 80, 700 + db);
    for (size_t i = 0; i < pts.size() && crops.size() < 24; ++i) {
      const size_t keep = std::min(pts[i].size(), 12 + i % 19);
      crops.emplace_back(pts[i].begin(), pts[i].begin() + keep);
    }
    CompareKernel(*stream, Build(crops), t, MccScore::kLssR, kMma);
  }
  const auto edge = EdgeCaseTemplates(808, 8);
  for (MccScore kind : {MccScore::kLssR, MccScore::kLss}) CompareKernel(*stream, edge, edge, kind, kMma);
}

// The tensor-core kernel on a gallery of MIXED sizes: real (or synthetic)
// impressions of 20-60 cylinders, large templates (100, 150 minutiae) far
// above the gallery's 90th percentile, an empty and a 3-minutia one; probes:
// whole impressions, latent-sized crops and the large ones. The warp scratch
// is sized by the gallery's percentile (Upload's default), by 1 (the widest
// that fits the highest occupancy) and by 0 (one launch for the largest), so
// both the small-scratch launch and the second launch for the larger
// templates run (PlanSplit, checked on the host by lss_mma_layout_test);
// every score must be the CPU's, bit for bit.
TEST(LssCuda, TensorCoreKernelEqualsCpuOnMixedSizes) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok()) << stream.status();
  for (int db = 1; db <= 4; db += 3) {
    auto gallery_t = Build(testing::TestTemplates(db, 80, 900 + db));
    const auto edge = EdgeCaseTemplates(910 + db, 11 + db);
    gallery_t.insert(gallery_t.begin() + gallery_t.size() / 2, edge.begin(), edge.end());  // large ones mid-gallery
    MccGallery g;
    for (const MccTemplate& t : gallery_t) g.Append(t);
    auto device = MccDeviceGallery::Upload(g, *stream);
    ASSERT_TRUE(device.ok()) << device.status();
    ASSERT_GT(device->scratch_template_size(), 0);
    ASSERT_LT(device->scratch_template_size(), device->max_template_size()) << "no template above the percentile";
    std::vector<MccTemplate> probes;
    const auto pts = testing::TestTemplates(db, 80, 900 + db);
    for (size_t i = 0; i < pts.size() && probes.size() < 12; i += 3) {
      const size_t keep = std::min(pts[i].size(), 12 + (i * 7) % 19);  // crops of 12-30 minutiae
      probes.push_back(cpu::BuildMccTemplate(std::vector<MinutiaPoint>(pts[i].begin(), pts[i].begin() + keep)));
    }
    for (size_t i = 1; i < gallery_t.size() && probes.size() < 18; i += 17) probes.push_back(gallery_t[i]);
    probes.push_back(edge[edge.size() - 4]);  // 100 and 150 minutiae
    probes.push_back(edge[edge.size() - 3]);
    for (MccScore kind : {MccScore::kLssR, MccScore::kLss}) {
      for (int scratch : {device->scratch_template_size(), 1, 0}) {
        MccDeviceGalleryView view = device->view();
        view.scratch_template_size = scratch;
        ExpectKernelEqualsCpu(*stream, probes, g, view, kind, cuda::LssCudaKernel::kWarpMma,
                              absl::StrCat("db ", db, ", scratch size ", scratch, " (max ", device->max_template_size(),
                                           ")"));
      }
    }
  }
}

// A variant outside the enum (e.g. the removed split kernel's old value 2, or
// any integer cast to the enum) is refused with a message naming the valid
// kernels.
TEST(LssCuda, UnknownKernelVariantIsInvalidArgument) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const auto t = Build(testing::SyntheticTemplates(4, 909));
  MccGallery g;
  for (const MccTemplate& x : t) g.Append(x);
  auto device = MccDeviceGallery::Upload(g, *stream);
  ASSERT_TRUE(device.ok()) << device.status();
  auto out = Buffer::Allocate(MemoryKind::kDevice, sizeof(float) * g.num_templates(), stream->ordinal());
  ASSERT_TRUE(out.ok()) << out.status();
  auto d_probe = cuda::DeviceLssProbe::Upload(*stream, PrepareProbe(t[0]));
  ASSERT_TRUE(d_probe.ok()) << d_probe.status();
  for (int value : {2, 7}) {
    const absl::Status s =
        cuda::EnqueueScoreGallery(*stream, *d_probe, device->view(), MccScore::kLssR, MakeLssConstants(LssParams()),
                                  static_cast<float*>((*out)->data()), static_cast<cuda::LssCudaKernel>(value));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(std::string(s.message()).find("valid: block, warp-mma"), std::string::npos) << s;
  }
}
#endif  // TESSERA_WITH_CUDA

TEST(LssCuda, GalleryMemoryIsTrackedAndLimitsChecked) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const auto t = Build(testing::SyntheticTemplates(50, 404));
  MccGallery g;
  for (const MccTemplate& x : t) g.Append(x);
  const size_t before = GetDeviceMemoryStats(stream->ordinal()).current_bytes;
  auto device = MccDeviceGallery::Upload(g, *stream);
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_GE(GetDeviceMemoryStats(stream->ordinal()).current_bytes - before, g.bits.size() * 8);
  EXPECT_EQ(device->num_templates(), 50);
  // A CPU stream is a usage error.
  std::vector<float> scores(50);
  EXPECT_EQ(ScoreGallery(Stream::Cpu(), PrepareProbe(t[0]), *device, MccScore::kLssR,
                         MakeLssConstants(LssParams()), scores.data())
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera

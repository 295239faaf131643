// Multi-latent LSS / LSS-R (cuda::EnqueueScoreGalleryMulti: every latent of a
// batch in one launch) against the CPU matcher: every score identical, bit
// for bit (lss.h promises it; the tolerance 1e-5 only gives a readable failure
// before the exact count is checked). Inputs: a gallery of mixed sizes (real
// FVC2002 templates when TESSERA_FINGERPRINT_DATA points at them, synthetic
// ones otherwise, with 100- and 150-minutia templates, an empty one and a
// 3-minutia one in the middle) and latents of mixed sizes (crops of 12-30
// minutiae, whole impressions, the large, empty and tiny ones), for four
// launch shapes, with and without the step clock, and the warp scratch sized
// three ways (so both the small-scratch launch and the second launch for the
// larger templates run). kWarpMma takes the compact rho for selections of up
// to 32 entries and the dense loop for larger ones (the large templates).
// The device scores start at -7 and the rows are strided with a gap, so a
// template no launch scores, or a write outside a latent's row, fails.
// Skipped without a GPU.
#include <gtest/gtest.h>

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

#if TESSERA_WITH_CUDA
MccTemplate RandomTemplate(int n, std::mt19937& rng) {
  std::vector<MinutiaPoint> t;
  for (int i = 0; i < n; ++i) {
    t.push_back({static_cast<float>(rng() % 500), static_cast<float>(rng() % 500),
                 static_cast<float>((rng() % 256) * (2 * M_PI / 256))});
  }
  return cpu::BuildMccTemplate(t);
}

struct Case {
  std::vector<MccTemplate> gallery;
  std::vector<MccTemplate> latents;
};

Case MixedCase(int db, int seed) {
  Case c;
  const auto pts = testing::TestTemplates(db, 60, seed);
  for (const auto& p : pts) c.gallery.push_back(cpu::BuildMccTemplate(p));
  std::mt19937 rng(seed);
  const auto middle = c.gallery.begin() + c.gallery.size() / 2;
  std::vector<MccTemplate> odd = {RandomTemplate(100, rng), RandomTemplate(150, rng), cpu::BuildMccTemplate({}),
                                  RandomTemplate(3, rng)};
  c.gallery.insert(middle, odd.begin(), odd.end());
  for (size_t i = 0; i < pts.size() && c.latents.size() < 12; i += 3) {
    const size_t keep = std::min(pts[i].size(), 12 + (i * 7) % 19);  // crops of 12-30 minutiae
    c.latents.push_back(cpu::BuildMccTemplate(std::vector<MinutiaPoint>(pts[i].begin(), pts[i].begin() + keep)));
  }
  for (size_t i = 1; i < pts.size() && c.latents.size() < 16; i += 17) c.latents.push_back(c.gallery[i]);
  c.latents.insert(c.latents.end(), odd.begin(), odd.end());
  return c;
}

TEST(LssMultiCuda, EveryLatentEqualsCpuForEveryShape) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const LssConstants c = MakeLssConstants(LssParams());
  for (int db : {1, 3}) {
    const Case cs = MixedCase(db, 1200 + db);
    MccGallery g;
    for (const MccTemplate& t : cs.gallery) g.Append(t);
    const int n = g.num_templates();
    auto device = MccDeviceGallery::Upload(g, *stream);
    ASSERT_TRUE(device.ok()) << device.status();
    ASSERT_LT(device->scratch_template_size(), device->max_template_size());
    std::vector<LssProbe> probes;
    for (const MccTemplate& t : cs.latents) probes.push_back(PrepareProbe(t));
    const int latents = static_cast<int>(probes.size());
    auto set = cuda::DeviceLssProbeSet::Upload(*stream, probes);
    ASSERT_TRUE(set.ok()) << set.status();
    ASSERT_EQ(set->size(), latents);
    const size_t stride = n + 37;  // a gap after each latent's row
    auto out = Buffer::Allocate(MemoryKind::kDevice, sizeof(float) * stride * latents, stream->ordinal());
    ASSERT_TRUE(out.ok()) << out.status();
    for (MccScore kind : {MccScore::kLssR, MccScore::kLss}) {
      std::vector<float> cpu_scores(static_cast<size_t>(n) * latents);
      for (int l = 0; l < latents; ++l) cpu::ScoreGallery(probes[l], g, kind, c, cpu_scores.data() + l * n, 2);
      // The launch shapes (templates per warp: the default, 2, 3, one wave),
      // each without and with the step clock (its own kernel for LSS-R).
      const int shapes[4] = {cuda::LssMultiOptions().templates_per_warp, 2, 3, 0};
      auto counters = Buffer::Allocate(MemoryKind::kDevice, sizeof(unsigned long long) * cuda::kLssStageCount,
                                       stream->ordinal());
      ASSERT_TRUE(counters.ok()) << counters.status();
      for (int opts = 0; opts < 8; ++opts) {
        cuda::LssMultiOptions options;
        options.templates_per_warp = shapes[opts / 2];
        if ((opts & 1) != 0) options.stage_cycles = static_cast<unsigned long long*>((*counters)->data());
        for (int scratch : {device->scratch_template_size(), 1, 0}) {
          MccDeviceGalleryView view = device->view();
          view.scratch_template_size = scratch;
          std::vector<float> gpu(stride * latents, -7.0f);
          ASSERT_TRUE(CopyBytes((*out)->data(), MemoryKind::kDevice, gpu.data(), MemoryKind::kHost,
                                sizeof(float) * gpu.size(), *stream)
                          .ok());
          const absl::Status st = cuda::EnqueueScoreGalleryMulti(*stream, *set, view, kind, c,
                                                                 static_cast<float*>((*out)->data()), stride, options);
          ASSERT_TRUE(st.ok()) << st;
          ASSERT_TRUE(CopyBytes(gpu.data(), MemoryKind::kHost, (*out)->data(), MemoryKind::kDevice,
                                sizeof(float) * gpu.size(), *stream)
                          .ok());
          ASSERT_TRUE(stream->Synchronize().ok());
          const std::string label = absl::StrCat(kind == MccScore::kLssR ? "LSS-R" : "LSS", " db ", db, " opts ", opts,
                                                 " scratch ", scratch);
          long long exact = 0;
          for (int l = 0; l < latents; ++l) {
            for (int j = 0; j < n; ++j) {
              const float want = cpu_scores[static_cast<size_t>(l) * n + j], got = gpu[l * stride + j];
              ASSERT_NEAR(got, want, 1e-5) << label << ": latent " << l << " (" << cs.latents[l].cylinders.size()
                                           << " cylinders) template " << j;
              exact += got == want;
            }
            for (size_t j = n; j < stride; ++j) ASSERT_EQ(gpu[l * stride + j], -7.0f) << label << " gap, latent " << l;
          }
          EXPECT_EQ(exact, static_cast<long long>(n) * latents) << label;
        }
      }
      std::printf("%s db %d: %d latents x %d templates, 8 option sets x 3 scratch sizes, all bit-identical\n",
                  kind == MccScore::kLssR ? "LSS-R" : "LSS", db, latents, n);
    }
  }
}

// One latent through the multi-latent entry point equals the single-latent
// kernel (EnqueueScoreGallery, kWarpMma), and an empty set enqueues nothing.
TEST(LssMultiCuda, OneLatentEqualsSingleKernelAndEmptySetIsNoOp) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const LssConstants c = MakeLssConstants(LssParams());
  const Case cs = MixedCase(2, 1300);
  MccGallery g;
  for (const MccTemplate& t : cs.gallery) g.Append(t);
  const int n = g.num_templates();
  auto device = MccDeviceGallery::Upload(g, *stream);
  ASSERT_TRUE(device.ok()) << device.status();
  auto out = Buffer::Allocate(MemoryKind::kDevice, sizeof(float) * n * 2, stream->ordinal());
  ASSERT_TRUE(out.ok()) << out.status();
  float* single = static_cast<float*>((*out)->data());
  float* multi = single + n;
  for (size_t i = 0; i < cs.latents.size(); i += 5) {
    const LssProbe probe = PrepareProbe(cs.latents[i]);
    auto one = cuda::DeviceLssProbe::Upload(*stream, probe);
    auto set = cuda::DeviceLssProbeSet::Upload(*stream, {probe});
    ASSERT_TRUE(one.ok() && set.ok());
    ASSERT_TRUE(cuda::EnqueueScoreGallery(*stream, *one, device->view(), MccScore::kLssR, c, single).ok());
    ASSERT_TRUE(cuda::EnqueueScoreGalleryMulti(*stream, *set, device->view(), MccScore::kLssR, c, multi, n).ok());
    std::vector<float> host(2 * n);
    ASSERT_TRUE(
        CopyBytes(host.data(), MemoryKind::kHost, single, MemoryKind::kDevice, sizeof(float) * 2 * n, *stream).ok());
    ASSERT_TRUE(stream->Synchronize().ok());
    for (int j = 0; j < n; ++j) ASSERT_EQ(host[n + j], host[j]) << "latent " << i << " template " << j;
    // The step clock (diagnostics) counts cycles and leaves the scores alone.
    auto counters = Buffer::Allocate(MemoryKind::kDevice, sizeof(unsigned long long) * cuda::kLssStageCount,
                                     stream->ordinal());
    ASSERT_TRUE(counters.ok());
    std::vector<unsigned long long> cycles(cuda::kLssStageCount, 0);
    ASSERT_TRUE(CopyBytes((*counters)->data(), MemoryKind::kDevice, cycles.data(), MemoryKind::kHost,
                          sizeof(unsigned long long) * cycles.size(), *stream)
                    .ok());
    cuda::LssMultiOptions o;
    o.stage_cycles = static_cast<unsigned long long*>((*counters)->data());
    ASSERT_TRUE(cuda::EnqueueScoreGalleryMulti(*stream, *set, device->view(), MccScore::kLssR, c, multi, n, o).ok());
    ASSERT_TRUE(
        CopyBytes(host.data(), MemoryKind::kHost, single, MemoryKind::kDevice, sizeof(float) * 2 * n, *stream).ok());
    ASSERT_TRUE(CopyBytes(cycles.data(), MemoryKind::kHost, (*counters)->data(), MemoryKind::kDevice,
                          sizeof(unsigned long long) * cycles.size(), *stream)
                    .ok());
    ASSERT_TRUE(stream->Synchronize().ok());
    for (int j = 0; j < n; ++j) ASSERT_EQ(host[n + j], host[j]) << "step clock, template " << j;
    if (!cs.latents[i].cylinders.empty()) {
      EXPECT_GT(cycles[0], 0u) << "no local-similarity cycles counted";
    }
  }
  auto empty = cuda::DeviceLssProbeSet::Upload(*stream, {});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->size(), 0);
  EXPECT_TRUE(cuda::EnqueueScoreGalleryMulti(*stream, *empty, device->view(), MccScore::kLssR, c, multi, n).ok());
}
#endif  // TESSERA_WITH_CUDA

}  // namespace
}  // namespace fingerprint
}  // namespace tessera

// The ALFI pipeline on the GPU (two streams, pinned gallery, double-buffered
// batches) against the brute-force CPU top-k: the CUDA LSS-R / LSS scores
// and DMC kernel outputs are bit-identical to the CPU (lss_cuda_test,
// dmc_cuda_test), so the candidates and their scores must be equal exactly
// (tolerance 0). Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/gpu_test.h"
#include "kernels/fingerprint/lss.h"
#include "kernels/fingerprint/mcc.h"
#include "kernels/fingerprint/test_templates.h"
#include "services/fingerprint/search/alfi_dmc_matcher.h"
#include "services/fingerprint/search/alfi_pipeline.h"
#include "services/fingerprint/search/dmc_matcher.h"
#include "services/fingerprint/search/testing/dmc_reference.h"

namespace tessera {
namespace fingerprint {
namespace {

std::vector<MccTemplate> Build(const std::vector<std::vector<MinutiaPoint>>& pts) {
  std::vector<MccTemplate> out;
  for (const auto& p : pts) out.push_back(cpu::BuildMccTemplate(p));
  return out;
}

PipelineOptions CudaOptions(int batch_templates, int top_k, bool overlap, bool resident) {
  PipelineOptions o;
  o.backend = Backend::kCuda;
  o.batch_templates = batch_templates;
  o.top_k = top_k;
  o.overlap = overlap;
  o.resident = resident;
  return o;
}

TEST(AlfiPipelineCuda, TopKEqualsCpuBruteForce) {
  TESSERA_SKIP_WITHOUT_GPU();
  // Four databases (or synthetic stand-ins) plus synthetic templates.
  auto pts = alfi_testing::RealAndSyntheticTemplates({1, 2, 3, 4}, 80, /*db_seed=*/40, 301, 7);
  pts.push_back({});
  const std::vector<MccTemplate> templates = Build(pts);
  auto gallery = std::make_shared<MccGallery>();
  for (const MccTemplate& t : templates) gallery->Append(t);
  std::vector<MccTemplate> latents;
  for (int i = 3; i < static_cast<int>(templates.size()); i += 61) latents.push_back(templates[i]);
  const int k = 25;
  const LssConstants c = MakeLssConstants(LssParams());
  for (MccScore kind : {MccScore::kLssR, MccScore::kLss}) {
    std::vector<std::vector<Candidate>> expected;
    for (const MccTemplate& l : latents) {
      std::vector<float> scores(gallery->num_templates());
      cpu::ScoreGallery(PrepareProbe(l), *gallery, kind, c, scores.data(), 0);
      expected.push_back(TopK(scores.data(), gallery->num_templates(), k));
    }
    for (int batch : {1, 50, 128, 100000}) {
      for (bool overlap : {true, false}) {
        const PipelineOptions o = CudaOptions(batch, k, overlap, batch == 50 || (batch == 100000 && !overlap));
        auto p = AlfiPipeline::Create(gallery, o);
        ASSERT_TRUE(p.ok()) << p.status();
        // Both CUDA kernel variants (in turn: each batch size runs both) must
        // give the CPU's top-k.
        const cuda::LssCudaKernel variants[] = {cuda::LssCudaKernel::kBlock, cuda::LssCudaKernel::kWarpMma};
        const auto variant = variants[(batch + (overlap ? 1 : 0)) % 2];
        LssBatchMatcher matcher(kind, LssParams(), MccParams(), variant);
        PipelineStats stats;
        auto got = (*p)->Search(matcher, latents, &stats);
        ASSERT_TRUE(got.ok()) << got.status();
        alfi_testing::ExpectSameTopK(*got, expected, absl::StrCat("batch ", batch, " overlap ", overlap));
        EXPECT_EQ(stats.templates, gallery->num_templates());
        EXPECT_EQ(stats.upload_bytes > 0, !o.resident);
        EXPECT_GT(stats.kernel_seconds, 0);
        if (batch == 128) std::printf("batch %d overlap %d: %s\n", batch, overlap, stats.ToString().c_str());
      }
    }
  }
}

// A matcher asked to prune (the default) on the GPU, against an unpruned one
// and the CPU (which does prune): the same top-k lists, ids and scores
// exactly, with exact ties (duplicated templates) and exclusions. The GPU
// scores every pair (its pruning kernel was taken out, alfi_pipeline.cc).
TEST(AlfiPipelineCuda, PrunedTopKEqualsUnprunedAndCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto pts = alfi_testing::RealAndSyntheticTemplates({1, 2, 3, 4}, 80, /*db_seed=*/70, 200, 9);
  for (int i = 0; i < 100; i += 3) pts.push_back(pts[i]);  // exact ties
  const std::vector<MccTemplate> templates = Build(pts);
  auto gallery = std::make_shared<MccGallery>();
  for (const MccTemplate& t : templates) gallery->Append(t);
  std::vector<MccTemplate> latents;
  std::mt19937 rng(5);
  for (int i = 2; i < static_cast<int>(templates.size()); i += 37) {
    // Latent-like crops: a random subset of 12-30 minutiae.
    auto p = pts[i];
    std::shuffle(p.begin(), p.end(), rng);
    if (p.size() > 12) p.resize(std::min<size_t>(p.size(), 12 + rng() % 19));
    latents.push_back(cpu::BuildMccTemplate(p));
  }
  std::vector<uint8_t> exclude(gallery->num_templates(), 0);
  for (int t = 3; t < gallery->num_templates(); t += 11) exclude[t] = 1;
  const LssConstants c = MakeLssConstants(LssParams());
  for (int k : {1, 10, 50}) {
    for (bool resident : {false, true}) {
      PipelineOptions o;
      o.backend = Backend::kCuda;
      o.batch_templates = 40;
      o.resident = resident;
      auto p = AlfiPipeline::Create(gallery, o);
      ASSERT_TRUE(p.ok()) << p.status();
      PipelineSearchOptions search;
      search.top_k = k;
      search.exclude = resident ? exclude.data() : nullptr;
      LssBatchMatcher plain(MccScore::kLssR, LssParams(), MccParams(), cuda::LssCudaKernel::kWarpMma, false);
      LssBatchMatcher pruned(MccScore::kLssR, LssParams(), MccParams(), cuda::LssCudaKernel::kWarpMma, true);
      auto want = (*p)->Search(plain, latents, search);
      auto got = (*p)->Search(pruned, latents, search);
      ASSERT_TRUE(want.ok()) << want.status();
      ASSERT_TRUE(got.ok()) << got.status();
      for (size_t l = 0; l < latents.size(); ++l) {
        std::vector<float> scores(gallery->num_templates());
        cpu::ScoreGallery(PrepareProbe(latents[l]), *gallery, MccScore::kLssR, c, scores.data(), 0);
        std::vector<Candidate> cpu_top;
        MergeTopK(scores.data(), gallery->num_templates(), 0, k, &cpu_top, search.exclude);
        EXPECT_EQ((*want)[l], cpu_top) << "k " << k << " resident " << resident << " latent " << l;
        EXPECT_EQ((*got)[l], cpu_top) << "k " << k << " resident " << resident << " latent " << l;
      }
    }
  }
}

TEST(AlfiPipelineCuda, DmcTopKEqualsCpuWholeGallery) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto pts = alfi_testing::RealAndSyntheticTemplates({1, 2, 3, 4}, 80, /*db_seed=*/60, 97, 9);
  pts.push_back({});
  auto gallery = std::make_shared<MccGallery>();
  for (const auto& p : pts) gallery->Append(cpu::BuildMccTemplate(p));
  std::vector<MccTemplate> latents;
  for (int i = 5; i < static_cast<int>(pts.size()); i += 53) latents.push_back(alfi_testing::PartialLatent(pts[i], 20));
  const DmcMatcherOptions options;
  const int k = 20;
  auto expected = alfi_testing::WholeGalleryDmcTopK(options, latents, *gallery, k);
  ASSERT_TRUE(expected.ok()) << expected.status();
  for (int batch : {1, 64, 100000}) {
    for (bool overlap : {true, false}) {
      const PipelineOptions o = CudaOptions(batch, k, overlap, /*resident=*/batch == 64);
      PipelineStats stats;
      auto got = alfi_testing::DmcPipelineSearch(gallery, o, options, latents, &stats);
      ASSERT_TRUE(got.ok()) << got.status();
      alfi_testing::ExpectSameTopK(*got, *expected, absl::StrCat("batch ", batch, " overlap ", overlap));
      if (batch == 64) std::printf("DMC batch %d overlap %d: %s\n", batch, overlap, stats.ToString().c_str());
    }
  }
}

TEST(AlfiPipelineCuda, OversizedComparisonIsAnError) {
  TESSERA_SKIP_WITHOUT_GPU();
  // A 200-minutia grid: 200 x 200 local similarities exceed the kernel's
  // shared-memory matrix; the search must fail cleanly, not crash.
  std::vector<MinutiaPoint> big;
  std::mt19937 rng(5);
  for (int i = 0; i < 200; ++i) {
    big.push_back({static_cast<float>(40 + (i % 20) * 12), static_cast<float>(40 + (i / 20) * 12),
                   static_cast<float>((rng() % 256) * (2 * M_PI / 256))});
  }
  const MccTemplate t = cpu::BuildMccTemplate(big);
  ASSERT_GT(t.cylinders.size(), 160u);
  auto gallery = std::make_shared<MccGallery>();
  gallery->Append(t);
  PipelineOptions o;
  o.backend = Backend::kCuda;
  auto p = AlfiPipeline::Create(gallery, o);
  ASSERT_TRUE(p.ok()) << p.status();
  LssBatchMatcher matcher;
  auto got = (*p)->Search(matcher, {t});
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition) << got.status();
  // The pipeline stays usable.
  auto ok = (*p)->Search(matcher, {MccTemplate()});
  EXPECT_TRUE(ok.ok()) << ok.status();
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera

// The DMC searches through the ALFI pipeline and what they must find, for
// their tests (alfi_dmc_matcher_test on the CPU, alfi_pipeline_cuda_test on
// the GPU): galleries of real and synthetic templates, partial latents, and
// the top-k of DmcMatcher::ScoreGallery over the whole gallery.
#ifndef TESSERA_SERVICES_FINGERPRINT_SEARCH_TESTING_DMC_REFERENCE_H_
#define TESSERA_SERVICES_FINGERPRINT_SEARCH_TESTING_DMC_REFERENCE_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/statusor.h"
#include "common/status.h"
#include "kernels/fingerprint/mcc.h"
#include "kernels/fingerprint/test_templates.h"
#include "services/fingerprint/search/alfi_dmc_matcher.h"
#include "services/fingerprint/search/alfi_pipeline.h"
#include "services/fingerprint/search/dmc_matcher.h"
#include "services/fingerprint/search/top_k.h"

namespace tessera::fingerprint::alfi_testing {

// Minutiae of `per_db` templates of each FVC2002 database in `dbs` (synthetic
// stand-ins without the data; seed db_seed + db), then `synthetic` synthetic
// templates (seed synthetic_seed).
inline std::vector<std::vector<MinutiaPoint>> RealAndSyntheticTemplates(const std::vector<int>& dbs, int per_db,
                                                                         uint32_t db_seed, int synthetic,
                                                                         uint32_t synthetic_seed) {
  std::vector<std::vector<MinutiaPoint>> points;
  for (int db : dbs) {
    auto t = testing::TestTemplates(db, per_db, db_seed + db);
    points.insert(points.end(), t.begin(), t.end());
  }
  auto extra = testing::SyntheticTemplates(synthetic, synthetic_seed);
  points.insert(points.end(), extra.begin(), extra.end());
  return points;
}

// A latent: the MCC template of the first `minutiae` minutiae of `points`.
inline MccTemplate PartialLatent(const std::vector<MinutiaPoint>& points, size_t minutiae) {
  return cpu::BuildMccTemplate(
      std::vector<MinutiaPoint>(points.begin(), points.begin() + std::min(minutiae, points.size())));
}

// The top `k` of DmcMatcher::ScoreGallery (CPU) over the whole gallery, per
// latent.
inline absl::StatusOr<std::vector<std::vector<Candidate>>> WholeGalleryDmcTopK(const DmcMatcherOptions& options,
                                                                                 const std::vector<MccTemplate>& latents,
                                                                                 const MccGallery& gallery, int k) {
  TESSERA_ASSIGN_OR_RETURN(DmcMatcher reference, DmcMatcher::Create(options));
  std::vector<std::vector<Candidate>> out;
  for (const MccTemplate& latent : latents) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<float> scores, reference.ScoreGallery(Stream::Cpu(), latent, gallery));
    out.push_back(TopK(scores.data(), gallery.num_templates(), k));
  }
  return out;
}

// The DMC search of `latents` through a pipeline over `gallery` made with
// `pipeline` (its errors and the matcher's as they come).
inline absl::StatusOr<std::vector<std::vector<Candidate>>> DmcPipelineSearch(
    std::shared_ptr<const MccGallery> gallery, const PipelineOptions& pipeline, const DmcMatcherOptions& options,
    const std::vector<MccTemplate>& latents, PipelineStats* stats) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<AlfiPipeline> p, AlfiPipeline::Create(std::move(gallery), pipeline));
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<DmcBatchMatcher> matcher, DmcBatchMatcher::Create(options));
  return p->Search(*matcher, latents, stats);
}

// The same candidates (template and score) per latent and rank; `context`
// names the configuration in failure messages.
inline void ExpectSameTopK(const std::vector<std::vector<Candidate>>& got,
                           const std::vector<std::vector<Candidate>>& want, const std::string& context) {
  ASSERT_EQ(got.size(), want.size()) << context;
  for (size_t l = 0; l < want.size(); ++l) {
    ASSERT_EQ(got[l].size(), want[l].size()) << context << " latent " << l;
    for (size_t r = 0; r < want[l].size(); ++r) {
      EXPECT_EQ(got[l][r].template_index, want[l][r].template_index) << context << " latent " << l << " rank " << r;
      EXPECT_EQ(got[l][r].score, want[l][r].score) << context << " latent " << l << " rank " << r;
    }
  }
}

}  // namespace tessera::fingerprint::alfi_testing

#endif  // TESSERA_SERVICES_FINGERPRINT_SEARCH_TESTING_DMC_REFERENCE_H_

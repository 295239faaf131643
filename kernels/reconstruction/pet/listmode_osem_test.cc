// List-mode OSEM on the CPU against sinogram OSEM on the histogrammed events:
//   - the data term equals A^T(h / A lambda) and its log term sum h log(A lambda);
//   - OSEM (S = 4, 2 iterations) from Poisson events (shuffled, some merged
//     to weight 2, delayed weight-0 records mixed in) matches sinogram OSEM on
//     the histogram to relative L2 1e-5, log-likelihoods to 1e-7 relative;
//   - events are checked (naming the event) and needed before a data term.
#include "kernels/reconstruction/pet/listmode_osem.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/reconstruction/pet/em_ops.h"
#include "kernels/reconstruction/pet/osem.h"
#include "kernels/reconstruction/pet/pet_testing.h"
#include "kernels/reconstruction/pet/projector.h"

namespace tessera {
namespace recon {
namespace pet {
namespace {

using ::testing::HasSubstr;
using testing::RelL2;

struct Data {
  PetGeometry geometry;
  std::vector<float> mu, counts;
  std::vector<ListModeEvent> events;
};

Data MakeData(const PetGeometry& g, float scale) {
  Data d;
  d.geometry = g;
  d.mu = testing::DiscMuMap(g.ct.volume);
  const Stream cpu = Stream::Cpu();
  auto A = PetProjector::Create(g, cpu, {1, ExecutionMode::kDefault, d.mu.data()});
  EXPECT_TRUE(A.ok()) << A.status();
  const std::vector<float> truth = testing::DiscPhantom(g.ct.volume, scale);
  std::vector<float> mean((*A)->range_size());
  EXPECT_TRUE((*A)->Forward(truth.data(), mean.data()).ok());
  d.counts = testing::Poisson(mean, 99);
  d.events = testing::EventsFromCounts(g, d.counts, 7);
  return d;
}

TEST(ListModeOsemTest, DataTermIsTheSinogramBackProjectionOfTheRatio) {
  const Stream cpu = Stream::Cpu();
  for (const PetGeometry& g : {testing::EmFan2D(testing::Tof(5, 10.0, 15.0)), testing::Cone3D(testing::Tof(5, 4.0,
                                                                                                              7.0))}) {
    const Data d = MakeData(g, 2.0f);
    ListModeOptions options;
    options.num_subsets = 3;
    options.mu_map = d.mu.data();
    auto lm = ListModeReconstructor::Create(g, cpu, options);
    ASSERT_TRUE(lm.ok()) << lm.status();
    ASSERT_TRUE((*lm)->SetEvents(d.events.data(), d.events.size()).ok());
    PetProjector& A = (*lm)->projector();
    const std::vector<float> image = testing::Random(A.domain_size(), 3, 0.5f, 2.0f);
    for (int s = 0; s < 3; ++s) {
      std::vector<float> out(A.domain_size());
      auto log_term = (*lm)->DataTerm(image.data(), out.data(), s);
      ASSERT_TRUE(log_term.ok()) << log_term.status();
      // Sinogram form on the subset's histogram.
      std::vector<float> h(A.range_size(s)), fwd(A.range_size(s)), expected(A.domain_size());
      ASSERT_TRUE(CopySubset(cpu, A.num_views(), A.elements_per_view(), 3, s, SubsetCopy::kFullToCompact,
                             d.counts.data(), h.data())
                      .ok());
      ASSERT_TRUE(A.Forward(image.data(), fwd.data(), s).ok());
      double log_expected = 0;
      for (size_t i = 0; i < h.size(); ++i) {
        if (fwd[i] > 0) log_expected += h[i] * std::log(static_cast<double>(fwd[i]));
        fwd[i] = fwd[i] > 0 ? h[i] / fwd[i] : 0;
      }
      ASSERT_TRUE(A.Back(fwd.data(), expected.data(), s).ok());
      EXPECT_LT(RelL2(out, expected), 1e-5) << Describe(g) << " subset " << s;
      EXPECT_NEAR(*log_term / log_expected, 1.0, 1e-9) << Describe(g) << " subset " << s;
    }
  }
}

TEST(ListModeOsemTest, MatchesSinogramOsemOnTheHistogram) {
  const Stream cpu = Stream::Cpu();
  const PetGeometry g = testing::EmFan2D(testing::Tof(5, 10.0, 15.0));
  const Data d = MakeData(g, 2.0f);
  ListModeOptions options;
  options.num_subsets = 4;
  options.mu_map = d.mu.data();
  auto lm = ListModeReconstructor::Create(g, cpu, options);
  ASSERT_TRUE(lm.ok()) << lm.status();
  ASSERT_TRUE((*lm)->SetEvents(d.events.data(), d.events.size()).ok());
  EXPECT_LT((*lm)->num_events(), static_cast<int64_t>(d.events.size()));  // delayed records dropped
  std::vector<double> ll_lm, ll_sino;
  auto record = [](std::vector<double>* out) {
    return [out](int, int, double ll) {
      out->push_back(ll);
      return absl::OkStatus();
    };
  };
  std::vector<float> image_lm((*lm)->projector().domain_size(), 1.0f);
  ASSERT_TRUE((*lm)->Run(image_lm.data(), 2, record(&ll_lm)).ok());

  auto A = PetProjector::Create(g, cpu, {4, ExecutionMode::kDeterministic, d.mu.data()});
  ASSERT_TRUE(A.ok());
  std::vector<float> image_sino((*A)->domain_size(), 1.0f);
  OsemOptions osem;
  osem.iterations = 2;
  osem.progress = record(&ll_sino);
  ASSERT_TRUE(Osem(**A, d.counts.data(), image_sino.data(), osem).ok());

  EXPECT_LT(RelL2(image_lm, image_sino), 1e-5);
  ASSERT_EQ(ll_lm.size(), 8u);
  ASSERT_EQ(ll_sino.size(), 8u);
  for (size_t i = 0; i < ll_lm.size(); ++i) EXPECT_NEAR(ll_lm[i] / ll_sino[i], 1.0, 1e-7) << i;
  // The image moved (the comparison is not of two untouched starts).
  EXPECT_GT(RelL2(image_lm, std::vector<float>(image_lm.size(), 1.0f)), 0.3);
}

TEST(ListModeOsemTest, ChecksEventsAndOrder) {
  const Stream cpu = Stream::Cpu();
  const PetGeometry g = testing::Fan2D(testing::Tof(5, 4.0, 7.0));
  auto lm = ListModeReconstructor::Create(g, cpu, {2, ListModeMethod::kBucketed, nullptr});
  ASSERT_TRUE(lm.ok());
  std::vector<float> image((*lm)->projector().domain_size(), 1.0f), out(image.size());
  EXPECT_EQ((*lm)->DataTerm(image.data(), out.data(), 0).status().code(), absl::StatusCode::kFailedPrecondition);
  std::vector<ListModeEvent> events(10);
  events[5].view = 36;
  const absl::Status s = (*lm)->SetEvents(events.data(), events.size());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("event 5: view 36 out of range [0, 36)"));
  events[5].view = 3;
  ASSERT_TRUE((*lm)->SetEvents(events.data(), events.size()).ok());
  EXPECT_THAT((*lm)->DataTerm(image.data(), out.data(), 2).status().message(), HasSubstr("subset 2 out of range"));
  EXPECT_THAT(ListModeReconstructor::Create(g, cpu, {0, ListModeMethod::kBucketed, nullptr}).status().message(),
              HasSubstr("num_subsets"));
  image[4] = NAN;
  EXPECT_THAT((*lm)->Run(image.data(), 1).message(), HasSubstr("image[4]"));
}

}  // namespace
}  // namespace pet
}  // namespace recon
}  // namespace tessera

// Training small maps on a synthetic topic-structured corpus (CPU backend).
#include "services/som/trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "services/som/synthetic.h"
#include "services/som/testing/topic_corpus.h"

namespace tessera {
namespace som {
namespace {

// 6x6 topics with 25-term vocabularies over 400 features; 35% of a
// document's features come from a neighbouring topic, so the corpus has a 2-D
// layout to recover.
SyntheticCorpusOptions SmallCorpus(int64_t docs, uint64_t seed) {
  SyntheticCorpusOptions o = testing::TopicCorpus(docs, 400, /*grid=*/6, seed);
  o.mean_nnz = 8;
  o.features_per_topic = 25;
  o.topic_share = 0.6;
  o.neighbour_share = 0.35;
  return o;
}

TEST(Synthetic, ShapeAndDeterminism) {
  SyntheticCorpusOptions o = SmallCorpus(5000, 3);
  std::vector<int32_t> topics;
  SparseBinaryMatrix a = GenerateSyntheticCorpus(o, &topics);
  EXPECT_EQ(a.rows(), 5000);
  EXPECT_EQ(a.cols(), 400);
  EXPECT_TRUE(a.Validate().ok());
  const double mean_nnz = static_cast<double>(a.nnz()) / a.rows();
  EXPECT_NEAR(mean_nnz, 8, 0.5);
  EXPECT_EQ(GenerateSyntheticCorpus(o), a);  // independent of threading
  for (int32_t t : topics) ASSERT_TRUE(t >= 0 && t < 36);
  // Zipf-like background: feature 0 is far more frequent than the median one.
  std::vector<int64_t> df = FeatureCounts(a);
  std::vector<int64_t> sorted = df;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_GT(df[0], 4 * sorted[sorted.size() / 2]);

  SyntheticCorpusOptions medline = MedlineShape(20000);
  SparseBinaryMatrix m = GenerateSyntheticCorpus(medline);
  EXPECT_EQ(m.cols(), 30766);
  EXPECT_NEAR(static_cast<double>(m.nnz()) / m.rows(), 11, 0.5);
}

// The default schedule (issue 16): sigma max(w, h) / 8 -> 0.45, exponential,
// 0.45 in the last decay epoch. Pins the radii `tessera som train` uses.
TEST(Radius, NarrowScheduleIsTheDefault) {
  TrainOptions o;
  EXPECT_EQ(o.radius_schedule, RadiusSchedule::kNarrow);
  o.grid = GridShape{32, 32, Topology::kPlanar};
  o.max_epochs = 3;
  o.radius_decay_epochs = DefaultRadiusDecayEpochs(3);
  EXPECT_DOUBLE_EQ(StartRadius(o), 4);
  EXPECT_DOUBLE_EQ(EndRadius(o), 0.45);
  EXPECT_DOUBLE_EQ(RadiusAt(o, 0), 4);
  EXPECT_NEAR(RadiusAt(o, 1), std::sqrt(1.8), 1e-12);  // 4 * (0.45 / 4)^(1/2)
  EXPECT_DOUBLE_EQ(RadiusAt(o, 2), 0.45);
  // 64 x 64 over the CLI's default 40 epochs: D = 10, 0.45 from epoch 9 on.
  o.grid = GridShape{64, 64, Topology::kPlanar};
  o.max_epochs = 40;
  o.radius_decay_epochs = DefaultRadiusDecayEpochs(40);
  EXPECT_EQ(o.radius_decay_epochs, 10);
  EXPECT_DOUBLE_EQ(RadiusAt(o, 0), 8);
  EXPECT_NEAR(RadiusAt(o, 3), 8 * std::pow(0.45 / 8, 3.0 / 9), 1e-12);
  EXPECT_GT(RadiusAt(o, 8), 0.45);
  EXPECT_DOUBLE_EQ(RadiusAt(o, 9), 0.45);
  EXPECT_DOUBLE_EQ(RadiusAt(o, 39), 0.45);
  // The longer side sets r0; given radii override the schedule's.
  o.grid = GridShape{20, 10, Topology::kPlanar};
  EXPECT_DOUBLE_EQ(RadiusAt(o, 0), 2.5);
  o.radius_start = 6;
  o.radius_end = 1;
  EXPECT_DOUBLE_EQ(RadiusAt(o, 0), 6);
  EXPECT_DOUBLE_EQ(RadiusAt(o, 9), 1);
  // A start below the schedule's end ends there too (no growth).
  o.radius_start = 0.3;
  o.radius_end = -1;
  EXPECT_DOUBLE_EQ(RadiusAt(o, 9), 0.3);
  EXPECT_EQ(ParseRadiusSchedule("narrow").value(), RadiusSchedule::kNarrow);
  EXPECT_EQ(ParseRadiusSchedule("legacy").value(), RadiusSchedule::kLegacy);
  EXPECT_EQ(ParseRadiusSchedule("end-at-last-decay-epoch").value(), RadiusSchedule::kEndAtLastDecayEpoch);
  const absl::Status bad = ParseRadiusSchedule("wide").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("'wide'"), absl::string_view::npos) << bad;
}

// The 2026-12-01 schedule trains the last decay epoch at radius_end, also when
// max_epochs is shorter than radius_decay_epochs.
TEST(Radius, ReachesTheEndRadiusInTheLastDecayEpoch) {
  TrainOptions o;
  o.radius_schedule = RadiusSchedule::kEndAtLastDecayEpoch;
  o.grid = GridShape{32, 32, Topology::kPlanar};
  EXPECT_DOUBLE_EQ(EndRadius(o), 1);  // its default
  o.max_epochs = 3;
  o.radius_decay_epochs = 3;  // what `tessera som train --epochs 3` uses
  EXPECT_EQ(DefaultRadiusDecayEpochs(3), 3);
  EXPECT_DOUBLE_EQ(RadiusAt(o, 0), 16);
  EXPECT_DOUBLE_EQ(RadiusAt(o, 1), 4);  // 16 * (1/16)^(1/2)
  EXPECT_DOUBLE_EQ(RadiusAt(o, 2), 1);
  o.radius_decay_epochs = 10;  // the service's default, cut short by max_epochs
  EXPECT_DOUBLE_EQ(RadiusAt(o, 1), 4);
  EXPECT_DOUBLE_EQ(RadiusAt(o, 2), 1);
  o.max_epochs = 40;  // decays over 10 epochs: r1 in epoch 9, then stays
  EXPECT_NEAR(RadiusAt(o, 3), 16 * std::pow(1.0 / 16, 3.0 / 9), 1e-12);
  EXPECT_GT(RadiusAt(o, 8), 1);
  EXPECT_DOUBLE_EQ(RadiusAt(o, 9), 1);
  EXPECT_DOUBLE_EQ(RadiusAt(o, 30), 1);
  o.max_epochs = 1;  // a single epoch is the last one
  EXPECT_DOUBLE_EQ(RadiusAt(o, 0), 1);
  o.max_epochs = 5;
  o.radius_decay_epochs = 5;
  o.cooling = RadiusCooling::kLinear;  // somoclu's linear cooling: r0 - (r0 - r1) e / (n - 1)
  for (int e = 0; e < 5; ++e) EXPECT_DOUBLE_EQ(RadiusAt(o, e), 16 - 15 * e / 4.0) << e;
  // The old schedule, kept selectable: radius_end only in epoch D.
  o.cooling = RadiusCooling::kExponential;
  o.max_epochs = 3;
  o.radius_decay_epochs = 3;
  o.radius_schedule = RadiusSchedule::kLegacy;
  EXPECT_DOUBLE_EQ(RadiusAt(o, 0), 16);
  EXPECT_NEAR(RadiusAt(o, 1), 6.3496, 1e-4);
  EXPECT_NEAR(RadiusAt(o, 2), 2.5198, 1e-4);
}

TEST(Radius, LegacyExponentialDecayThenFloor) {
  TrainOptions o;
  o.radius_schedule = RadiusSchedule::kLegacy;
  o.grid = GridShape{20, 10, Topology::kPlanar};
  o.radius_end = 1;
  o.radius_decay_epochs = 4;
  EXPECT_DOUBLE_EQ(RadiusAt(o, 0), 10);
  EXPECT_NEAR(RadiusAt(o, 2), std::sqrt(10.0), 1e-12);
  EXPECT_DOUBLE_EQ(RadiusAt(o, 4), 1);
  EXPECT_DOUBLE_EQ(RadiusAt(o, 9), 1);
  o.radius_start = 3;
  EXPECT_DOUBLE_EQ(RadiusAt(o, 0), 3);
  o.cooling = RadiusCooling::kLinear;  // somoclu's default
  o.radius_start = 8;
  o.radius_end = 0.5;
  o.radius_decay_epochs = 2;
  EXPECT_DOUBLE_EQ(RadiusAt(o, 1), 4.25);
  EXPECT_DOUBLE_EQ(RadiusAt(o, 2), 0.5);
}

struct Case {
  InitMethod init;
  Topology topology;
  WeightType type;
  RadiusSchedule schedule = RadiusSchedule::kEndAtLastDecayEpoch;
  // Topographic error bounds (training, held out): the narrow schedule trades
  // ordering for QE (its 3-tap end neighbourhood).
  double max_te = 0.1, max_held_te = 0.12;
};

class TrainerTest : public ::testing::TestWithParam<Case> {};

// QE falls, the map orders (low topographic error) and converges; held-out
// documents land with a similar QE. Thresholds measured on this corpus
// (see the printed values) with a margin.
TEST_P(TrainerTest, QeDecreasesAndTheMapOrders) {
  const Case c = GetParam();
  std::vector<int32_t> topics;
  SparseBinaryMatrix corpus = GenerateSyntheticCorpus(SmallCorpus(6000, 11), &topics);
  RowSplit split = SplitRows(corpus.rows(), 0.1, 5);
  SparseBinaryMatrix train = SelectRows(corpus, split.train);
  SparseBinaryMatrix held = SelectRows(corpus, split.held_out);
  TrainOptions o;
  o.grid = GridShape{12, 12, c.topology};
  o.init = c.init;
  o.weight_type = c.type;
  o.max_epochs = 30;
  o.radius_decay_epochs = 10;
  o.radius_schedule = GetParam().schedule;
  int calls = 0;
  o.progress = [&](const EpochReport& r) {
    ++calls;
    std::printf("  epoch %2d radius %5.2f (b=%d) QE %.4f (%.2e) TE %.3f  %.3fs\n", r.epoch, r.radius,
                r.box_half_width, r.qe, r.qe_relative_change, r.topographic_error, r.seconds);
  };
  auto result = TrainSom(train, o);
  ASSERT_TRUE(result.ok()) << result.status();
  const auto& h = result->history;
  ASSERT_EQ(calls, result->epochs);
  ASSERT_GE(h.size(), 11u);
  EXPECT_TRUE(result->converged);
  EXPECT_LT(result->epochs, o.max_epochs);
  // QE falls over the schedule (the corpus is noisy: the codebook of the
  // corpus mean is at about 2.66, trained maps reach ~2.44-2.47) and does not rise
  // once the radius is fixed.
  EXPECT_LT(h.back().qe, 0.96 * h.front().qe);
  for (size_t e = 1; e < h.size(); ++e) {
    if (h[e - 1].radius <= EndRadius(o)) {
      EXPECT_LE(h[e].qe, h[e - 1].qe * 1.002) << "epoch " << e;
    }
  }
  const QualityMetrics& f = result->final_quality;
  std::printf("final: QE %.4f cosine %.4f TE %.4f dead %.3f; %d epochs, %.2fs\n", f.qe_euclidean, f.qe_cosine,
              f.topographic_error, f.dead_unit_fraction, result->epochs, result->total_seconds);
  EXPECT_LE(f.qe_euclidean, h.back().qe * 1.001);
  // Measured 0.036-0.052 over the variants (held-out 0.045-0.062); a map
  // without order has ~0.9 (random initialisation, epoch 0).
  EXPECT_LT(f.topographic_error, c.max_te);
  EXPECT_LT(f.dead_unit_fraction, 0.15);

  // The topic layout is (locally) recovered: each topic's most frequent BMU
  // (its "home" node) lies closer to the homes of grid-adjacent topics than to
  // those of arbitrary topics. Measured ratios 0.68-0.76 over the variants (the
  // map keeps neighbouring topics together but folds the 6x6 topic grid); an
  // unordered map gives about 1.
  auto train_proj = ProjectDocuments(result->model, train, Backend::kCpu);
  ASSERT_TRUE(train_proj.ok());
  std::vector<std::vector<int>> hits(36, std::vector<int>(o.grid.nodes(), 0));
  for (size_t k = 0; k < split.train.size(); ++k) ++hits[topics[split.train[k]]][train_proj->bmu[k]];
  std::vector<int> home(36);
  for (int t = 0; t < 36; ++t) home[t] = std::max_element(hits[t].begin(), hits[t].end()) - hits[t].begin();
  auto dist = [&](int a, int b) {
    double dx = std::abs(home[a] % o.grid.width - home[b] % o.grid.width);
    double dy = std::abs(home[a] / o.grid.width - home[b] / o.grid.width);
    if (c.topology == Topology::kToroidal) {
      dx = std::min(dx, o.grid.width - dx);
      dy = std::min(dy, o.grid.height - dy);
    }
    return std::hypot(dx, dy);
  };
  double adjacent = 0, all = 0;
  int n_adjacent = 0, n_all = 0;
  for (int a = 0; a < 36; ++a) {
    for (int b = a + 1; b < 36; ++b) {
      all += dist(a, b);
      ++n_all;
      if (std::abs(a % 6 - b % 6) + std::abs(a / 6 - b / 6) == 1) {
        adjacent += dist(a, b);
        ++n_adjacent;
      }
    }
  }
  adjacent /= n_adjacent;
  all /= n_all;
  std::printf("topic homes: adjacent topics %.2f cells apart, all pairs %.2f\n", adjacent, all);
  EXPECT_LT(adjacent, 0.85 * all);

  auto projected = ProjectDocuments(result->model, held, Backend::kCpu);
  ASSERT_TRUE(projected.ok()) << projected.status();
  const QualityMetrics& p = projected->quality;
  std::printf("held-out: QE %.4f cosine %.4f TE %.4f dead %.3f\n", p.qe_euclidean, p.qe_cosine, p.topographic_error,
              p.dead_unit_fraction);
  EXPECT_EQ(projected->bmu.size(), static_cast<size_t>(held.rows()));
  EXPECT_LT(p.qe_euclidean, 1.1 * f.qe_euclidean);
  EXPECT_LT(p.topographic_error, c.max_held_te);
}

// Issue 16: at equal epochs the default (narrow) schedule fits held-out
// documents better than the 2026-12-01 one. Measured on this corpus: held-out
// QE 2.33 vs 2.44 after 12 epochs.
TEST(Trainer, NarrowScheduleLowersHeldOutQe) {
  SparseBinaryMatrix corpus = GenerateSyntheticCorpus(SmallCorpus(6000, 11));
  RowSplit split = SplitRows(corpus.rows(), 0.1, 5);
  SparseBinaryMatrix train = SelectRows(corpus, split.train);
  SparseBinaryMatrix held = SelectRows(corpus, split.held_out);
  double qe[2];
  const RadiusSchedule schedules[2] = {RadiusSchedule::kNarrow, RadiusSchedule::kEndAtLastDecayEpoch};
  for (int k = 0; k < 2; ++k) {
    TrainOptions o;
    o.grid = GridShape{12, 12, Topology::kPlanar};
    o.max_epochs = 12;
    o.radius_decay_epochs = DefaultRadiusDecayEpochs(12);
    o.convergence_tolerance = 0;
    o.radius_schedule = schedules[k];
    auto result = TrainSom(train, o);
    ASSERT_TRUE(result.ok()) << result.status();
    auto projected = ProjectDocuments(result->model, held, Backend::kCpu);
    ASSERT_TRUE(projected.ok()) << projected.status();
    qe[k] = projected->quality.qe_euclidean;
    std::printf("%s: held-out QE %.4f TE %.4f\n", RadiusScheduleName(schedules[k]), qe[k],
                projected->quality.topographic_error);
  }
  EXPECT_LT(qe[0], 0.97 * qe[1]);
}

INSTANTIATE_TEST_SUITE_P(
    Variants, TrainerTest,
    ::testing::Values(Case{InitMethod::kPca, Topology::kPlanar, WeightType::kFloat32},
                      Case{InitMethod::kRandom, Topology::kPlanar, WeightType::kFloat32},
                      Case{InitMethod::kPca, Topology::kToroidal, WeightType::kFloat32},
                      Case{InitMethod::kPca, Topology::kPlanar, WeightType::kFloat16},
                      // Measured TE 0.32-0.36 (held out 0.36-0.39) with QE 2.29 instead of 2.44.
                      Case{InitMethod::kPca, Topology::kPlanar, WeightType::kFloat32, RadiusSchedule::kNarrow, 0.45,
                           0.5},
                      Case{InitMethod::kRandom, Topology::kPlanar, WeightType::kFloat32, RadiusSchedule::kNarrow,
                           0.45, 0.5}));

TEST(Trainer, PcaInitialisationIsOrderedAlongTheLeadingComponent) {
  SparseBinaryMatrix corpus = GenerateSyntheticCorpus(SmallCorpus(3000, 2));
  TrainOptions o;
  o.grid = GridShape{10, 4, Topology::kPlanar};
  auto model = InitializeModel(corpus, o);
  ASSERT_TRUE(model.ok()) << model.status();
  // Opposite corners differ; the centre column is (about) the mean.
  double corner_diff = 0;
  for (int64_t v = 0; v < corpus.cols(); ++v) corner_diff += std::abs(model->Weight(v, 0) - model->Weight(v, 9));
  EXPECT_GT(corner_diff, 0.1);
  TrainOptions random = o;
  random.init = InitMethod::kRandom;
  auto rmodel = InitializeModel(corpus, random);
  ASSERT_TRUE(rmodel.ok());
  std::vector<int64_t> df = FeatureCounts(corpus);
  for (int64_t v = 0; v < 50; ++v) {
    const double p = static_cast<double>(df[v]) / corpus.rows();
    for (int64_t i = 0; i < 40; ++i) {
      ASSERT_GE(rmodel->Weight(v, i), 0.0f);
      ASSERT_LE(rmodel->Weight(v, i), 2 * p + 1e-6);
    }
  }
}

TEST(Trainer, RejectsBadOptions) {
  SparseBinaryMatrix corpus = GenerateSyntheticCorpus(SmallCorpus(100, 1));
  TrainOptions o;
  o.grid = GridShape{0, 3, Topology::kPlanar};
  EXPECT_FALSE(TrainSom(corpus, o).ok());
  o.grid = GridShape{3, 3, Topology::kPlanar};
  o.max_epochs = 0;
  EXPECT_FALSE(TrainSom(corpus, o).ok());
  o.max_epochs = 2;
  EXPECT_FALSE(TrainSom(SparseBinaryMatrix(5), o).ok());  // no rows
  auto ok = TrainSom(corpus, o);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->epochs, 2);
  EXPECT_FALSE(ok->converged);
}

}  // namespace
}  // namespace som
}  // namespace tessera

namespace tessera {
namespace som {
namespace {

TEST(TrainSomOptions, CusparseBmuNeedsCudaAndFp32) {
  SparseBinaryMatrix corpus = GenerateSyntheticCorpus(MedlineShape(200));
  TrainOptions o;
  o.grid = GridShape{4, 4, Topology::kPlanar};
  o.backend = Backend::kCpu;
  o.bmu_algorithm = BmuAlgorithm::kCusparseRowOrder;
  auto r = TrainSom(corpus, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  o.bmu_algorithm = BmuAlgorithm::kNodeMajor;
  EXPECT_EQ(TrainSom(corpus, o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace som
}  // namespace tessera

namespace tessera {
namespace som {
namespace {

// TrainOptions::group_bounds (issue 37): the same BMUs every epoch, hence the
// same codebooks, QE history, convergence epoch and final QE/TE, bit for bit,
// on a topic corpus (the map settles: most groups are excluded) and a
// MEDLINE-shaped one; fp32 and fp16, planar and toroidal, PCA and random
// starts, a ragged last group.
void ExpectSameTraining(const SparseBinaryMatrix& corpus, TrainOptions o) {
  o.group_bounds.enabled = false;
  auto plain = TrainSom(corpus, o);
  ASSERT_TRUE(plain.ok()) << plain.status();
  o.group_bounds.enabled = true;
  auto bounded = TrainSom(corpus, o);
  ASSERT_TRUE(bounded.ok()) << bounded.status();
  ASSERT_EQ(bounded->epochs, plain->epochs);
  EXPECT_EQ(bounded->converged, plain->converged);
  int64_t searched = 0, pairs = 0, bounded_epochs = 0;
  for (int e = 0; e < plain->epochs; ++e) {
    const EpochReport& b = bounded->history[e];
    EXPECT_EQ(b.qe, plain->history[e].qe) << "epoch " << e;  // the scores keep their bits
    EXPECT_EQ(plain->history[e].bmu_bound_mode, 0);
    if (b.bmu_bound_mode == 2) {
      ++bounded_epochs;
      searched += b.bmu_pairs_searched;
      pairs += b.bmu_pairs;
    }
    std::printf("  epoch %2d radius %5.2f QE %.6f TE %.4f (plain %.4f)  mode %d  pairs searched %5.1f%%  "
                "documents skipped %5.1f%%\n",
                e, b.radius, b.qe, b.topographic_error, plain->history[e].topographic_error, b.bmu_bound_mode,
                b.bmu_pairs > 0 ? 100.0 * b.bmu_pairs_searched / b.bmu_pairs : 100.0,
                100.0 * b.bmu_documents_skipped / corpus.rows());
  }
  EXPECT_GT(bounded_epochs, 0);
  EXPECT_LT(searched, pairs);  // the bounded path was exercised
  EXPECT_EQ(bounded->final_quality.qe_euclidean, plain->final_quality.qe_euclidean);
  EXPECT_EQ(bounded->final_quality.topographic_error, plain->final_quality.topographic_error);
  EXPECT_EQ(bounded->final_quality.dead_units, plain->final_quality.dead_units);
  EXPECT_TRUE(bounded->model.weights_f32 == plain->model.weights_f32);
  EXPECT_TRUE(bounded->model.weights_f16 == plain->model.weights_f16);
  EXPECT_EQ(std::memcmp(bounded->model.sq_norms.data(), plain->model.sq_norms.data(),
                        4 * plain->model.sq_norms.size()),
            0);
}

TEST(GroupBounds, SameBitsOnATopicCorpus) {
  SparseBinaryMatrix corpus = GenerateSyntheticCorpus(SmallCorpus(3000, 17));
  TrainOptions o;
  o.grid = GridShape{8, 8, Topology::kPlanar};
  o.max_epochs = 25;
  o.radius_decay_epochs = 8;
  ExpectSameTraining(corpus, o);
}

TEST(GroupBounds, SameBitsFp16ToroidalRandomStartRaggedGroups) {
  SparseBinaryMatrix corpus = GenerateSyntheticCorpus(SmallCorpus(2000, 19));
  TrainOptions o;
  o.grid = GridShape{6, 7, Topology::kToroidal};  // 42 nodes in groups of 8: the last has 2
  o.weight_type = WeightType::kFloat16;
  o.init = InitMethod::kRandom;
  o.max_epochs = 15;
  o.radius_decay_epochs = 6;
  o.group_bounds.strip_nodes = 8;
  o.group_bounds.max_radius = 100;  // bounded from the second epoch on
  ExpectSameTraining(corpus, o);
}

// A strip the backend cannot take turns the option off (logged): the
// training runs without bounds, as if it were off.
TEST(GroupBounds, UnsupportedStripTrainsWithoutBounds) {
  SparseBinaryMatrix corpus = GenerateSyntheticCorpus(SmallCorpus(500, 5));
  TrainOptions o;
  o.grid = GridShape{4, 4, Topology::kPlanar};
  o.max_epochs = 4;
  o.radius_decay_epochs = 2;
  auto plain = TrainSom(corpus, o);
  ASSERT_TRUE(plain.ok()) << plain.status();
  o.group_bounds.enabled = true;
  o.group_bounds.strip_nodes = 0;
  auto without = TrainSom(corpus, o);
  ASSERT_TRUE(without.ok()) << without.status();
  for (const EpochReport& r : without->history) EXPECT_EQ(r.bmu_bound_mode, 0);
  EXPECT_TRUE(without->model.weights_f32 == plain->model.weights_f32);
}

TEST(GroupBounds, SameBitsOnAMedlineShapedCorpus) {
  SparseBinaryMatrix corpus = GenerateSyntheticCorpus(MedlineShape(4000));
  TrainOptions o;
  o.grid = GridShape{8, 8, Topology::kPlanar};
  o.max_epochs = 14;
  o.radius_decay_epochs = 6;
  ExpectSameTraining(corpus, o);
}

}  // namespace
}  // namespace som
}  // namespace tessera

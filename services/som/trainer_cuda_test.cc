// The CUDA trainer against the CPU trainer. Both backends compute identical
// BMUs (same fp32 summation order) and identical updates (integer box sums
// are exact in double), so the whole trajectory should match; we require the
// per-epoch QE within 1e-6 relative and the final codebooks within 1e-5.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/testing/gpu_test.h"
#include "services/som/synthetic.h"
#include "services/som/testing/topic_corpus.h"
#include "services/som/trainer.h"

namespace tessera {
namespace som {
namespace {

TEST(TrainerCudaParity, SameTrajectoryAsCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  SparseBinaryMatrix corpus = GenerateSyntheticCorpus(testing::TopicCorpus(20000, 2000, /*grid=*/8, /*seed=*/4));
  for (WeightType type : {WeightType::kFloat32, WeightType::kFloat16}) {
    for (Topology topo : {Topology::kPlanar, Topology::kToroidal}) {
      SCOPED_TRACE(std::string(WeightTypeName(type)) + " " + TopologyName(topo));
      TrainOptions o;
      o.grid = GridShape{24, 20, topo};
      o.weight_type = type;
      o.max_epochs = 12;
      o.radius_decay_epochs = 8;
      o.update_slab_bytes = int64_t{1} << 20;  // several slabs
      o.pca_on_device = false;  // the same initial bits on both backends (the GPU PCA: below)
      auto cpu = TrainSom(corpus, o);
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      o.backend = Backend::kCuda;
      auto gpu = TrainSom(corpus, o);
      ASSERT_TRUE(gpu.ok()) << gpu.status();
      ASSERT_EQ(gpu->epochs, cpu->epochs);
      for (size_t e = 0; e < cpu->history.size(); ++e) {
        EXPECT_NEAR(gpu->history[e].qe, cpu->history[e].qe, 1e-6 * cpu->history[e].qe) << "epoch " << e;
        std::printf("  epoch %zu QE cpu %.6f cuda %.6f  (cpu %.3fs, cuda %.3fs)\n", e, cpu->history[e].qe,
                    gpu->history[e].qe, cpu->history[e].seconds, gpu->history[e].seconds);
      }
      const int64_t n = cpu->model.grid.nodes() * corpus.cols();
      double worst = 0;
      for (int64_t k = 0; k < n; ++k) {
        const double a = gpu->model.Weight(k / cpu->model.grid.nodes(), k % cpu->model.grid.nodes());
        const double b = cpu->model.Weight(k / cpu->model.grid.nodes(), k % cpu->model.grid.nodes());
        worst = std::max(worst, std::abs(a - b) / std::max(1e-6, std::abs(b)));
      }
      std::printf("  largest relative weight difference %.3g\n", worst);
      EXPECT_LT(worst, type == WeightType::kFloat32 ? 1e-5 : 1e-3);
      EXPECT_NEAR(gpu->final_quality.topographic_error, cpu->final_quality.topographic_error, 1e-3);
    }
  }
}

// TrainOptions::group_bounds on CUDA (kernels/som/group_bounds.cu: the fused
// group-bounded kernel, the update's drift): the same map, QE history and
// final quality as the exhaustive CUDA search, bit for bit, with groups
// excluded; and the same trajectory as the CPU trainer with the option.
TEST(TrainerCudaParity, GroupBoundsTrainTheSameMap) {
  TESSERA_SKIP_WITHOUT_GPU();
  SparseBinaryMatrix corpus = GenerateSyntheticCorpus(testing::TopicCorpus(12000, 1500, /*grid=*/6, /*seed=*/23));
  for (WeightType type : {WeightType::kFloat32, WeightType::kFloat16}) {
    SCOPED_TRACE(WeightTypeName(type));
    TrainOptions o;
    o.grid = GridShape{12, 10, Topology::kPlanar};
    o.weight_type = type;
    o.max_epochs = 20;
    o.radius_decay_epochs = 8;
    o.pca_on_device = false;
    o.group_bounds.enabled = true;
    auto cpu = TrainSom(corpus, o);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    o.backend = Backend::kCuda;
    auto bounded = TrainSom(corpus, o);
    ASSERT_TRUE(bounded.ok()) << bounded.status();
    o.group_bounds.enabled = false;
    auto plain = TrainSom(corpus, o);
    ASSERT_TRUE(plain.ok()) << plain.status();
    ASSERT_EQ(bounded->epochs, plain->epochs);
    ASSERT_EQ(bounded->epochs, cpu->epochs);
    int64_t searched = 0, pairs = 0;
    for (int e = 0; e < plain->epochs; ++e) {
      const EpochReport& b = bounded->history[e];
      EXPECT_EQ(b.qe, plain->history[e].qe) << "epoch " << e;
      EXPECT_NEAR(b.qe, cpu->history[e].qe, 1e-6 * cpu->history[e].qe) << "epoch " << e;
      EXPECT_EQ(b.bmu_bound_mode, cpu->history[e].bmu_bound_mode) << "epoch " << e;
      if (b.bmu_bound_mode == 2) {
        searched += b.bmu_pairs_searched;
        pairs += b.bmu_pairs;
      }
      std::printf("  epoch %2d QE %.6f  mode %d  pairs searched cuda %5.1f%% cpu %5.1f%%\n", e, b.qe,
                  b.bmu_bound_mode, b.bmu_pairs > 0 ? 100.0 * b.bmu_pairs_searched / b.bmu_pairs : 100.0,
                  cpu->history[e].bmu_pairs > 0
                      ? 100.0 * cpu->history[e].bmu_pairs_searched / cpu->history[e].bmu_pairs
                      : 100.0);
    }
    EXPECT_LT(searched, pairs);
    EXPECT_EQ(bounded->final_quality.qe_euclidean, plain->final_quality.qe_euclidean);
    EXPECT_EQ(bounded->final_quality.topographic_error, plain->final_quality.topographic_error);
    EXPECT_TRUE(bounded->model.weights_f32 == plain->model.weights_f32);
    EXPECT_TRUE(bounded->model.weights_f16 == plain->model.weights_f16);
    EXPECT_TRUE(bounded->model.sq_norms == plain->model.sq_norms);
  }
}

// The trainer hands each epoch's search the previous epoch's BMUs (aliased
// with its output): ordering the documents by them (the default tuning) trains
// the same map, bit for bit, as visiting them as stored.
TEST(TrainerCudaParity, OrderedBmuSearchTrainsTheSameMap) {
  TESSERA_SKIP_WITHOUT_GPU();
  SparseBinaryMatrix corpus = GenerateSyntheticCorpus(testing::TopicCorpus(6000, 1500, /*grid=*/6, /*seed=*/16));
  TrainOptions o;
  o.grid = GridShape{23, 17, Topology::kPlanar};
  o.backend = Backend::kCuda;
  o.max_epochs = 6;
  o.radius_decay_epochs = 5;
  ASSERT_TRUE(o.bmu_tuning.order_by_previous_bmu) << "ordering is the trainer's default";
  auto ordered = TrainSom(corpus, o);
  ASSERT_TRUE(ordered.ok()) << ordered.status();
  o.bmu_tuning.order_by_previous_bmu = false;
  auto plain = TrainSom(corpus, o);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_EQ(ordered->epochs, plain->epochs);
  for (size_t e = 0; e < plain->history.size(); ++e) {
    EXPECT_EQ(ordered->history[e].qe, plain->history[e].qe) << "epoch " << e;
  }
  EXPECT_EQ(ordered->model.weights_f32, plain->model.weights_f32);
}

// The screened BMU search (BmuTuning::screen_fp16) gives the exact kernel's
// bits, so it trains the same map bit for bit (QE per epoch, final fp32
// weights), and it screens most documents once the PCA codebook's negative
// weights are gone (exact rescans below half of the documents in the last
// epoch). QE/TE on the device and on the host agree to 1e-12 relative.
TEST(TrainerCudaParity, ScreenedBmuSearchTrainsTheSameMap) {
  TESSERA_SKIP_WITHOUT_GPU();
  SparseBinaryMatrix corpus = GenerateSyntheticCorpus(testing::TopicCorpus(6000, 1500, /*grid=*/6, /*seed=*/37));
  TrainOptions o;
  o.grid = GridShape{23, 17, Topology::kPlanar};
  o.backend = Backend::kCuda;
  o.max_epochs = 6;
  o.radius_decay_epochs = 5;
  o.bmu_tuning.screen_fp16 = true;
  auto screened = TrainSom(corpus, o);
  ASSERT_TRUE(screened.ok()) << screened.status();
  o.bmu_tuning.screen_fp16 = false;
  o.bmu_tuning.screen_auto_max_nodes = 0;  // the exact kernel
  o.quality_on_device = false;
  auto exact = TrainSom(corpus, o);
  ASSERT_TRUE(exact.ok()) << exact.status();
  ASSERT_EQ(screened->epochs, exact->epochs);
  for (size_t e = 0; e < exact->history.size(); ++e) {
    EXPECT_NEAR(screened->history[e].qe, exact->history[e].qe, 1e-12 * exact->history[e].qe) << "epoch " << e;
    EXPECT_NEAR(screened->history[e].topographic_error, exact->history[e].topographic_error, 1e-12) << "epoch " << e;
    std::printf("  epoch %zu exact rescans %lld of %lld\n", e,
                static_cast<long long>(screened->history[e].bmu_exact_rescans), static_cast<long long>(corpus.rows()));
  }
  EXPECT_LT(screened->history.back().bmu_exact_rescans, corpus.rows() / 2);
  EXPECT_EQ(screened->model.weights_f32, exact->model.weights_f32);
  EXPECT_EQ(screened->final_quality.dead_units, exact->final_quality.dead_units);
}

// The GPU PCA initialisation (pca_on_device) against the host one: the same
// iteration in another summation order, so the codebooks agree to rounding:
// fp32 weights within 1e-5 absolute (they lie in about [-1, 2]), fp16 within
// one fp16 step of the larger value (2^-10 relative, 2^-24 absolute floor),
// norms within 1e-5 relative. A GPU-initialised training ends at the CPU's
// quality (final QE within 1 %).
TEST(TrainerCudaParity, PcaOnTheDeviceMatchesTheHost) {
  TESSERA_SKIP_WITHOUT_GPU();
  SparseBinaryMatrix corpus = GenerateSyntheticCorpus(testing::TopicCorpus(30000, 3000, /*grid=*/6, /*seed=*/9));
  for (WeightType type : {WeightType::kFloat32, WeightType::kFloat16}) {
    SCOPED_TRACE(WeightTypeName(type));
    TrainOptions o;
    o.grid = GridShape{33, 21, Topology::kPlanar};
    o.weight_type = type;
    o.pca_sample_rows = 12345;  // the sampled path
    auto host = InitializeModel(corpus, o);
    ASSERT_TRUE(host.ok()) << host.status();
    o.backend = Backend::kCuda;
    auto device = InitializeModel(corpus, o);
    ASSERT_TRUE(device.ok()) << device.status();
    const int64_t m = o.grid.nodes();
    double worst = 0, worst_norm = 0;
    int64_t bad = 0;
    for (int64_t v = 0; v < corpus.cols(); ++v) {
      for (int64_t i = 0; i < m; ++i) {
        const double a = device->Weight(v, i), b = host->Weight(v, i);
        const double d = std::abs(a - b);
        worst = std::max(worst, d);
        const double allowed = type == WeightType::kFloat32
                                   ? 1e-5
                                   : std::max(std::ldexp(1.0, -24), std::ldexp(std::max(std::abs(a), std::abs(b)), -10));
        if (d > allowed) ++bad;
      }
    }
    for (int64_t i = 0; i < m; ++i) {
      worst_norm = std::max(worst_norm, std::abs(double{device->sq_norms[i]} - host->sq_norms[i]) / host->sq_norms[i]);
    }
    std::printf("  %s: largest weight difference %.3g, norm %.3g relative\n", WeightTypeName(type), worst, worst_norm);
    EXPECT_EQ(bad, 0);
    EXPECT_LT(worst_norm, 1e-5);
    // Not a constant map: the components spread the nodes.
    EXPECT_GT(std::abs(host->Weight(0, 0) - host->Weight(0, m - 1)) + std::abs(host->Weight(1, 0) - host->Weight(1, m - 1)),
              1e-4);
  }
  TrainOptions o;
  o.grid = GridShape{16, 12, Topology::kPlanar};
  o.max_epochs = 6;
  o.radius_decay_epochs = 5;
  auto cpu = TrainSom(corpus, o);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  o.backend = Backend::kCuda;
  auto gpu = TrainSom(corpus, o);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  std::printf("  final QE cpu %.6f cuda (device PCA) %.6f; init %.3fs vs %.3fs\n", cpu->final_quality.qe_euclidean,
              gpu->final_quality.qe_euclidean, cpu->init_seconds, gpu->init_seconds);
  EXPECT_NEAR(gpu->final_quality.qe_euclidean, cpu->final_quality.qe_euclidean, 0.01 * cpu->final_quality.qe_euclidean);
  ASSERT_EQ(gpu->model.weights_f32.size(), cpu->model.weights_f32.size());
}

}  // namespace
}  // namespace som
}  // namespace tessera

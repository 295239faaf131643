// The CUDA trainer against the CPU trainer. Both backends compute identical
// BMUs (same fp32 summation order) and identical updates (integer box sums
// are exact in double), so the whole trajectory should match; we require the
// per-epoch QE within 1e-6 relative and the final codebooks within 1e-5.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "common/testing/gpu_test.h"
#include "services/som/synthetic.h"
#include "services/som/trainer.h"

namespace tessera {
namespace som {
namespace {

TEST(TrainerCudaParity, SameTrajectoryAsCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  SyntheticCorpusOptions c;
  c.docs = 20000;
  c.features = 2000;
  c.mean_nnz = 11;
  c.topic_grid_width = 8;
  c.topic_grid_height = 8;
  c.seed = 4;
  SparseBinaryMatrix corpus = GenerateSyntheticCorpus(c);
  for (WeightType type : {WeightType::kFloat32, WeightType::kFloat16}) {
    for (Topology topo : {Topology::kPlanar, Topology::kToroidal}) {
      SCOPED_TRACE(std::string(WeightTypeName(type)) + " " + TopologyName(topo));
      TrainOptions o;
      o.grid = GridShape{24, 20, topo};
      o.weight_type = type;
      o.max_epochs = 12;
      o.radius_decay_epochs = 8;
      o.update_slab_bytes = int64_t{1} << 20;  // several slabs
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

}  // namespace
}  // namespace som
}  // namespace tessera

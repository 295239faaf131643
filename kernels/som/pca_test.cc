// The CPU PCA reference against a dense eigen solution of the covariance, and
// the codebook fill against its formula.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/device.h"
#include "kernels/som/bmu.h"
#include "kernels/som/half.h"
#include "kernels/som/pca.h"
#include "kernels/som/test_util.h"

namespace tessera {
namespace som {
namespace {

// Dense covariance of the rows (features x features, row-major).
std::vector<double> Covariance(const CsrView& x) {
  const int64_t v = x.cols;
  std::vector<double> mean(v, 0.0), c(v * v, 0.0);
  for (int64_t d = 0; d < x.rows; ++d) {
    for (int64_t a = x.offsets[d]; a < x.offsets[d + 1]; ++a) {
      mean[x.indices[a]] += 1.0 / x.rows;
      for (int64_t b = x.offsets[d]; b < x.offsets[d + 1]; ++b) c[x.indices[a] * v + x.indices[b]] += 1.0 / x.rows;
    }
  }
  for (int64_t i = 0; i < v; ++i) {
    for (int64_t j = 0; j < v; ++j) c[i * v + j] -= mean[i] * mean[j];
  }
  return c;
}

// Leading eigenvector of a dense symmetric matrix by many power steps, with
// `deflate` (unit vector) projected out.
std::vector<double> DenseLeading(const std::vector<double>& c, int64_t v, const std::vector<double>* deflate,
                                 double* lambda) {
  std::vector<double> u(v, 1.0), z(v);
  for (int64_t i = 0; i < v; ++i) u[i] += 0.01 * i;
  for (int it = 0; it < 5000; ++it) {
    for (int64_t i = 0; i < v; ++i) {
      double s = 0;
      for (int64_t j = 0; j < v; ++j) s += c[i * v + j] * u[j];
      z[i] = s;
    }
    if (deflate != nullptr) {
      double dot = 0;
      for (int64_t i = 0; i < v; ++i) dot += z[i] * (*deflate)[i];
      for (int64_t i = 0; i < v; ++i) z[i] -= dot * (*deflate)[i];
    }
    double norm = 0, rq = 0;
    for (int64_t i = 0; i < v; ++i) rq += z[i] * u[i];
    for (double e : z) norm += e * e;
    norm = std::sqrt(norm);
    for (int64_t i = 0; i < v; ++i) u[i] = z[i] / norm;
    *lambda = rq;
  }
  return u;
}

double AbsCos(const std::vector<double>& a, const std::vector<double>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  return std::abs(ab) / std::sqrt(aa * bb);
}

TEST(PcaCpu, FindsTheLeadingEigenvectorsOfTheCovariance) {
  std::mt19937 rng(11);
  const testutil::HostDocs docs = testutil::RandomDocs(600, 30, 8, rng);
  PcaOptions o;
  o.iterations = 2000;  // converged, whatever the eigengap of this corpus
  o.seed = 5;
  const PrincipalPlane p = cpu::LeadingComponents(docs.view(), o);
  const std::vector<double> c = Covariance(docs.view());
  double l0 = 0, l1 = 0;
  const std::vector<double> e0 = DenseLeading(c, 30, nullptr, &l0);
  const std::vector<double> e1 = DenseLeading(c, 30, &e0, &l1);
  ASSERT_GT(l0, l1 * 1.01) << "the test corpus needs an eigengap";
  EXPECT_GT(AbsCos(p.u[0], e0), 0.99999);
  EXPECT_GT(AbsCos(p.u[1], e1), 0.999);
  EXPECT_NEAR(p.lambda[0], l0, 1e-9 * l0);
  EXPECT_NEAR(p.lambda[1], l1, 1e-6 * l0);
  EXPECT_LT(AbsCos(p.u[0], p.u[1]), 1e-12);
}

TEST(PcaCpu, SignIsCanonical) {
  std::mt19937 rng(3);
  const testutil::HostDocs docs = testutil::RandomDocs(200, 25, 6, rng);
  for (uint64_t seed : {1, 2, 3}) {
    PcaOptions o;
    o.seed = seed;
    const PrincipalPlane p = cpu::LeadingComponents(docs.view(), o);
    for (const std::vector<double>& u : p.u) {
      double largest = 0;
      for (double e : u) {
        if (std::abs(e) > std::abs(largest)) largest = e;
      }
      EXPECT_GT(largest, 0) << "seed " << seed;
    }
  }
}

TEST(PcaCpu, RejectsEmptyInput) {
  testutil::HostDocs empty;
  empty.cols = 4;
  EXPECT_EQ(LeadingComponents(Stream::Cpu(), empty.view(), PcaOptions()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PcaCpu, FillFollowsTheFormulaAndComputesNorms) {
  const GridShape grid{7, 5, Topology::kPlanar};
  const int64_t m = grid.nodes(), v = 9;
  std::mt19937 rng(2);
  std::uniform_real_distribution<double> u(-1, 1);
  PrincipalPlane plane;
  std::vector<double> mean(v);
  for (double& e : mean) e = 0.5 + 0.5 * u(rng);
  for (auto& vec : plane.u) {
    vec.resize(v);
    for (double& e : vec) e = u(rng);
  }
  plane.lambda[0] = 0.9;
  plane.lambda[1] = 0.25;
  std::vector<double> c0, c1;
  PcaNodeCoefficients(grid, plane, &c0, &c1);
  EXPECT_DOUBLE_EQ(c0[0], -std::sqrt(0.9));          // cell (0, 0): a = -1 along the longer side
  EXPECT_DOUBLE_EQ(c1[m - 1], std::sqrt(0.25));      // cell (6, 4): b = +1
  for (WeightType type : {WeightType::kFloat32, WeightType::kFloat16}) {
    std::vector<float> w32(v * m);
    std::vector<uint16_t> w16(v * m);
    std::vector<float> norms(m);
    CodebookView cb;
    cb.nodes = m;
    cb.features = v;
    cb.type = type;
    cb.weights = type == WeightType::kFloat32 ? static_cast<void*>(w32.data()) : static_cast<void*>(w16.data());
    cb.sq_norms = norms.data();
    const PcaFillInputs in{mean.data(), plane.u[0].data(), plane.u[1].data(), c0.data(), c1.data()};
    ASSERT_TRUE(FillPcaCodebook(Stream::Cpu(), cb, in).ok());
    for (int64_t f = 0; f < v; ++f) {
      for (int64_t i = 0; i < m; ++i) {
        const float want = static_cast<float>(mean[f] + c0[i] * plane.u[0][f] + c1[i] * plane.u[1][f]);
        const float got = type == WeightType::kFloat32 ? w32[f * m + i] : HalfToFloat(w16[f * m + i]);
        EXPECT_EQ(got, type == WeightType::kFloat32 ? want : HalfToFloat(FloatToHalf(want)));
      }
    }
    double n0 = 0;
    for (int64_t f = 0; f < v; ++f) {
      const double x = type == WeightType::kFloat32 ? w32[f * m] : HalfToFloat(w16[f * m]);
      n0 += x * x;
    }
    EXPECT_FLOAT_EQ(norms[0], static_cast<float>(n0));
  }
}

}  // namespace
}  // namespace som
}  // namespace tessera

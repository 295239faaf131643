// CUDA PCA initialisation against the CPU reference on random sparse binary
// rows: the same plane (principal angles: both cosines >= 0.999, sign-free),
// each component |cos| >= 0.999 and its variance within 1e-9 relative (the
// backends run the same iteration and differ only in summation order), and
// the codebook fill bit for bit from the same inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "common/buffer.h"
#include "common/testing/gpu_test.h"
#include "kernels/som/bmu.h"
#include "kernels/som/pca.h"
#include "kernels/som/test_util.h"

namespace tessera {
namespace som {
namespace {

double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Cosines of the principal angles between span(a) and span(b) (orthonormal
// pairs): the singular values of the 2x2 matrix a^T b.
void PrincipalCosines(const PrincipalPlane& a, const PrincipalPlane& b, double* c_max, double* c_min) {
  const double m00 = Dot(a.u[0], b.u[0]), m01 = Dot(a.u[0], b.u[1]);
  const double m10 = Dot(a.u[1], b.u[0]), m11 = Dot(a.u[1], b.u[1]);
  // Singular values of [[m00, m01], [m10, m11]].
  const double s = m00 * m00 + m01 * m01 + m10 * m10 + m11 * m11;
  const double det = std::abs(m00 * m11 - m01 * m10);
  const double root = std::sqrt(std::max(0.0, s * s / 4 - det * det));
  *c_max = std::sqrt(s / 2 + root);
  *c_min = std::sqrt(std::max(0.0, s / 2 - root));
}

template <typename T>
std::shared_ptr<Buffer> ToDevice(const std::vector<T>& host, const Stream& stream) {
  auto b = UploadVector(host, stream);
  EXPECT_TRUE(b.ok()) << b.status();
  return *b;
}

TEST(PcaCuda, SamePlaneAsCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok()) << stream.status();
  struct Case {
    int64_t rows, cols;
    int max_nnz, iterations;
    uint32_t seed;
  };
  for (const Case& c : {Case{3000, 500, 20, 40, 1}, Case{20000, 3000, 30, 40, 2}, Case{5000, 1200, 12, 5, 3},
                        Case{777, 64, 9, 200, 4}}) {
    SCOPED_TRACE(::testing::Message() << c.rows << "x" << c.cols << " it " << c.iterations);
    std::mt19937 rng(c.seed);
    const testutil::HostDocs docs = testutil::RandomDocs(c.rows, c.cols, c.max_nnz, rng);
    PcaOptions o;
    o.iterations = c.iterations;
    o.seed = c.seed + 100;
    auto cpu = LeadingComponents(Stream::Cpu(), docs.view(), o);
    auto gpu = LeadingComponents(*stream, docs.view(), o);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    double c_max = 0, c_min = 0;
    PrincipalCosines(*cpu, *gpu, &c_max, &c_min);
    const double cos0 = std::abs(Dot(cpu->u[0], gpu->u[0])), cos1 = std::abs(Dot(cpu->u[1], gpu->u[1]));
    std::printf("  %lldx%lld: principal cosines %.12f %.12f, component |cos| %.12f %.12f, lambda %.6g/%.6g\n",
                static_cast<long long>(c.rows), static_cast<long long>(c.cols), c_max, c_min, cos0, cos1,
                cpu->lambda[0], cpu->lambda[1]);
    EXPECT_GE(c_min, 0.999);
    EXPECT_GE(cos0, 0.999);
    EXPECT_GE(cos1, 0.999);
    for (int k = 0; k < 2; ++k) EXPECT_NEAR(gpu->lambda[k], cpu->lambda[k], 1e-9 * cpu->lambda[0]);
    ASSERT_GT(cpu->lambda[0], 0);
  }
}

TEST(PcaCuda, FillIsBitIdenticalToCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const GridShape grid{37, 23, Topology::kPlanar};
  const int64_t m = grid.nodes(), v = 301;
  std::mt19937 rng(8);
  std::uniform_real_distribution<double> u(-1, 1);
  PrincipalPlane plane;
  std::vector<double> mean(v);
  for (double& e : mean) e = 0.3 + 0.3 * u(rng);
  for (auto& vec : plane.u) {
    vec.resize(v);
    for (double& e : vec) e = 0.2 * u(rng);
  }
  plane.lambda[0] = 1.7;
  plane.lambda[1] = 0.6;
  std::vector<double> c0, c1;
  PcaNodeCoefficients(grid, plane, &c0, &c1);
  auto d_mean = ToDevice(mean, *stream), d_u0 = ToDevice(plane.u[0], *stream), d_u1 = ToDevice(plane.u[1], *stream);
  auto d_c0 = ToDevice(c0, *stream), d_c1 = ToDevice(c1, *stream);
  for (WeightType type : {WeightType::kFloat32, WeightType::kFloat16}) {
    SCOPED_TRACE(WeightTypeName(type));
    const size_t bytes = static_cast<size_t>(WeightBytes(type)) * v * m;
    std::vector<uint8_t> host_w(bytes), gpu_w(bytes, 0xff);
    std::vector<float> host_n(m), gpu_n(m, -1.0f);
    CodebookView cb;
    cb.nodes = m;
    cb.features = v;
    cb.type = type;
    cb.weights = host_w.data();
    cb.sq_norms = host_n.data();
    ASSERT_TRUE(FillPcaCodebook(Stream::Cpu(), cb,
                                {mean.data(), plane.u[0].data(), plane.u[1].data(), c0.data(), c1.data()})
                    .ok());
    auto d_w = Buffer::Allocate(MemoryKind::kDevice, bytes);
    auto d_n = Buffer::Allocate(MemoryKind::kDevice, 4 * m);
    ASSERT_TRUE(d_w.ok() && d_n.ok());
    CodebookView dcb = cb;
    dcb.weights = (*d_w)->data();
    dcb.sq_norms = static_cast<float*>((*d_n)->data());
    const PcaFillInputs in{static_cast<double*>(d_mean->data()), static_cast<double*>(d_u0->data()),
                           static_cast<double*>(d_u1->data()), static_cast<double*>(d_c0->data()),
                           static_cast<double*>(d_c1->data())};
    ASSERT_TRUE(FillPcaCodebook(*stream, dcb, in).ok());
    ASSERT_TRUE(CopyBytes(gpu_w.data(), MemoryKind::kHost, dcb.weights, MemoryKind::kDevice, bytes, *stream).ok());
    ASSERT_TRUE(CopyBytes(gpu_n.data(), MemoryKind::kHost, dcb.sq_norms, MemoryKind::kDevice, 4 * m, *stream).ok());
    ASSERT_TRUE(stream->Synchronize().ok());
    EXPECT_TRUE(gpu_w == host_w) << "weights differ";
    EXPECT_TRUE(gpu_n == host_n) << "norms differ";
  }
}

}  // namespace
}  // namespace som
}  // namespace tessera

// CPU Toeplitz operator against the NUFFT pair type1(W type2(f)) and the
// exact NUDFT pair: rel l2 <= 10 x tolerance; both signs; argument checks.
#include "kernels/reconstruction/nufft/toeplitz.h"

#include <gtest/gtest.h>

#include <random>

#include "kernels/reconstruction/nufft/nufft.h"
#include "kernels/reconstruction/nufft/nufft_test_util.h"

namespace tessera {
namespace recon {
namespace nufft {
namespace {

using testing::PointSet;
using testing::RandomComplex;
using testing::RelL2;

template <typename T>
std::vector<T> RandomWeights(int64_t m, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.2, 2.0);
  std::vector<T> w(m);
  for (auto& v : w) v = static_cast<T>(u(rng));
  return w;
}

struct Errors {
  double vs_nufft = 1e9;
  double vs_nudft = 1e9;
};

template <typename T>
Errors Check(int dim, double tol, int sign, bool weighted) {
  const std::array<int64_t, 3> modes = dim == 2 ? std::array<int64_t, 3>{20, 16, 1} : std::array<int64_t, 3>{8, 10, 6};
  const int64_t m = 500, nmodes = modes[0] * modes[1] * modes[2];
  const int nt = 2;
  const PointSet<T> pts = testing::RandomPoints<T>(dim, m, 21);
  const std::vector<T> w = weighted ? RandomWeights<T>(m, 22) : std::vector<T>(m, T(1));
  const auto f = RandomComplex<T>(nmodes * nt, 23);
  const Stream cpu = Stream::Cpu();
  ToeplitzOptions o;
  o.tolerance = tol;
  o.sign = sign;
  o.ntransforms = nt;
  auto op = ToeplitzOperator<T>::Create(cpu, modes, m, pts.x.data(), pts.y.data(), pts.zp(),
                                        weighted ? w.data() : nullptr, o);
  EXPECT_TRUE(op.ok()) << op.status();
  if (!op.ok()) return {};
  std::vector<std::complex<T>> out(nmodes * nt);
  EXPECT_TRUE((*op)->Apply(f.data(), out.data()).ok());

  // The NUFFT pair at the same tolerance.
  NufftOptions no;
  no.tolerance = tol;
  no.ntransforms = nt;
  no.sign = sign;
  auto t2 = NufftPlan<T>::Create(cpu, NufftType::kType2, modes, no);
  no.sign = -sign;
  auto t1 = NufftPlan<T>::Create(cpu, NufftType::kType1, modes, no);
  EXPECT_TRUE(t1.ok() && t2.ok());
  EXPECT_TRUE((*t2)->SetPoints(m, pts.x.data(), pts.y.data(), pts.zp()).ok());
  EXPECT_TRUE((*t1)->SetPoints(m, pts.x.data(), pts.y.data(), pts.zp()).ok());
  std::vector<std::complex<T>> c(m * nt), pair(nmodes * nt);
  std::vector<std::complex<T>> fin = f;
  EXPECT_TRUE((*t2)->Execute(c.data(), fin.data()).ok());
  for (int64_t i = 0; i < m * nt; ++i) c[i] *= w[i % m];
  EXPECT_TRUE((*t1)->Execute(c.data(), pair.data()).ok());

  // The exact pair.
  auto ce = testing::ReferenceNudft(NufftType::kType2, modes, pts, sign, nt, testing::ToDouble(f));
  for (int64_t i = 0; i < m * nt; ++i) ce[i] *= static_cast<double>(w[i % m]);
  const auto exact = testing::ReferenceNudft(NufftType::kType1, modes, pts, -sign, nt, ce);
  return {RelL2(out, pair), RelL2(out, exact)};
}

TEST(ToeplitzTest, MatchesNufftPairAndExactPair) {
  for (int dim : {2, 3}) {
    for (int sign : {-1, 1}) {
      for (bool weighted : {true, false}) {
        const std::string what = "dim " + std::to_string(dim) + " sign " + std::to_string(sign) +
                                 (weighted ? " weighted" : " unweighted");
        const Errors f = Check<float>(dim, 1e-5, sign, weighted);
        EXPECT_LE(f.vs_nufft, 1e-4) << what;
        EXPECT_LE(f.vs_nudft, 1e-4) << what;
        const Errors d = Check<double>(dim, 1e-9, sign, weighted);
        EXPECT_LE(d.vs_nufft, 1e-8) << what;
        EXPECT_LE(d.vs_nudft, 1e-8) << what;
      }
    }
  }
}

TEST(ToeplitzTest, BadArgumentsNameTheField) {
  const Stream cpu = Stream::Cpu();
  std::vector<float> x = {0.1f, 0.2f}, y = {0.3f, 0.4f}, w = {1.f, NAN};
  auto bad_w = ToeplitzOperator<float>::Create(cpu, {8, 8, 1}, 2, x.data(), y.data(), nullptr, w.data());
  EXPECT_EQ(bad_w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_w.status().message().find("weights[1]"), std::string::npos) << bad_w.status();
  ToeplitzOptions o;
  o.sign = 0;
  auto bad_sign = ToeplitzOperator<float>::Create(cpu, {8, 8, 1}, 2, x.data(), y.data(), nullptr, nullptr, o);
  EXPECT_NE(bad_sign.status().message().find("sign"), std::string::npos) << bad_sign.status();
  auto bad_modes = ToeplitzOperator<float>::Create(cpu, {8, 1, 1}, 2, x.data(), y.data(), nullptr, nullptr);
  EXPECT_NE(bad_modes.status().message().find("modes[1]"), std::string::npos) << bad_modes.status();
  o = ToeplitzOptions();
  o.tolerance = 2;
  auto bad_tol = ToeplitzOperator<float>::Create(cpu, {8, 8, 1}, 2, x.data(), y.data(), nullptr, nullptr, o);
  EXPECT_NE(bad_tol.status().message().find("tolerance"), std::string::npos) << bad_tol.status();
  x[0] = INFINITY;
  auto bad_x = ToeplitzOperator<float>::Create(cpu, {8, 8, 1}, 2, x.data(), y.data(), nullptr, nullptr);
  EXPECT_NE(bad_x.status().message().find("x[0]"), std::string::npos) << bad_x.status();
}

}  // namespace
}  // namespace nufft
}  // namespace recon
}  // namespace tessera

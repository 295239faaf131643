// Reference batched Cholesky solves: each system copied to double, factored
// (L L^H, lower), then forward and back substitution per right-hand side.
// Systems in parallel.
#include <cmath>
#include <complex>
#include <type_traits>
#include <vector>

#include "common/parallel.h"
#include "kernels/reconstruction/linalg/batched_cholesky.h"

namespace tessera {
namespace recon {
namespace linalg {
namespace cpu {
namespace {

double Conj(double v) { return v; }
std::complex<double> Conj(std::complex<double> v) { return std::conj(v); }
double Real(double v) { return v; }
double Real(std::complex<double> v) { return v.real(); }

template <typename F, typename D>
void Solve(const BatchedSolveShape& shape, float lambda, const F* a, const F* b, F* x, int* info) {
  const int n = shape.n, nrhs = shape.nrhs;
  ParallelFor(
      shape.batch,
      [&](int64_t s0, int64_t s1, int) {
        std::vector<D> l(n * n), z(n);
        for (int64_t s = s0; s < s1; ++s) {
          const F* as = a + s * n * n;
          int fail = 0;
          // Column-oriented Cholesky on the lower triangle: l(r, c) = l[r + c n].
          for (int c = 0; c < n; ++c) {
            for (int r = c; r < n; ++r) l[r + c * n] = static_cast<D>(as[r + c * n]);
          }
          for (int j = 0; j < n && fail == 0; ++j) {
            double d = Real(l[j + j * n]) + lambda;
            for (int k = 0; k < j; ++k) d -= std::norm(std::complex<double>(l[j + k * n]));
            if (!(d > 0.0) || !std::isfinite(d)) {
              fail = j + 1;
              break;
            }
            const double ljj = std::sqrt(d);
            l[j + j * n] = ljj;
            for (int i = j + 1; i < n; ++i) {
              D v = l[i + j * n];
              for (int k = 0; k < j; ++k) v -= l[i + k * n] * Conj(l[j + k * n]);
              l[i + j * n] = v / ljj;
            }
          }
          info[s] = fail;
          for (int k = 0; k < nrhs; ++k) {
            const int64_t off = s * n * nrhs + static_cast<int64_t>(k) * n;
            if (fail != 0) {
              for (int i = 0; i < n; ++i) x[off + i] = F(0);
              continue;
            }
            for (int i = 0; i < n; ++i) {  // L z = b
              D v = static_cast<D>(b[off + i]);
              for (int m = 0; m < i; ++m) v -= l[i + m * n] * z[m];
              z[i] = v / Real(l[i + i * n]);
            }
            for (int i = n - 1; i >= 0; --i) {  // L^H x = z
              D v = z[i];
              for (int m = i + 1; m < n; ++m) v -= Conj(l[m + i * n]) * z[m];
              z[i] = v / Real(l[i + i * n]);
            }
            for (int i = 0; i < n; ++i) x[off + i] = static_cast<F>(z[i]);
          }
        }
      },
      /*min_per_chunk=*/64);
}

}  // namespace

void BatchedCholeskySolve(const BatchedSolveShape& shape, float lambda, const float* a, const float* b, float* x,
                          int* info) {
  Solve<float, double>(shape, lambda, a, b, x, info);
}

void BatchedCholeskySolve(const BatchedSolveShape& shape, float lambda, const std::complex<float>* a,
                          const std::complex<float>* b, std::complex<float>* x, int* info) {
  Solve<std::complex<float>, std::complex<double>>(shape, lambda, a, b, x, info);
}

}  // namespace cpu
}  // namespace linalg
}  // namespace recon
}  // namespace tessera

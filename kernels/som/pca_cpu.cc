// The CPU reference of the PCA initialisation (pca.h), also the CPU backend.
#include <algorithm>
#include <cmath>
#include <random>

#include "kernels/som/half.h"
#include "kernels/som/parallel.h"
#include "kernels/som/pca.h"

namespace tessera {
namespace som {

void PcaStartVectors(int64_t features, uint64_t seed, std::vector<double> u[2]) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  for (int k = 0; k < 2; ++k) {
    u[k].resize(features);
    for (double& e : u[k]) e = normal(rng);
  }
}

void Orthonormalize(std::vector<double> u[2]) {
  const size_t n = u[0].size();
  for (int k = 0; k < 2; ++k) {
    for (int j = 0; j < k; ++j) {
      double dot = 0;
      for (size_t v = 0; v < n; ++v) dot += u[k][v] * u[j][v];
      for (size_t v = 0; v < n; ++v) u[k][v] -= dot * u[j][v];
    }
    double norm = 0;
    for (double e : u[k]) norm += e * e;
    norm = std::sqrt(norm);
    if (norm == 0) norm = 1;
    for (double& e : u[k]) e /= norm;
  }
}

void CanonicalizeSigns(PrincipalPlane* plane) {
  for (std::vector<double>& u : plane->u) {
    size_t at = 0;
    for (size_t v = 1; v < u.size(); ++v) {
      if (std::abs(u[v]) > std::abs(u[at])) at = v;
    }
    if (!u.empty() && u[at] < 0) {
      for (double& e : u) e = -e;
    }
  }
}

void PcaNodeCoefficients(const GridShape& grid, const PrincipalPlane& plane, std::vector<double>* c0,
                         std::vector<double>* c1) {
  const int64_t m = grid.nodes();
  const int w_cells = grid.width, h_cells = grid.height;
  const bool first_along_x = w_cells >= h_cells;
  auto coord = [](int k, int n) { return n > 1 ? -1.0 + 2.0 * k / (n - 1) : 0.0; };
  const double s0 = std::sqrt(plane.lambda[0]), s1 = std::sqrt(plane.lambda[1]);
  c0->resize(m);
  c1->resize(m);
  for (int64_t i = 0; i < m; ++i) {
    const double a = coord(static_cast<int>(i % w_cells), w_cells);
    const double b = coord(static_cast<int>(i / w_cells), h_cells);
    (*c0)[i] = (first_along_x ? a : b) * s0;
    (*c1)[i] = (first_along_x ? b : a) * s1;
  }
}

namespace cpu {

PrincipalPlane LeadingComponents(const CsrView& x, const PcaOptions& options) {
  const int64_t v_count = x.cols, n = x.rows;
  std::vector<double> mean(v_count, 0.0);
  for (int64_t k = 0; k < x.nnz(); ++k) mean[x.indices[k]] += 1.0;
  for (double& e : mean) e /= n;
  PrincipalPlane p;
  std::vector<double>* u = p.u;
  PcaStartVectors(v_count, options.seed, u);
  Orthonormalize(u);
  std::vector<double> y(2 * n), z[2] = {std::vector<double>(v_count), std::vector<double>(v_count)};
  for (int it = 0; it < std::max(1, options.iterations); ++it) {
    // z = C u = X^T (X u) / n - mean (mean . u)
    for (int64_t d = 0; d < n; ++d) {
      double a = 0, b = 0;
      for (int64_t k = x.offsets[d]; k < x.offsets[d + 1]; ++k) {
        a += u[0][x.indices[k]];
        b += u[1][x.indices[k]];
      }
      y[2 * d] = a;
      y[2 * d + 1] = b;
    }
    for (int k = 0; k < 2; ++k) std::fill(z[k].begin(), z[k].end(), 0.0);
    for (int64_t d = 0; d < n; ++d) {
      for (int64_t k = x.offsets[d]; k < x.offsets[d + 1]; ++k) {
        z[0][x.indices[k]] += y[2 * d];
        z[1][x.indices[k]] += y[2 * d + 1];
      }
    }
    for (int k = 0; k < 2; ++k) {
      double mu = 0;
      for (int64_t v = 0; v < v_count; ++v) mu += mean[v] * u[k][v];
      double rayleigh = 0;
      for (int64_t v = 0; v < v_count; ++v) {
        z[k][v] = z[k][v] / n - mean[v] * mu;
        rayleigh += z[k][v] * u[k][v];
      }
      p.lambda[k] = std::max(0.0, rayleigh);
    }
    u[0].swap(z[0]);
    u[1].swap(z[1]);
    Orthonormalize(u);
  }
  CanonicalizeSigns(&p);
  return p;
}

void FillPcaCodebook(const CodebookView& cb, const PcaFillInputs& in) {
  const int64_t m = cb.nodes;
  const bool fp32 = cb.type == WeightType::kFloat32;
  // Feature-outer so each thread writes whole contiguous columns (node-outer
  // strided writes took seconds on 30K features x 4K nodes).
  ParallelFor(cb.features, [&](int64_t v0, int64_t v1, int) {
    for (int64_t v = v0; v < v1; ++v) {
      for (int64_t i = 0; i < m; ++i) {
        const float w = static_cast<float>(in.mean[v] + in.c0[i] * in.u0[v] + in.c1[i] * in.u1[v]);
        if (fp32) {
          static_cast<float*>(cb.weights)[v * m + i] = w;
        } else {
          static_cast<uint16_t*>(cb.weights)[v * m + i] = FloatToHalf(w);
        }
      }
    }
  });
}

}  // namespace cpu
}  // namespace som
}  // namespace tessera

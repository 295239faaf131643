#include "kernels/som/quality.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "kernels/som/parallel.h"

namespace tessera {
namespace som {

QualityMetrics ComputeQuality(const int64_t* offsets, int64_t docs, const int32_t* bmu, const int32_t* second,
                              const float* score, const float* sq_norms, const GridShape& grid,
                              Adjacency adjacency) {
  QualityMetrics q;
  q.docs = docs;
  const int64_t m = grid.nodes();
  std::vector<double> parts(3 * CpuThreads(), 0.0);  // per chunk: euclid, cosine, topo errors
  const int chunks = ParallelFor(docs, [&](int64_t d0, int64_t d1, int chunk) {
    double e = 0, c = 0, t = 0;
    for (int64_t d = d0; d < d1; ++d) {
      const double nnz = static_cast<double>(offsets[d + 1] - offsets[d]);
      const double s = score[d];
      const double norm = sq_norms[bmu[d]];
      e += std::sqrt(std::max(0.0, nnz + s));
      const double denom = std::sqrt(nnz) * std::sqrt(std::max(0.0, norm));
      c += denom > 0 ? 1.0 - (norm - s) / 2.0 / denom : 1.0;
      if (second != nullptr && second[d] >= 0 && !AreNeighbours(bmu[d], second[d], grid, adjacency)) t += 1;
    }
    parts[3 * chunk] = e;
    parts[3 * chunk + 1] = c;
    parts[3 * chunk + 2] = t;
  });
  double e = 0, c = 0, t = 0;
  for (int k = 0; k < chunks; ++k) {
    e += parts[3 * k];
    c += parts[3 * k + 1];
    t += parts[3 * k + 2];
  }
  if (docs > 0) {
    q.qe_euclidean = e / docs;
    q.qe_cosine = c / docs;
    q.topographic_error = t / docs;
  }
  std::vector<char> hit(m, 0);
  for (int64_t d = 0; d < docs; ++d) hit[bmu[d]] = 1;
  q.dead_units = m - std::count(hit.begin(), hit.end(), 1);
  q.dead_unit_fraction = m > 0 ? static_cast<double>(q.dead_units) / m : 0.0;
  return q;
}

}  // namespace som
}  // namespace tessera

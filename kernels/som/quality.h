// SOM quality measures from BMU search results (host arrays):
//   QE (Euclidean)  mean ||x - w_bmu|| over documents
//   QE (cosine)     mean 1 - cos(x, w_bmu) (1 for an empty document or a zero
//                   prototype)
//   topographic error  fraction of documents whose BMU and second-best unit
//                   are not neighbours on the grid; neighbours are the 4 cells
//                   sharing an edge by default (Adjacency::kEight adds the
//                   diagonals); toroidal grids wrap. A one-node map has no
//                   second unit and no topographic error.
//   dead units      nodes that are no document's BMU, as a count and fraction.
// Distances come from the BMU score (bmu.h): ||x - w||^2 = nnz(x) + score and
// x.w = (||w||^2 - score) / 2, so no codebook access is needed and the same
// code serves both backends (fp32 rounding of the score, ~1e-6 relative).
#ifndef TESSERA_KERNELS_SOM_QUALITY_H_
#define TESSERA_KERNELS_SOM_QUALITY_H_

#include <cstdint>

#include "kernels/som/types.h"

namespace tessera {
namespace som {

enum class Adjacency { kFour, kEight };

struct QualityMetrics {
  int64_t docs = 0;
  double qe_euclidean = 0;
  double qe_cosine = 0;
  double topographic_error = 0;
  int64_t dead_units = 0;
  double dead_unit_fraction = 0;
};

// True when nodes a and b are distinct grid neighbours (host and device: the
// CUDA quality pass, quality_device.h, uses the same rule).
TESSERA_SOM_HD inline bool AreNeighbours(int32_t a, int32_t b, const GridShape& grid, Adjacency adjacency) {
  if (a == b || a < 0 || b < 0) return false;
  const int64_t w = grid.width, h = grid.height;
  int64_t dx = static_cast<int64_t>(a % w) - b % w;
  int64_t dy = static_cast<int64_t>(a / w) - b / w;
  dx = dx < 0 ? -dx : dx;
  dy = dy < 0 ? -dy : dy;
  if (grid.topology == Topology::kToroidal) {
    dx = w - dx < dx ? w - dx : dx;
    dy = h - dy < dy ? h - dy : dy;
  }
  return adjacency == Adjacency::kFour ? dx + dy == 1 : (dx > dy ? dx : dy) == 1;
}

// offsets: the documents' CSR row offsets (docs + 1); second may be null (then
// topographic_error is 0); sq_norms: the codebook's ||w||^2 (grid.nodes()).
QualityMetrics ComputeQuality(const int64_t* offsets, int64_t docs, const int32_t* bmu, const int32_t* second,
                              const float* score, const float* sq_norms, const GridShape& grid,
                              Adjacency adjacency = Adjacency::kFour);

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_KERNELS_SOM_QUALITY_H_

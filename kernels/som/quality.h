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

// True when nodes a and b are distinct grid neighbours.
bool AreNeighbours(int32_t a, int32_t b, const GridShape& grid, Adjacency adjacency);

// offsets: the documents' CSR row offsets (docs + 1); second may be null (then
// topographic_error is 0); sq_norms: the codebook's ||w||^2 (grid.nodes()).
QualityMetrics ComputeQuality(const int64_t* offsets, int64_t docs, const int32_t* bmu, const int32_t* second,
                              const float* score, const float* sq_norms, const GridShape& grid,
                              Adjacency adjacency = Adjacency::kFour);

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_KERNELS_SOM_QUALITY_H_

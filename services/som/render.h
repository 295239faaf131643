// Pictures of a SOM atlas, as PNG-ready RGB images:
//   U-matrix        each node's mean Euclidean distance to its 4 grid
//                   neighbours (fewer at the edges of a planar map; toroidal
//                   maps wrap), high values are borders between clusters;
//   hit map         documents per node, on a log scale (log(1 + hits));
//   component plane one feature's weight at every node.
// Each node becomes a cell_pixels x cell_pixels square, node (x, y) at pixel
// (x * cell_pixels, y * cell_pixels), top row first. Values are scaled
// linearly from their minimum (or 0 for the hit map) to their maximum onto
// viridis (dark purple = low, yellow = high); a constant map is drawn at the
// bottom of the scale. A colour bar (low at the bottom) can be appended to the
// right.
#ifndef TESSERA_SERVICES_SOM_RENDER_H_
#define TESSERA_SERVICES_SOM_RENDER_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/png_io.h"
#include "services/som/atlas.h"

namespace tessera {
namespace som {

// Viridis at t in [0, 1] (clamped): matplotlib's table sampled at 9 points,
// linearly interpolated.
std::array<uint8_t, 3> Viridis(double t);

// Per-node values (grid.nodes() entries, node i at (i % width, i / width)).
std::vector<double> UMatrix(const SomModel& model);
std::vector<double> ComponentPlane(const SomModel& model, int64_t feature);

struct RenderOptions {
  int cell_pixels = 8;       // 1..256
  bool colour_bar = false;   // a vertical scale to the right of the map
};

// Draws `values` (one per node) with viridis, scaled from `low` to the
// maximum. INVALID_ARGUMENT for a size mismatch or bad options.
absl::StatusOr<Image8> RenderNodeValues(const std::vector<double>& values, const GridShape& grid, double low,
                                        const RenderOptions& options);

absl::StatusOr<Image8> RenderUMatrix(const Atlas& atlas, const RenderOptions& options = RenderOptions());
absl::StatusOr<Image8> RenderHitMap(const Atlas& atlas, const RenderOptions& options = RenderOptions());
absl::StatusOr<Image8> RenderComponentPlane(const Atlas& atlas, int64_t feature,
                                            const RenderOptions& options = RenderOptions());

// A feature by name: the exact name, else the name's first word (e.g. the GO
// id of "GO:0005634 nucleus"), else "f<index>" or a bare index. NOT_FOUND
// otherwise, INVALID_ARGUMENT when a first word matches several features.
absl::StatusOr<int64_t> FindFeature(const Atlas& atlas, absl::string_view name);

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_SERVICES_SOM_RENDER_H_

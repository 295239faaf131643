// The validated, precomputed form of a CT geometry for the distance-driven
// projector: the shape and one DdView per projection.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_CT_DD_SYSTEM_H_
#define TESSERA_KERNELS_RECONSTRUCTION_CT_DD_SYSTEM_H_

#include <vector>

#include "absl/status/statusor.h"
#include "kernels/reconstruction/ct/dd_view.h"
#include "kernels/reconstruction/geometry.h"

namespace tessera {
namespace recon {
namespace ct {

struct DdSystem {
  DdShape shape;
  std::vector<DdView> views;
  // TableStride(cols) floats per view (ColumnTable; filled for views with
  // row_coupled == 0, zero otherwise).
  std::vector<float> tables;
  // BackTableStride(cols, is_2d) floats per view: BackTable for views with
  // row_coupled == 0, the float maps of CoupledSlab (dd_back_gather.h) for
  // the others.
  std::vector<float> back_tables;
  bool any_row_coupled = false;
};

// Validate(geometry), then the projector's own conditions, each an
// INVALID_ARGUMENT naming the view ("proj_geom.Vectors row 7: ..."):
//   - the central ray runs mainly along x or y (not z);
//   - fan/cone sources lie outside the volume's extent along the slab axis;
//   - every ray reaching the detector's corners crosses the slabs at more
//     than 0.6 degrees (|e_a| >= 0.01 |e|) and on the central ray's side;
//   - the central cell's boundaries map to intervals of non-zero width.
absl::StatusOr<DdSystem> BuildDdSystem(const CtGeometry& geometry);

}  // namespace ct
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_CT_DD_SYSTEM_H_

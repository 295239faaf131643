// 2-D previews of volumes: one slice rendered as an 8-bit gray image with a
// robust intensity window, and several images tiled side by side (e.g.
// "fixed | moving | warped"). Pixels are not resampled: one voxel is one
// pixel, whatever the voxel spacing.
#ifndef TESSERA_COMMON_IMAGE_PREVIEW_H_
#define TESSERA_COMMON_IMAGE_PREVIEW_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/ndarray.h"
#include "common/png_io.h"
#include "common/volume.h"

namespace tessera {

// Intensities at or below `low` become 0, at or above `high` 255, linear in
// between. When high <= low every value above `low` is 255 (e.g. a mask).
struct Window {
  double low = 0;
  double high = 1;
};

struct SliceOptions {
  // For an NDArray: the index axis the slice is taken across (0 = i, 1 = j,
  // 2 = k). For a Volume: the anatomical plane, 0 = sagittal, 1 = coronal,
  // 2 = axial (the voxel axis nearest to that plane's normal is sliced).
  int axis = 2;
  // Slice index along the sliced voxel axis; -1 = the middle slice.
  int64_t index = -1;
  // Which component of an (nx, ny, nz, nc) array.
  int64_t component = 0;
  // The window: `window` when set, else these percentiles of the finite
  // values of the slice.
  std::optional<Window> window;
  double low_percentile = 1;
  double high_percentile = 99;
};

// The given percentiles (0..100) of the finite values of a host array (all of
// it, subsampled evenly beyond a few million elements). {0, 0} when there are
// no finite values. Use it to render several slices with one window.
absl::StatusOr<Window> ComputeWindow(const NDArray& array, double low_percentile = 1,
                                     double high_percentile = 99);

// Renders a slice of a host array of shape (nx, ny, nz) or (nx, ny, nz, nc) in
// index space: across i the columns are j and the rows k, across j columns i
// and rows k, across k columns i and rows j; the top row is the last index, so
// for a RAS-oriented array anterior/superior is up. Non-finite voxels are 0.
absl::StatusOr<Image8> RenderSlice(const NDArray& array, const SliceOptions& options = {});

// Renders an anatomical slice of a volume, whatever its voxel order (nearest
// axes, from Geometry::direction): superior (or anterior, for axial slices)
// is up, and patient right is on the image's right (neurological
// convention) in axial and coronal slices; sagittal slices have anterior on
// the right. Falls back to index space when two voxel axes point the same way.
absl::StatusOr<Image8> RenderSlice(const Volume& volume, const SliceOptions& options = {});

// Places images left to right, `gap` pixels apart, vertically centred on a
// `background` canvas. The result is RGB when any input is RGB (gray inputs
// are replicated into the three channels), else gray.
absl::StatusOr<Image8> TileHorizontally(const std::vector<Image8>& images, int gap = 4, uint8_t background = 0);

// A volume at a glance (issue 35's job previews): its sagittal | coronal |
// axial middle slices (RenderSlice of a Volume; component 0 of a vector
// volume) tiled left to right, all in one window (the 1st..99th percentile
// of the whole volume's finite values).
absl::StatusOr<Image8> OrthogonalMidSlices(const Volume& volume);

// `image` shrunk (area average) so that its longer edge is at most
// `max_edge` pixels, keeping the aspect ratio; a smaller image is returned
// as it is. INVALID_ARGUMENT when max_edge < 1.
absl::StatusOr<Image8> ShrinkToFit(const Image8& image, int max_edge);

}  // namespace tessera

#endif  // TESSERA_COMMON_IMAGE_PREVIEW_H_

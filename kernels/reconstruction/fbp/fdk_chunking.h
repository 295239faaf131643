// FBP/FDK within a device-memory budget (issue 36): how to stream the
// projections in chunks of views and, when the volume itself does not fit,
// split it into z-slabs, each reading only the detector rows its voxels
// project onto.
//
// A pure function of the geometry's sizes, the per-view back projection
// constants (fbp_math.h) and the budget, so it is unit-tested without a
// device. The memory model counts what the CUDA backend allocates (fbp.cu):
// the slab of the volume, per view and detector row of a chunk the FFT rows
// (in place, padded), cuFFT's work area (counted as large as the FFT rows),
// the filtered store (texture array or padded rows) and two upload slots
// (double buffering), plus the per-view constants, the redundancy weights
// and a fixed allowance for cuFFT plans and allocation rounding (CUDA).
//
// Slabs hold a multiple of kSlabPlaneMultiple planes (the CUDA back
// projection groups 8 voxels along z, so slab boundaries on a multiple of 8
// keep every sum as the resident volume's: bit-identical results). Every slab
// reads a window of the same height of detector rows (so one FFT plan and one
// texture array serve all); a window is clamped into the detector so its
// border behaves as the detector's.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_FBP_FDK_CHUNKING_H_
#define TESSERA_KERNELS_RECONSTRUCTION_FBP_FDK_CHUNKING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/reconstruction/fbp/fbp_math.h"

namespace tessera {
namespace recon {
namespace fbp {

constexpr int64_t kSlabPlaneMultiple = 8;
// cuFFT plans, texture object, alignment: not counted elsewhere.
constexpr int64_t kFixedAllowanceBytes = int64_t{64} << 20;

struct FdkChunkInput {
  int64_t nx = 0, ny = 0, nz = 0;
  int64_t views = 0;
  int64_t cols = 0;        // detector columns the filter works on (an offset detector's widened)
  int64_t input_cols = 0;  // columns of the sinogram as given
  int64_t rows = 0;        // detector rows
  int64_t padded = 0;      // FFT length (PaddedLength(cols))
  bool column_weights = false;  // redundancy weights stored per view and column
  bool texture = true;          // texture array (else the padded store)
  int64_t max_views_per_chunk = 0;  // the resident batch size: larger chunks gain nothing
  // cuFFT plans, texture object, allocation rounding (CUDA; 0 on the CPU).
  int64_t fixed_allowance_bytes = kFixedAllowanceBytes;
};

struct FdkSlab {
  int64_t k0 = 0, nz = 0;  // planes [k0, k0 + nz)
  int64_t row0 = 0;        // first detector row of its window (window_rows rows)
};

struct FdkChunking {
  int64_t views_per_chunk = 0;
  int64_t window_rows = 0;  // detector rows uploaded per view (all slabs)
  std::vector<FdkSlab> slabs;
  int64_t slab_planes = 0;  // planes of the largest slab
  int64_t device_bytes = 0; // the model's total for this plan (<= the budget)
  // "3 slabs of <= 344 planes, rows windows of 700 of 1536, 24 views per chunk, 19.2 GiB of 20 GiB".
  std::string Describe(const FdkChunkInput& in, int64_t budget_bytes) const;
};

// The model's device bytes for one slab of `slab_planes` planes and chunks
// of `views_per_chunk` views of `window_rows` rows.
int64_t FdkDeviceBytes(const FdkChunkInput& in, int64_t slab_planes, int64_t window_rows, int64_t views_per_chunk);

// Detector rows [first, last] (clamped to the detector; first > last when
// none) that views' bilinear samples read for voxel planes [k0, k1) of an
// nx x ny grid, with one row of margin each side for rounding. The row of a
// voxel is a linear-fractional function of its indices, so its extremes
// over the slab's box lie at the box's corners.
void SlabRowRange(const std::vector<BackprojectView>& views, int64_t nx, int64_t ny, int64_t k0, int64_t k1,
                  int64_t rows, int64_t* first, int64_t* last);

// The fewest slabs (each re-reads every view) whose chunks still hold
// min(8, max_views_per_chunk) views, with as many views per chunk as fit (up
// to max_views_per_chunk); failing that, the fewest slabs that fit one view
// per chunk. RESOURCE_EXHAUSTED naming the sizes when even a slab of
// kSlabPlaneMultiple planes and one view do not fit; INVALID_ARGUMENT for
// a non-positive budget or size.
absl::StatusOr<FdkChunking> PlanFdkChunks(const FdkChunkInput& in, const std::vector<BackprojectView>& views,
                                          int64_t budget_bytes);

}  // namespace fbp
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_FBP_FDK_CHUNKING_H_

// Grid parallel (FFDP's "GP"): a volume split along z into H slabs, one per
// rank, each held with `halo` extra slices borrowed from its neighbours on
// each side that has one, so window operations (Gaussian smoothing, LNCC
// windows, Jacobian differences) see the same neighbourhood as on the whole
// volume.
//
// Split: ranks own contiguous slices [z_begin, z_end); the first nz % H
// ranks own one slice more (37 slices over 4 ranks: 10, 9, 9, 9).
//
// A rank's local array is (nx, ny, halo_lo + own + halo_hi) for a volume, or
// planar (nx, ny, local_nz, C) for a C-component field (component c is the
// contiguous local volume at c * local voxels, as in kernels/registration).
// halo_lo = halo unless the rank is first (no slices below the volume), and
// halo_hi likewise: at the volume's own borders the kernels' border rules
// (clamp, zero padding, one-sided differences) apply unchanged, so a sharded
// result equals the unsharded one.
//
// HaloExchange fills the halo slices from the neighbours (two SendRecv
// shifts, one contiguous message per component and direction); it must run
// before every window operation, since such an operation leaves the halos
// stale. It needs every rank to own at least `halo` slices (one hop).
#ifndef TESSERA_KERNELS_PARALLEL_SLAB_H_
#define TESSERA_KERNELS_PARALLEL_SLAB_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "common/ndarray.h"
#include "kernels/parallel/communicator.h"
#include "kernels/registration/types.h"

namespace tessera {
namespace parallel {

using registration::Dims3;

// One rank's part of a z-split volume.
struct SlabLayout {
  Dims3 global;        // whole volume
  int rank = 0;
  int ranks = 1;
  int64_t z_begin = 0; // own slices [z_begin, z_end) in global indices
  int64_t z_end = 0;
  int64_t halo_lo = 0; // slices below z_begin held locally
  int64_t halo_hi = 0; // slices at and above z_end held locally
  // The widths every rank of the partition asked for (halo_lo/hi are these,
  // or 0 at the volume's ends): what a rank sends to each neighbour.
  int64_t width_below = 0;
  int64_t width_above = 0;

  int64_t slice() const { return global.nx * global.ny; }
  int64_t own_nz() const { return z_end - z_begin; }
  int64_t local_nz() const { return halo_lo + own_nz() + halo_hi; }
  Dims3 own_dims() const { return {global.nx, global.ny, own_nz()}; }
  Dims3 local_dims() const { return {global.nx, global.ny, local_nz()}; }
  int64_t own_voxels() const { return slice() * own_nz(); }
  int64_t local_voxels() const { return slice() * local_nz(); }
  // Offset (in voxels) of the first own voxel in a local volume/component.
  int64_t own_offset() const { return slice() * halo_lo; }
  // Global z of local slice 0.
  int64_t local_z0() const { return z_begin - halo_lo; }
  // Local array shape: (nx, ny, local_nz) for 1 component, else planar
  // (nx, ny, local_nz, components).
  Shape LocalShape(int components) const;
  std::string ToString() const;  // "rank 1/4: z [10, 19) + halo 3/3"
};

// The z-split of nz slices over `ranks` ranks.
class SlabPartition {
 public:
  // INVALID_ARGUMENT unless 1 <= ranks <= nz.
  static absl::StatusOr<SlabPartition> Make(int64_t nz, int ranks);

  int ranks() const { return ranks_; }
  int64_t nz() const { return nz_; }
  int64_t begin(int rank) const;
  int64_t end(int rank) const { return begin(rank + 1); }
  int64_t min_slices() const { return nz_ / ranks_; }
  // The rank owning global slice z (0 <= z < nz).
  int OwnerOf(int64_t z) const;

  // Layout of `rank` for a volume of `global` dims (global.nz == nz) with
  // `halo` slices on each inner side. INVALID_ARGUMENT when a rank owns fewer
  // than `halo` slices (halos come from the direct neighbour only).
  absl::StatusOr<SlabLayout> Layout(Dims3 global, int rank, int64_t halo) const;
  // Same, with different halo widths below and above (e.g. the ring sampler's
  // one overlap slice above).
  absl::StatusOr<SlabLayout> Layout(Dims3 global, int rank, int64_t halo_below, int64_t halo_above) const;

 private:
  SlabPartition(int64_t nz, int ranks) : nz_(nz), ranks_(ranks) {}
  int64_t nz_;
  int ranks_;
};

// Fills the halo slices of a local array (layout.LocalShape(components)
// elements of float, in `stream`'s backend memory) from the neighbours' own
// slices. Collective over the communicator (every rank calls it).
absl::Status HaloExchange(Communicator& comm, const SlabLayout& layout, float* local, int components,
                          const Stream& stream);
absl::Status HaloExchange(Communicator& comm, const SlabLayout& layout, NDArray& local, const Stream& stream);

// Copies this rank's own slices and halos out of a whole volume or planar
// field (host array, rank 3 or 4) into a new local array of `kind` (the
// set-up path of tests and of a single-host run; a multi-host run reads its
// slab from disk instead).
absl::StatusOr<NDArray> ExtractSlab(const NDArray& whole, const SlabLayout& layout, MemoryKind kind,
                                    const Stream& stream);

// Writes this rank's own slices of `local` into the matching slices of a
// whole host array (rank 3 or 4; other slices untouched): the gather of
// tests. Ranks write disjoint slices, so they may call it concurrently.
absl::Status InsertOwnSlices(const NDArray& local, const SlabLayout& layout, NDArray* whole, const Stream& stream);

}  // namespace parallel
}  // namespace tessera

#endif  // TESSERA_KERNELS_PARALLEL_SLAB_H_

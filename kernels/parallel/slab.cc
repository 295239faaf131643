#include "kernels/parallel/slab.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/memory_kind_for.h"
#include "common/status.h"

namespace tessera {
namespace parallel {
namespace {

// Components of a whole or local array whose first three extents are a volume.
absl::StatusOr<int> ComponentsOf(const NDArray& a, Dims3 dims, const char* what) {
  if (a.dtype() != DType::kFloat32) return absl::InvalidArgumentError(absl::StrCat(what, " must be float32"));
  if ((a.rank() != 3 && a.rank() != 4) || a.dim(0) != dims.nx || a.dim(1) != dims.ny || a.dim(2) != dims.nz) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has shape ", ShapeToString(a.shape()), ", expected ",
                                                   registration::DimsToString(dims), " (x C)"));
  }
  return a.rank() == 4 ? static_cast<int>(a.dim(3)) : 1;
}

}  // namespace

Shape SlabLayout::LocalShape(int components) const {
  if (components == 1) return {global.nx, global.ny, local_nz()};
  return {global.nx, global.ny, local_nz(), components};
}

std::string SlabLayout::ToString() const {
  return absl::StrCat("rank ", rank, "/", ranks, ": z [", z_begin, ", ", z_end, ") + halo ", halo_lo, "/", halo_hi);
}

absl::StatusOr<SlabPartition> SlabPartition::Make(int64_t nz, int ranks) {
  if (ranks < 1 || nz < ranks) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot split ", nz, " slices over ", ranks, " ranks (need 1 <= ranks <= slices)"));
  }
  return SlabPartition(nz, ranks);
}

int64_t SlabPartition::begin(int rank) const {
  const int64_t base = nz_ / ranks_, extra = nz_ % ranks_;
  return rank * base + std::min<int64_t>(rank, extra);
}

int SlabPartition::OwnerOf(int64_t z) const {
  const int64_t base = nz_ / ranks_, extra = nz_ % ranks_;
  const int64_t big = extra * (base + 1);  // slices owned by the larger slabs
  if (z < big) return static_cast<int>(z / (base + 1));
  return static_cast<int>(extra + (z - big) / base);
}

absl::StatusOr<SlabLayout> SlabPartition::Layout(Dims3 global, int rank, int64_t halo) const {
  return Layout(global, rank, halo, halo);
}

absl::StatusOr<SlabLayout> SlabPartition::Layout(Dims3 global, int rank, int64_t halo_below,
                                                 int64_t halo_above) const {
  if (global.nz != nz_) {
    return absl::InvalidArgumentError(
        absl::StrCat("volume ", registration::DimsToString(global), " has ", global.nz, " slices, partition ", nz_));
  }
  if (rank < 0 || rank >= ranks_) return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " outside ", ranks_));
  if (halo_below < 0 || halo_above < 0) return absl::InvalidArgumentError("halo widths must be >= 0");
  const int64_t widest = std::max(halo_below, halo_above);
  if (ranks_ > 1 && widest > min_slices()) {
    return absl::InvalidArgumentError(absl::StrCat("halo of ", widest, " slices exceeds the thinnest slab (", nz_,
                                                   " slices over ", ranks_, " ranks: ", min_slices(),
                                                   "); use fewer ranks or a smaller window"));
  }
  SlabLayout l;
  l.global = global;
  l.rank = rank;
  l.ranks = ranks_;
  l.z_begin = begin(rank);
  l.z_end = end(rank);
  l.width_below = halo_below;
  l.width_above = halo_above;
  l.halo_lo = rank > 0 ? halo_below : 0;
  l.halo_hi = rank + 1 < ranks_ ? halo_above : 0;
  return l;
}

absl::Status HaloExchange(Communicator& comm, const SlabLayout& layout, float* local, int components,
                          const Stream& stream) {
  if (comm.size() != layout.ranks || comm.rank() != layout.rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout of ", layout.ToString(), " used on ", comm.Describe()));
  }
  const int below = layout.rank > 0 ? layout.rank - 1 : kNoPeer;
  const int above = layout.rank + 1 < layout.ranks ? layout.rank + 1 : kNoPeer;
  const int64_t slice = layout.slice();
  const int64_t vox = layout.local_voxels();
  // Every rank was laid out with the same widths, so what I send up is my
  // upper neighbour's halo_lo (width_below) and what I send down my lower
  // neighbour's halo_hi (width_above).
  for (int c = 0; c < components; ++c) {
    float* base = local + c * vox;
    const int64_t own_lo = layout.halo_lo, own_hi = layout.halo_lo + layout.own_nz();
    // Upward shift: my top own slices fill the upper rank's lower halo.
    {
      const int64_t send_n = above != kNoPeer ? layout.width_below : 0;
      const int64_t recv_n = layout.halo_lo;
      TESSERA_RETURN_IF_ERROR(comm.SendRecv(base + (own_hi - send_n) * slice, send_n * slice * sizeof(float),
                                            send_n > 0 ? above : kNoPeer, base, recv_n * slice * sizeof(float),
                                            recv_n > 0 ? below : kNoPeer, stream));
    }
    // Downward shift: my bottom own slices fill the lower rank's upper halo.
    {
      const int64_t send_n = below != kNoPeer ? layout.width_above : 0;
      const int64_t recv_n = layout.halo_hi;
      TESSERA_RETURN_IF_ERROR(comm.SendRecv(base + own_lo * slice, send_n * slice * sizeof(float),
                                            send_n > 0 ? below : kNoPeer, base + own_hi * slice,
                                            recv_n * slice * sizeof(float), recv_n > 0 ? above : kNoPeer, stream));
    }
  }
  return absl::OkStatus();
}

absl::Status HaloExchange(Communicator& comm, const SlabLayout& layout, NDArray& local, const Stream& stream) {
  TESSERA_ASSIGN_OR_RETURN(int components, ComponentsOf(local, layout.local_dims(), "local array"));
  if (local.memory_kind() != MemoryKindFor(stream) &&
      !(local.memory_kind() == MemoryKind::kPinned && stream.backend() == Backend::kCpu)) {
    return absl::InvalidArgumentError("local array is not in the memory of the stream's backend");
  }
  return HaloExchange(comm, layout, local.data<float>(), components, stream);
}

absl::StatusOr<NDArray> ExtractSlab(const NDArray& whole, const SlabLayout& layout, MemoryKind kind,
                                    const Stream& stream) {
  TESSERA_ASSIGN_OR_RETURN(int components, ComponentsOf(whole, layout.global, "whole array"));
  if (whole.memory_kind() == MemoryKind::kDevice) return absl::InvalidArgumentError("whole array must be on the host");
  TESSERA_ASSIGN_OR_RETURN(NDArray local,
                           NDArray::Allocate(layout.LocalShape(components), DType::kFloat32, kind, stream.ordinal()));
  const int64_t slice = layout.slice();
  for (int c = 0; c < components; ++c) {
    const float* src = whole.data<float>() + c * layout.global.size() + layout.local_z0() * slice;
    float* dst = local.data<float>() + c * layout.local_voxels();
    TESSERA_RETURN_IF_ERROR(CopyBytes(dst, kind, src, MemoryKind::kHost, layout.local_voxels() * sizeof(float), stream));
  }
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return local;
}

absl::Status InsertOwnSlices(const NDArray& local, const SlabLayout& layout, NDArray* whole, const Stream& stream) {
  TESSERA_ASSIGN_OR_RETURN(int components, ComponentsOf(local, layout.local_dims(), "local array"));
  TESSERA_ASSIGN_OR_RETURN(int whole_components, ComponentsOf(*whole, layout.global, "whole array"));
  if (components != whole_components) {
    return absl::InvalidArgumentError(
        absl::StrCat("local array has ", components, " components, whole ", whole_components));
  }
  if (whole->memory_kind() == MemoryKind::kDevice) return absl::InvalidArgumentError("whole array must be on the host");
  const int64_t slice = layout.slice();
  for (int c = 0; c < components; ++c) {
    const float* src = local.data<float>() + c * layout.local_voxels() + layout.own_offset();
    float* dst = whole->data<float>() + c * layout.global.size() + layout.z_begin * slice;
    TESSERA_RETURN_IF_ERROR(
        CopyBytes(dst, MemoryKind::kHost, src, local.memory_kind(), layout.own_voxels() * sizeof(float), stream));
  }
  return stream.Synchronize();
}

}  // namespace parallel
}  // namespace tessera

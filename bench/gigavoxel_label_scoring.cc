#include "bench/gigavoxel_label_scoring.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status.h"

namespace tessera::registration {
namespace {

constexpr Mat4 kIdentity = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
constexpr int kUint8Labels = 256;

// uint8 and int32 maps are sampled in place; another integer type is copied
// as int32 into `storage` (only small 1 mm sources take this path).
absl::StatusOr<const Volume*> SampleableLabels(const Volume& labels, Volume& storage) {
  if (labels.data.rank() != 3) return absl::InvalidArgumentError("labels must be a 3-D volume");
  if (labels.data.dtype() == DType::kUInt8 || labels.data.dtype() == DType::kInt32) return &labels;
  storage.geometry = labels.geometry;
  TESSERA_ASSIGN_OR_RETURN(storage.data, labels.data.AsType(DType::kInt32));
  return &storage;
}

// INVALID_ARGUMENT unless every label fits the 256 counters (uint8 maps do).
absl::Status CheckUint8Labels(const Volume& labels, const char* what) {
  if (labels.data.dtype() == DType::kUInt8) return absl::OkStatus();
  const int32_t* p = labels.data.data<int32_t>();
  const auto [lo, hi] = std::minmax_element(p, p + labels.data.num_elements());
  if (labels.data.num_elements() > 0 && (*lo < 0 || *hi >= kUint8Labels)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has label ", *lo < 0 ? *lo : *hi,
                                                   " outside 0..255 (the scoring keeps labels as uint8)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<NearestLabelSampler> NearestLabelSampler::Make(const Volume& labels, const GridSpace& out,
                                                              const Mat4& affine_ras, const NDArray* v) {
  if (labels.data.rank() != 3 || (labels.data.dtype() != DType::kUInt8 && labels.data.dtype() != DType::kInt32)) {
    return absl::InvalidArgumentError("labels must be a 3-D uint8 or int32 volume");
  }
  const GridSpace label_space = SpaceOf(labels);
  NearestLabelSampler s;
  const double whole_lo[3] = {-1, -1, -1}, whole_hi[3] = {1, 1, 1};  // the whole grid, as WarpLabels samples it
  s.geometry_ = MakeSamplerGeometry<float>(Dims3{out.dims[0], out.dims[1], out.dims[2]},
                                           Dims3{labels.data.dim(0), labels.data.dim(1), labels.data.dim(2)},
                                           whole_lo, whole_hi, Padding::kZeros);
  TESSERA_ASSIGN_OR_RETURN(Affine12 a, SamplerAffineFromPhysical(affine_ras, out, label_space));
  for (int i = 0; i < 12; ++i) s.affine_[i] = static_cast<float>(a[i]);
  s.out_voxels_ = out.dims[0] * out.dims[1] * out.dims[2];
  if (v != nullptr && !v->empty()) {
    if (v->rank() != 4 || v->dtype() != DType::kFloat32 || v->dim(0) != out.dims[0] || v->dim(1) != out.dims[1] ||
        v->dim(2) != out.dims[2] || v->dim(3) != 3) {
      return absl::InvalidArgumentError("displacement_ras must be float32 (nx, ny, nz, 3) on the output grid");
    }
    TESSERA_ASSIGN_OR_RETURN(s.l_, PhysicalToNormalizedDisplacement(affine_ras, label_space));
    s.v_ = v->data<float>();
  }
  if (labels.data.dtype() == DType::kUInt8) {
    s.u8_ = labels.data.data<uint8_t>();
  } else {
    s.i32_ = labels.data.data<int32_t>();
  }
  return s;
}

int32_t NearestLabelSampler::At(int64_t i, int64_t j, int64_t k) const {
  // The operations of cpu::GridSampleNearest on WarpLabels' inputs, in order.
  float x[3], ix[3];
  OutputCoord(geometry_, i, j, k, x);
  float u[3];
  const float* up = nullptr;
  if (v_ != nullptr) {
    const int64_t n = out_voxels_, at = geometry_.out_dims.index(i, j, k);
    for (int r = 0; r < 3; ++r) {  // WarpLabels' u = L v, rounded to float once
      u[r] = static_cast<float>(l_[r * 3] * v_[at] + l_[r * 3 + 1] * v_[n + at] + l_[r * 3 + 2] * v_[2 * n + at]);
    }
    up = u;
  }
  SamplePosition(geometry_, affine_, x, up, ix);
  const Dims3 id = geometry_.in_dims;
  const int64_t m[3] = {id.nx, id.ny, id.nz};
  int64_t idx[3];
  for (int c = 0; c < 3; ++c) {
    const float r = RoundEvenT(ix[c]);
    if (!(r >= 0.0f && r <= static_cast<float>(m[c] - 1))) return 0;
    idx[c] = static_cast<int64_t>(r);
  }
  const int64_t at = id.index(idx[0], idx[1], idx[2]);
  return u8_ != nullptr ? u8_[at] : i32_[at];
}

absl::StatusOr<NDArray> ResampleLabelsUint8(const Volume& source, const GridSpace& grid) {
  Volume storage;
  TESSERA_ASSIGN_OR_RETURN(const Volume* labels, SampleableLabels(source, storage));
  TESSERA_RETURN_IF_ERROR(CheckUint8Labels(*labels, "the label map"));
  TESSERA_ASSIGN_OR_RETURN(NearestLabelSampler sampler, NearestLabelSampler::Make(*labels, grid, kIdentity, nullptr));
  const int64_t nx = grid.dims[0], ny = grid.dims[1], nz = grid.dims[2];
  TESSERA_ASSIGN_OR_RETURN(NDArray out, NDArray::Allocate({nx, ny, nz}, DType::kUInt8));
  uint8_t* p = out.data<uint8_t>();
  ParallelFor(nz, [&](int64_t k0, int64_t k1, int) {
    for (int64_t k = k0; k < k1; ++k) {
      for (int64_t j = 0; j < ny; ++j) {
        for (int64_t i = 0; i < nx; ++i) p[i + nx * (j + ny * k)] = static_cast<uint8_t>(sampler.At(i, j, k));
      }
    }
  });
  return out;
}

absl::StatusOr<LabelScores> ScoreLabelsBySlab(const Volume& source_fixed_labels, const Volume& moving_labels,
                                              const GridSpace& fixed_grid, const Mat4& affine_ras,
                                              const NDArray* displacement_ras) {
  Volume fixed_storage, moving_storage;
  TESSERA_ASSIGN_OR_RETURN(const Volume* fixed_src, SampleableLabels(source_fixed_labels, fixed_storage));
  TESSERA_ASSIGN_OR_RETURN(const Volume* moving, SampleableLabels(moving_labels, moving_storage));
  TESSERA_RETURN_IF_ERROR(CheckUint8Labels(*fixed_src, "the fixed label map"));
  TESSERA_RETURN_IF_ERROR(CheckUint8Labels(*moving, "the moving label map"));
  TESSERA_ASSIGN_OR_RETURN(NearestLabelSampler fixed_sampler,
                           NearestLabelSampler::Make(*fixed_src, fixed_grid, kIdentity, nullptr));
  TESSERA_ASSIGN_OR_RETURN(NearestLabelSampler before_sampler,
                           NearestLabelSampler::Make(*moving, fixed_grid, kIdentity, nullptr));
  TESSERA_ASSIGN_OR_RETURN(NearestLabelSampler after_sampler,
                           NearestLabelSampler::Make(*moving, fixed_grid, affine_ras, displacement_ras));
  const int64_t nx = fixed_grid.dims[0], ny = fixed_grid.dims[1], nz = fixed_grid.dims[2];
  // One z-slab per worker, each with its own counters (3 x 256 x 8 B x 2).
  std::vector<LabelOverlapCounts> before(ParallelChunks(nz)), after(before.size());
  ParallelFor(nz, [&](int64_t k0, int64_t k1, int chunk) {
    LabelOverlapCounts& b = before[chunk];
    LabelOverlapCounts& a = after[chunk];
    for (int64_t k = k0; k < k1; ++k) {
      for (int64_t j = 0; j < ny; ++j) {
        for (int64_t i = 0; i < nx; ++i) {
          const int32_t f = fixed_sampler.At(i, j, k);
          b.Add(f, before_sampler.At(i, j, k));
          a.Add(f, after_sampler.At(i, j, k));
        }
      }
    }
  });
  for (size_t c = 1; c < before.size(); ++c) {
    before[0].Merge(before[c]);
    after[0].Merge(after[c]);
  }
  LabelScores scores;
  if (!before.empty()) {
    scores.before = SummarizeDice(before[0]);
    scores.after = SummarizeDice(after[0]);
  } else {
    scores.before = scores.after = SummarizeDice(LabelOverlapCounts());
  }
  return scores;
}

}  // namespace tessera::registration

#include "kernels/registration/pipeline/metric_mask.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/registration/parallel.h"
#include "kernels/registration/pipeline/array_helpers.h"
#include "kernels/registration/point_sampler.h"
#include "kernels/registration/sampler_math.h"
#include "kernels/registration/voxel_mask.h"

namespace tessera::registration {
namespace {

// Nonzero test of one voxel of any dtype.
bool NonZero(const NDArray& a, int64_t v) {
  switch (a.dtype()) {
    case DType::kFloat32: return a.data<float>()[v] != 0.f;
    case DType::kFloat64: return a.data<double>()[v] != 0.0;
    case DType::kInt32: return a.data<int32_t>()[v] != 0;
    case DType::kInt16: return a.data<int16_t>()[v] != 0;
    case DType::kUInt16: return a.data<uint16_t>()[v] != 0;
    case DType::kUInt8: return a.data<uint8_t>()[v] != 0;
    default: {
      const uint8_t* p = static_cast<const uint8_t*>(a.raw_data()) + v * SizeOf(a.dtype());
      for (size_t b = 0; b < SizeOf(a.dtype()); ++b) {
        if (p[b] != 0) return true;
      }
      return false;
    }
  }
}

absl::Status CheckMaskVolume(const Volume* mask, const char* which) {
  if (mask == nullptr) return absl::OkStatus();
  if (mask->data.rank() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(which, " mask must be a 3-D volume, got shape ", ShapeToString(mask->data.shape())));
  }
  if (mask->data.memory_kind() == MemoryKind::kDevice) {
    return absl::InvalidArgumentError(absl::StrCat(which, " mask must be in host memory"));
  }
  return absl::OkStatus();
}

}  // namespace

bool HasMasks(const RegistrationOptions& options) {
  return options.fixed_mask != nullptr || options.moving_mask != nullptr;
}

absl::Status CheckMasks(const RegistrationOptions& options) {
  if (!HasMasks(options)) return absl::OkStatus();
  TESSERA_RETURN_IF_ERROR(CheckMaskVolume(options.fixed_mask.get(), "fixed"));
  TESSERA_RETURN_IF_ERROR(CheckMaskVolume(options.moving_mask.get(), "moving"));
  return CheckMaskResidency(options);
}

absl::Status CheckMaskResidency(const RegistrationOptions& options) {
  if (options.shards > 1 || options.process_group != nullptr) {
    return absl::InvalidArgumentError("masks are not supported with shards > 1 yet (sharded deformable stage)");
  }
  if (options.force_out_of_core) return absl::InvalidArgumentError("masks are not supported out of core yet");
  return absl::OkStatus();
}

std::string MasksLogLine(const RegistrationOptions& options) {
  std::string line = "masks:";
  for (const auto& [mask, which] : {std::make_pair(options.fixed_mask.get(), "fixed"),
                                    std::make_pair(options.moving_mask.get(), "moving")}) {
    if (mask == nullptr) continue;
    int64_t inside = 0;
    for (int64_t v = 0; v < mask->data.num_elements(); ++v) inside += NonZero(mask->data, v) ? 1 : 0;
    absl::StrAppend(&line, line.size() > 6 ? "," : "", " ", which, " ", ShapeToString(mask->data.shape()), " (",
                    inside, " voxels inside)");
  }
  return absl::StrCat(line, "; the metric counts a fixed voxel inside the fixed mask whose mapped point is inside "
                            "the moving mask");
}

absl::StatusOr<NDArray> ResampleMaskNearest(const Volume& mask, const GridSpace& grid, DType dtype) {
  TESSERA_RETURN_IF_ERROR(CheckMaskVolume(&mask, "the"));
  TESSERA_ASSIGN_OR_RETURN(const Mat4 world_to_mask, InvertAffine(mask.geometry.IndexToWorld()));
  const Mat4 to_mask = Multiply(world_to_mask, grid.geometry.IndexToWorld());
  const int64_t nx = grid.dims[0], ny = grid.dims[1], nz = grid.dims[2];
  const int64_t mx = mask.data.dim(0), my = mask.data.dim(1), mz = mask.data.dim(2);
  TESSERA_ASSIGN_OR_RETURN(NDArray out, NDArray::Allocate({nx, ny, nz}, dtype));
  ParallelFor(nz, [&](int64_t k0, int64_t k1, int) {
    for (int64_t k = k0; k < k1; ++k) {
      for (int64_t j = 0; j < ny; ++j) {
        for (int64_t i = 0; i < nx; ++i) {
          int64_t idx[3];
          bool inside = true;
          const int64_t m[3] = {mx, my, mz};
          for (int r = 0; r < 3 && inside; ++r) {
            const double c = to_mask[4 * r] * i + to_mask[4 * r + 1] * j + to_mask[4 * r + 2] * k + to_mask[4 * r + 3];
            const double n = std::nearbyint(c);  // round half to even
            inside = n >= 0 && n <= static_cast<double>(m[r] - 1);
            idx[r] = inside ? static_cast<int64_t>(n) : 0;
          }
          const bool set = inside && NonZero(mask.data, idx[0] + mx * (idx[1] + my * idx[2]));
          const int64_t v = i + nx * (j + ny * k);
          if (dtype == DType::kUInt8) {
            out.data<uint8_t>()[v] = set ? 1 : 0;
          } else {
            out.data<int32_t>()[v] = set ? 1 : 0;
          }
        }
      }
    }
  });
  return out;
}

MetricMask::MetricMask(const Stream& stream, const RegistrationOptions& options)
    : stream_(stream), fixed_(options.fixed_mask), moving_(options.moving_mask) {}

absl::Status MetricMask::SetLevel(int factor, const GridSpace& fixed_space, const GridSpace& moving_space) {
  if (!active()) return absl::OkStatus();
  const Dims3 fd{fixed_space.dims[0], fixed_space.dims[1], fixed_space.dims[2]};
  const Dims3 md{moving_space.dims[0], moving_space.dims[1], moving_space.dims[2]};
  for (const auto& l : levels_) {
    if (l->factor == factor && l->fixed_dims == fd && l->moving_dims == md) {
      level_ = l.get();
      return absl::OkStatus();
    }
  }
  auto level = std::make_unique<LevelMasks>();
  level->factor = factor;
  level->fixed_dims = fd;
  level->moving_dims = md;
  const MemoryKind kind = MemoryKindFor(stream_);
  level->fixed_count = fd.size();
  if (fixed_ != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(NDArray host, ResampleMaskNearest(*fixed_, fixed_space, DType::kUInt8));
    level->fixed_count = 0;
    for (int64_t v = 0; v < host.num_elements(); ++v) level->fixed_count += host.data<uint8_t>()[v];
    if (level->fixed_count == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("the fixed mask holds no voxel of the fixed image's grid at level x", factor,
                       " (check that it lies in the fixed image's space)"));
    }
    TESSERA_ASSIGN_OR_RETURN(level->fixed, kind == MemoryKind::kHost ? std::move(host)
                                                                      : host.CopyTo(kind, stream_, stream_.ordinal()));
  }
  if (moving_ != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(NDArray host, ResampleMaskNearest(*moving_, moving_space, DType::kInt32));
    TESSERA_ASSIGN_OR_RETURN(level->moving, kind == MemoryKind::kHost ? std::move(host)
                                                                       : host.CopyTo(kind, stream_, stream_.ordinal()));
  }
  TESSERA_RETURN_IF_ERROR(stream_.Synchronize());
  levels_.push_back(std::move(level));
  level_ = levels_.back().get();
  return absl::OkStatus();
}

absl::StatusOr<VoxelMask> MetricMask::Update(const GridSampleArgs& args) {
  if (level_ == nullptr) return absl::InternalError("metric mask: no level entered");
  const Dims3 fd = level_->fixed_dims;
  if (args.out_dims != fd || args.image_dims != level_->moving_dims) {
    return absl::InternalError("metric mask: sampler arguments of another level");
  }
  if (moving_ == nullptr) return VoxelMask{level_->fixed.data<uint8_t>(), level_->fixed_count};
  const MemoryKind kind = MemoryKindFor(stream_);
  const Shape shape = {fd.nx, fd.ny, fd.nz};
  if (sampled_.empty() || sampled_.shape() != shape) {
    TESSERA_ASSIGN_OR_RETURN(sampled_, NDArray::Allocate(shape, DType::kInt32, kind, stream_.ordinal()));
    TESSERA_ASSIGN_OR_RETURN(combined_, NDArray::Allocate(shape, DType::kUInt8, kind, stream_.ordinal()));
  }
  GridSampleArgs nearest = args;
  nearest.image = nullptr;
  nearest.padding = Padding::kZeros;  // outside the moving grid: outside the mask
  TESSERA_RETURN_IF_ERROR(GridSampleNearest(stream_, level_->moving.data<int32_t>(), nearest, sampled_.data<int32_t>()));
  TESSERA_ASSIGN_OR_RETURN(const int64_t count,
                           CombineMasks(stream_, level_->fixed.empty() ? nullptr : level_->fixed.data<uint8_t>(),
                                        sampled_.data<int32_t>(), fd.size(), combined_.data<uint8_t>(), &workspace_));
  if (count == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no voxel of level x", level_->factor, " lies inside both masks under the current transform (fixed mask: ",
        level_->fixed_count, " voxels); check the masks' spaces and the initial transform"));
  }
  return VoxelMask{combined_.data<uint8_t>(), count};
}

const NDArray& MetricMask::combined() const { return moving_ != nullptr ? combined_ : level_->fixed; }

absl::StatusOr<std::vector<int64_t>> MetricMask::DrawInsideFixedMask(int64_t count, uint64_t seed) {
  if (level_ == nullptr) return absl::InternalError("metric mask: no level entered");
  if (level_->fixed.empty()) return RandomVoxelSubset(level_->fixed_dims.size(), count, seed);
  if (level_->fixed.memory_kind() == MemoryKind::kDevice) {
    return absl::InternalError("metric mask: sampled iterations run on the CPU backend only");
  }
  if (level_->inside.empty()) {
    const uint8_t* m = level_->fixed.data<uint8_t>();
    level_->inside.reserve(static_cast<size_t>(level_->fixed_count));
    for (int64_t v = 0; v < level_->fixed.num_elements(); ++v) {
      if (m[v]) level_->inside.push_back(v);
    }
  }
  std::vector<int64_t> points = RandomVoxelSubset(static_cast<int64_t>(level_->inside.size()), count, seed);
  for (int64_t& p : points) p = level_->inside[static_cast<size_t>(p)];
  return points;
}

int64_t MetricMask::SampleMovingMask(const float* affine, const std::vector<int64_t>& points, uint8_t* out) const {
  const int64_t k = static_cast<int64_t>(points.size());
  if (moving_ == nullptr || level_ == nullptr) {
    std::fill(out, out + k, uint8_t{1});
    return k;
  }
  const Dims3 fd = level_->fixed_dims, md = level_->moving_dims;
  const double lo[3] = {-1.0, -1.0, -1.0}, hi[3] = {1.0, 1.0, 1.0};
  const SamplerGeometry<float> g = MakeSamplerGeometry<float>(fd, md, lo, hi, Padding::kZeros);
  const int32_t* moving = level_->moving.data<int32_t>();
  int64_t count = 0;
  for (int64_t s = 0; s < k; ++s) {
    const int64_t v = points[static_cast<size_t>(s)];
    const int64_t i = v % fd.nx, j = (v / fd.nx) % fd.ny, kk = v / (fd.nx * fd.ny);
    float x[3], ix[3];
    OutputCoord(g, i, j, kk, x);
    SamplePosition(g, affine, x, static_cast<const float*>(nullptr), ix);
    int64_t idx[3];
    bool inside = true;
    const int64_t m[3] = {md.nx, md.ny, md.nz};
    for (int c = 0; c < 3 && inside; ++c) {
      const float r = RoundEvenT(ix[c]);
      inside = r >= 0.0f && r <= static_cast<float>(m[c] - 1);
      idx[c] = inside ? static_cast<int64_t>(r) : 0;
    }
    out[s] = inside && moving[md.index(idx[0], idx[1], idx[2])] != 0 ? 1 : 0;
    count += out[s];
  }
  return count;
}

}  // namespace tessera::registration

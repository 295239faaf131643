// PetProjector: validation, parameter upload, attenuation and dispatch.
#include "kernels/reconstruction/pet/projector.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/memory_kind_for.h"
#include "common/parallel.h"
#include "common/status.h"
#include "kernels/reconstruction/pet/em_ops.h"
#include "kernels/reconstruction/pet/projector_kernels.h"
#include "kernels/reconstruction/vector_ops.h"

namespace tessera {
namespace recon {
namespace pet {
namespace {

// A buffer in the stream's memory holding a copy of `host`.
template <typename T>
absl::StatusOr<std::shared_ptr<Buffer>> Upload(const Stream& stream, const std::vector<T>& host) {
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> buffer,
                           Buffer::Allocate(MemoryKindFor(stream), host.size() * sizeof(T), stream.ordinal()));
  TESSERA_RETURN_IF_ERROR(CopyBytes(buffer->data(), MemoryKindFor(stream), host.data(), MemoryKind::kHost,
                                    host.size() * sizeof(T), stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return buffer;
}

#if !TESSERA_WITH_CUDA
absl::Status NoCuda() {
  return absl::FailedPreconditionError(
      absl::StrCat("pet projector: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
}
#endif

}  // namespace

const char* DeterministicBackName(DeterministicBack back) {
  switch (back) {
    case DeterministicBack::kAuto:
      return "auto";
    case DeterministicBack::kFixedPoint:
      return "fixed-point scatter";
    case DeterministicBack::kGather:
      return "gather";
  }
  return "?";
}

GridParams MakeGridParams(const PetGeometry& geometry) {
  const VolumeGeometry& v = geometry.ct.volume;
  GridParams g{};
  const int64_t n[3] = {v.nx, v.ny, v.nz};
  const double lo[3] = {v.min_x, v.min_y, v.min_z};
  const double hi[3] = {v.max_x, v.max_y, v.max_z};
  for (int i = 0; i < 3; ++i) {
    const double h = (hi[i] - lo[i]) / static_cast<double>(n[i]);
    g.n[i] = static_cast<int>(n[i]);
    g.lo[i] = static_cast<float>(lo[i]);
    g.h[i] = static_cast<float>(h);
    g.inv_h[i] = static_cast<float>(1.0 / h);
    g.centre[i] = static_cast<float>(0.5 * (lo[i] + hi[i]));
  }
  g.is_2d = geometry.ct.projection.is_2d ? 1 : 0;
  if (g.is_2d) g.centre[2] = 0.0f;
  return g;
}

TofParams MakeTofParams(const TofSpec& tof) {
  TofParams t{};
  t.bins = tof.num_bins;
  if (!tof.enabled()) {
    t.bin_mm = 1.0f;  // unused; finite so no kernel ever divides by zero
    t.cut_mm = 1.0f;
    t.inv_sqrt2_sigma = 1.0f;
    t.reach_mm = 1.0f;
    t.erf_cut = 1.0f;
    return t;
  }
  const double sigma = tof.sigma_mm();
  t.bin_mm = static_cast<float>(tof.bin_mm);
  t.cut_mm = static_cast<float>(kTofCutoffSigmas * sigma);
  t.inv_sqrt2_sigma = static_cast<float>(1.0 / (std::sqrt(2.0) * sigma));
  t.reach_mm = static_cast<float>(0.5 * tof.bin_mm + kTofCutoffSigmas * sigma);
  t.erf_cut = static_cast<float>(std::erf(kTofCutoffSigmas / std::sqrt(2.0)));
  return t;
}

std::vector<unsigned char> DominantAxisMasks(const ProjectorParams& p) {
  std::vector<unsigned char> masks(p.views, 0);
  const int axes = p.grid.is_2d ? 2 : 3;
  ParallelFor(p.views, [&](int64_t begin, int64_t end, int) {
    for (int64_t view = begin; view < end; ++view) {
      unsigned char mask = 0;
      for (int r = 0; r < p.rows; ++r) {
        for (int c = 0; c < p.cols; ++c) {
          const Lor L = MakeLor(p, static_cast<int>(view), c, r);
          mask |= 1u << L.axis;
          // Another backend may round a near-tie the other way: allow both.
          const float top = std::fabs(L.d[L.axis]);
          for (int a = 0; a < axes; ++a) {
            if (std::fabs(L.d[a]) >= top * (1.0f - 1e-4f)) mask |= 1u << a;
          }
        }
      }
      masks[view] = mask;
    }
  });
  return masks;
}

absl::StatusOr<std::unique_ptr<PetProjector>> PetProjector::Create(const PetGeometry& geometry, const Stream& stream,
                                                                   const PetProjectorOptions& options) {
  TESSERA_RETURN_IF_ERROR(Validate(geometry));
  const int64_t int_max = std::numeric_limits<int>::max();
  const VolumeGeometry& v = geometry.ct.volume;
  if (geometry.cols() > int_max || geometry.rows() > int_max || geometry.num_views() > int_max || v.nx > int_max ||
      v.ny > int_max || v.nz > int_max) {
    return absl::InvalidArgumentError("pet projector: detector, view and volume counts must each fit in 32 bits");
  }
  if (options.num_subsets < 1 || options.num_subsets > geometry.num_views()) {
    return absl::InvalidArgumentError(absl::StrCat("num_subsets must be in [1, ", geometry.num_views(),
                                                   "] (the number of views), got ", options.num_subsets));
  }
  DeterministicBack back = options.deterministic_back;
  if (back != DeterministicBack::kAuto && back != DeterministicBack::kFixedPoint &&
      back != DeterministicBack::kGather) {
    return absl::InvalidArgumentError(
        absl::StrCat("deterministic_back: unknown value ", static_cast<int>(options.deterministic_back)));
  }
#if !TESSERA_WITH_CUDA
  if (stream.backend() == Backend::kCuda) return NoCuda();
#endif
  if (back == DeterministicBack::kAuto) {
    back = stream.backend() == Backend::kCuda ? DeterministicBack::kFixedPoint : DeterministicBack::kGather;
  }
  std::unique_ptr<PetProjector> projector(
      new PetProjector(geometry, stream, options.num_subsets, options.mode, back));
  TESSERA_RETURN_IF_ERROR(projector->Init(options.mu_map, options.efficiency));
  if (options.mode == ExecutionMode::kDeterministic && back == DeterministicBack::kFixedPoint) {
    TESSERA_RETURN_IF_ERROR(projector->fixed_point_scratch().status());
  }
  return projector;
}

absl::Status PetProjector::Init(const float* mu_map, const float* efficiency) {
  const ProjectionGeometry& proj = geometry_.ct.projection;
  params_.grid = MakeGridParams(geometry_);
  params_.tof = MakeTofParams(geometry_.tof);
  params_.beam = static_cast<int>(proj.beam);
  params_.cols = static_cast<int>(proj.det_cols);
  params_.rows = static_cast<int>(proj.det_rows);
  params_.views = static_cast<int>(proj.num_views());
  const std::vector<float> packed = PackViews(proj);
  ProjectorParams host = params_;
  host.view_vectors = packed.data();
  const std::vector<unsigned char> masks = DominantAxisMasks(host);
  TESSERA_ASSIGN_OR_RETURN(views_, Upload(*stream_, packed));
  TESSERA_ASSIGN_OR_RETURN(masks_, Upload(*stream_, masks));
  params_.view_vectors = static_cast<const float*>(views_->data());
  params_.axis_masks = static_cast<const unsigned char*>(masks_->data());
  params_.atten = nullptr;
  params_.atten_bound = 1.0f;
  std::shared_ptr<Buffer> eff;
  if (efficiency != nullptr) {
    const int64_t n = geometry_.num_lors();
    float top = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(efficiency[i]) || efficiency[i] < 0) {
        return absl::InvalidArgumentError(absl::StrCat("efficiency[", i, "] = ", efficiency[i],
                                                       ": must be finite and >= 0"));
      }
      top = std::max(top, efficiency[i]);
    }
    TESSERA_ASSIGN_OR_RETURN(eff, Upload(*stream_, std::vector<float>(efficiency, efficiency + n)));
    params_.atten_bound = std::max(1.0f, top);
  }
  if (mu_map == nullptr) {
    if (eff == nullptr) return absl::OkStatus();
    atten_ = eff;
    params_.atten = static_cast<const float*>(atten_->data());
    return absl::OkStatus();
  }

  TESSERA_ASSIGN_OR_RETURN(const int64_t bad, FirstInvalid(*stream_, mu_map, domain_size()));
  if (bad >= 0) {
    const VolumeGeometry& v = geometry_.ct.volume;
    return absl::InvalidArgumentError(absl::StrCat("mu_map voxel ", bad, " (x ", bad % v.nx, ", y ",
                                                   (bad / v.nx) % v.ny, ", z ", bad / (v.nx * v.ny),
                                                   ") is negative or not finite"));
  }
  // Line integrals of mu along every LOR (non-TOF, no attenuation), then exp(-.).
  TESSERA_ASSIGN_OR_RETURN(
      atten_, Buffer::Allocate(MemoryKindFor(*stream_), geometry_.num_lors() * sizeof(float), stream_->ordinal()));
  float* factors = static_cast<float*>(atten_->data());
  ProjectorParams line = params_;
  line.tof = MakeTofParams(TofSpec{});
  TESSERA_RETURN_IF_ERROR(RunForward(line, ViewRange{0, 1, params_.views}, mu_map, factors));
  TESSERA_RETURN_IF_ERROR(ExpNegate(*stream_, factors, geometry_.num_lors()));
  if (eff != nullptr) {
    TESSERA_RETURN_IF_ERROR(Multiply(*stream_, static_cast<const float*>(eff->data()), factors, geometry_.num_lors()));
  }
  TESSERA_RETURN_IF_ERROR(stream_->Synchronize());
  params_.atten = factors;
  return absl::OkStatus();
}

absl::StatusOr<ViewRange> PetProjector::Range(int subset) const {
  if (subset == kAllSubsets) return ViewRange{0, 1, params_.views};
  if (subset < 0 || subset >= num_subsets_) {
    return absl::InvalidArgumentError(absl::StrCat("subset ", subset, " out of range [0, ", num_subsets_, ")"));
  }
  const int count = (params_.views - subset + num_subsets_ - 1) / num_subsets_;
  return ViewRange{subset, num_subsets_, count};
}

absl::Status PetProjector::RunForward(const ProjectorParams& params, const ViewRange& range, const float* x,
                                      float* y) {
  if (stream_->backend() == Backend::kCpu) {
    cpu::Forward(params, range, x, y);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::Forward(*stream_, params, range, x, y);
#else
  return NoCuda();
#endif
}

absl::Status PetProjector::Forward(const float* x, float* y, int subset) {
  if (x == nullptr || y == nullptr) return absl::InvalidArgumentError("pet forward: x or y is null");
  TESSERA_ASSIGN_OR_RETURN(const ViewRange range, Range(subset));
  return RunForward(params_, range, x, y);
}

absl::Status PetProjector::Back(const float* y, float* x, int subset) { return BackWithMode(y, x, subset, mode_); }

absl::StatusOr<FixedPointScratch> PetProjector::fixed_point_scratch() {
  if (fixed_scratch_ == nullptr) {
    TESSERA_ASSIGN_OR_RETURN(
        fixed_scratch_,
        Buffer::Allocate(MemoryKindFor(*stream_), FixedPointScratchBytes(params_.grid), stream_->ordinal()));
  }
  return CarveFixedPointScratch(fixed_scratch_->data(), params_.grid);
}

absl::Status PetProjector::BackWithMode(const float* y, float* x, int subset, ExecutionMode mode) {
  if (x == nullptr || y == nullptr) return absl::InvalidArgumentError("pet back: x or y is null");
  TESSERA_ASSIGN_OR_RETURN(const ViewRange range, Range(subset));
  const bool deterministic = mode == ExecutionMode::kDeterministic;
  const bool gather = deterministic && deterministic_back_ == DeterministicBack::kGather;
  const bool fixed = deterministic && deterministic_back_ == DeterministicBack::kFixedPoint;
  FixedPointScratch scratch{};
  if (fixed) {
    TESSERA_ASSIGN_OR_RETURN(scratch, fixed_point_scratch());
  }
  if (stream_->backend() == Backend::kCpu) {
    if (gather) {
      cpu::BackGather(params_, range, y, x);
    } else if (fixed) {
      cpu::BackFixedPoint(params_, range, y, x, scratch);
    } else {
      cpu::BackScatter(params_, range, y, x);
    }
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  if (gather) return cuda::BackGather(*stream_, params_, range, y, x);
  if (fixed) return cuda::BackFixedPoint(*stream_, params_, range, y, x, scratch);
  return cuda::BackScatter(*stream_, params_, range, y, x);
#else
  return NoCuda();
#endif
}

}  // namespace pet
}  // namespace recon
}  // namespace tessera

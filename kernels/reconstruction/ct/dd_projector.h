// Distance-driven CT projector (De Man & Basu), forward and matched back
// projection, for 2-D parallel/fan and 3-D cone (circular or arbitrary
// cone_vec) geometries.
//
// The operator. Each view slices the volume into slabs perpendicular to the
// dominant axis a (x or y) of its central ray (dd_view.h). A detector cell's
// two u-boundaries (at the cell's centre row) map along their rays onto each
// slab plane, giving an interval along the in-plane axis b; its two
// v-boundaries (at the centre column) give an interval along z. Slab i adds
//   L * sum_{j,k} x[i,j,k] * overlap_b(j) / width_b * overlap_c(k) / width_c,
// L = slab spacing * |ray| / |ray_a| of the cell's central ray. 2-D has no z
// term (line integrals in the plane: value x mm). The back projection is the
// exact transpose of the same weights.
//
// Implementations:
//   - cpu::Forward: branchless "integrate, interpolate, differentiate": a
//     summed-area table of each slab (double), bilinear interpolation at the
//     mapped interval ends (exact for a piecewise-constant slab) and the
//     four-corner difference; cpu::Back is its transpose (scatter into the
//     table's adjoint, then suffix sums). Double accumulation; the reference
//     the tests hold everything to. cpu::ForwardExactOverlap is the overlap
//     formula itself.
//   - CUDA (and cpu::GatherForward/GatherBack, the same code on the host):
//     gathers, float weights. The forward (dd_gather.h) is one thread per
//     detector cell walking the slabs (x-slab views read an x<->y transposed
//     copy of the volume, so a warp's reads along b are contiguous). The back
//     projection (dd_back_gather.h) first weights the sinogram by the ray
//     lengths per call (2-D: a double prefix sum over columns), then runs one
//     thread per voxel looping over the views in order: the voxel's two
//     boundaries along b located among the cell boundaries (one division and
//     a check each), then 2-D a difference of two prefix values, 3-D the
//     overlapped cells only. Both are deterministic, and they are what
//     ExecutionMode::kDefault uses too (no atomic variant).
//   - The CPU backend (a CPU stream) runs cpu::GatherForward/GatherBack, the
//     fastest on the host (dd_projector.cc), except cpu::Back for the back
//     projection of systems with row-coupled views. Results do not depend on
//     the thread count.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_CT_DD_PROJECTOR_H_
#define TESSERA_KERNELS_RECONSTRUCTION_CT_DD_PROJECTOR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/buffer.h"
#include "common/device.h"
#include "kernels/reconstruction/ct/dd_system.h"
#include "kernels/reconstruction/execution_mode.h"
#include "kernels/reconstruction/geometry.h"
#include "kernels/reconstruction/linear_operator.h"

namespace tessera {
namespace recon {
namespace ct {

// Scratch of the back projection's per-call weighted sinogram (the views are
// processed in chunks that fit; at least one view).
constexpr int64_t kDefaultBackScratchBytes = int64_t{64} << 20;

struct DdProjectorOptions {
  ExecutionMode mode = ExecutionMode::kDefault;
  int num_subsets = 1;  // ordered subsets of views (1..num_views)
  // Per plan (device memory on CUDA, host memory per call on the CPU); the
  // chunking changes the result only by float rounding between chunks.
  int64_t back_scratch_bytes = kDefaultBackScratchBytes;
  // 3-D back projection on CUDA: voxels along z per thread (1, 2, 4 or 8; 0:
  // 8 without row-coupled views, else 4, the fastest on an H200), a speed
  // knob only (the sums are the same).
  int back_z_run = 0;
};

namespace cuda {
// Device state of a plan: the views, their tables and the scratch.
struct DdDevicePlan {
  std::shared_ptr<Buffer> views;        // DdView[num_views]
  std::shared_ptr<Buffer> tables;       // DdSystem::tables
  std::shared_ptr<Buffer> back_tables;  // DdSystem::back_tables
  std::shared_ptr<Buffer> transposed;   // nx*ny*nz floats when some view slices along x
  std::shared_ptr<Buffer> scratch;      // chunk_views * BackScratch::view_bytes
  int64_t chunk_views = 1;
  int z_run = 4;                        // DdProjectorOptions::back_z_run, resolved
};
}  // namespace cuda

// A plan: the geometry validated and converted once, its per-view constants
// uploaded to the stream's device. Domain: volume voxels (x fastest); views:
// projections; elements_per_view: det_cols * det_rows; subsets compact.
// A CUDA `stream` must outlive the projector (a CPU stream may be a
// temporary: the plan keeps its own). CUDA calls are asynchronous on the
// stream and allocate nothing. Not thread-safe (owns scratch).
// Measured on an H200: bench/results/2026-12-01-h200-recon-projector-v2.md
// (back projection 1.3x the forward's time in 3-D cones, 2.5x in 2-D, 3x for
// tilted detectors).
class DdProjector : public LinearOperator {
 public:
  static absl::StatusOr<std::unique_ptr<DdProjector>> Create(const CtGeometry& geometry, const Stream& stream,
                                                             DdProjectorOptions options = {});
  ~DdProjector() override;

  const Stream& stream() const override { return *stream_; }
  int64_t domain_size() const override { return geometry_.volume.size(); }
  int64_t num_views() const override { return geometry_.projection.num_views(); }
  int64_t elements_per_view() const override { return system_.shape.cols * system_.shape.rows; }
  int num_subsets() const override { return options_.num_subsets; }

  // sinogram (compact for `subset`) = A_subset volume.
  absl::Status Forward(const float* volume, float* sinogram, int subset = kAllSubsets) override;
  // volume = A_subset^T sinogram (compact for `subset`), overwriting volume.
  absl::Status Back(const float* sinogram, float* volume, int subset = kAllSubsets) override;

  const CtGeometry& geometry() const { return geometry_; }
  const DdSystem& system() const { return system_; }
  const DdProjectorOptions& options() const { return options_; }

 private:
  DdProjector(const CtGeometry& geometry, DdSystem system, const Stream& stream, DdProjectorOptions options);
  absl::Status CheckCall(const void* in, const void* out, int subset, const char* what) const;

  CtGeometry geometry_;
  DdSystem system_;
  Stream cpu_stream_ = Stream::Cpu();
  const Stream* stream_;
  DdProjectorOptions options_;
  cuda::DdDevicePlan device_;
};

namespace cpu {
// Reference implementations on host memory. `views` lists the projections to
// compute, in order; the sinogram holds them back to back (compact).
void Forward(const DdSystem& system, const float* volume, const std::vector<int64_t>& views, float* sinogram);
void ForwardExactOverlap(const DdSystem& system, const float* volume, const std::vector<int64_t>& views,
                         float* sinogram);
void Back(const DdSystem& system, const float* sinogram, const std::vector<int64_t>& views, float* volume);
// The CUDA kernels' gather code (dd_gather.h) run on the host.
void GatherForward(const DdSystem& system, const float* volume, const std::vector<int64_t>& views, float* sinogram);
void GatherBack(const DdSystem& system, const float* sinogram, const std::vector<int64_t>& views, float* volume,
                int64_t scratch_bytes = kDefaultBackScratchBytes);
}  // namespace cpu

namespace cuda {
absl::Status CreatePlan(const DdSystem& system, const Stream& stream, const DdProjectorOptions& options,
                        DdDevicePlan* plan);
// Views first, first + stride, ... (count of them); device pointers.
absl::Status Forward(const DdDevicePlan& plan, const DdSystem& system, const Stream& stream, ExecutionMode mode,
                     int64_t first, int64_t stride, int64_t count, const float* volume, float* sinogram);
absl::Status Back(const DdDevicePlan& plan, const DdSystem& system, const Stream& stream, ExecutionMode mode,
                  int64_t first, int64_t stride, int64_t count, const float* sinogram, float* volume);
}  // namespace cuda

}  // namespace ct
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_CT_DD_PROJECTOR_H_

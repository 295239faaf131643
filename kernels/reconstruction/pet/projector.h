// The PET system matrix A as a recon::LinearOperator: ray-driven Joseph
// projection along each LOR with TOF kernel weights (lor_math.h) and optional
// attenuation, on the CPU (reference) or CUDA.
//
//   y = diag(a) A_tof x,    x = A_tof^T diag(a) y,
// where a are the LORs' factors: attenuation exp(-integral of mu) (all 1
// without a mu-map), computed once by Create with the same projector (non-TOF),
// times the detection efficiencies (normalisation, all 1 without), and
// applied to every TOF bin of the LOR. Sinogram layout: pet_geometry.h
// (c, r, TOF bin, view); ordered subsets are interleaved views, compact
// (recon::LinearOperator).
//
// Back projection by execution mode:
//   kDefault: ray-driven float scatter (CUDA: one thread per LOR, atomicAdd;
//     CPU: per-thread volumes summed in thread order);
//   kDeterministic (PetProjectorOptions::deterministic_back):
//     kFixedPoint: the same ray-driven scatter accumulating in 64-bit fixed
//       point with integer atomics (fixed_point.h: scale, error bound), so the
//       order of the atomics cannot change a bit. It does the float
//       scatter's work plus three passes over memory (sum |y|, zeroing and
//       converting 8-byte accumulators), instead of the gather's ~10x the
//       scatter's time in 3-D (bench/results/2026-12-01-h200-recon-pet.md;
//       recon_pet_bench measures all three side by side);
//     kGather: voxel-driven gather, every voxel summing its terms in a fixed
//       order (the reference the fixed-point scatter replaced; kept because
//       it needs no scratch and recomputes nothing host-side);
//     kAuto: kFixedPoint on CUDA; kGather on the CPU, whose recorded
//       deterministic outputs (services/reconstruction golden test) are
//       gather results and which is a reference backend anyway.
//   Both deterministic orders are bit-identical run to run on one GPU model,
//   and on the CPU independent of the thread count.
// All are the exact adjoint of Forward up to float rounding.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_PET_PROJECTOR_H_
#define TESSERA_KERNELS_RECONSTRUCTION_PET_PROJECTOR_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/buffer.h"
#include "common/device.h"
#include "kernels/reconstruction/execution_mode.h"
#include "kernels/reconstruction/linear_operator.h"
#include "kernels/reconstruction/pet/lor_math.h"
#include "kernels/reconstruction/pet/pet_geometry.h"
#include "kernels/reconstruction/pet/projector_kernels.h"

namespace tessera {
namespace recon {
namespace pet {

// How kDeterministic back-projects (see above).
enum class DeterministicBack { kAuto, kFixedPoint, kGather };
const char* DeterministicBackName(DeterministicBack back);

struct PetProjectorOptions {
  int num_subsets = 1;  // 1 .. num_views
  ExecutionMode mode = ExecutionMode::kDefault;
  // Optional linear attenuation coefficients (1/mm) on the volume grid,
  // x-fastest, in the stream's memory; read during Create only. Null: none.
  const float* mu_map = nullptr;
  DeterministicBack deterministic_back = DeterministicBack::kAuto;
  // Last, so that positional initialisers stay valid. Optional detection efficiencies per LOR (normalisation: expected counts
  // = efficiency * attenuation factor * (A x)), num_lors() floats in HOST
  // memory, finite and >= 0; read during Create only. Null: all 1.
  const float* efficiency = nullptr;
};

class PetProjector : public LinearOperator {
 public:
  // Validates the geometry (pet::Validate) and options (INVALID_ARGUMENT
  // naming the field; a negative or non-finite mu names the voxel). The
  // stream must outlive the projector.
  static absl::StatusOr<std::unique_ptr<PetProjector>> Create(const PetGeometry& geometry, const Stream& stream,
                                                              const PetProjectorOptions& options = {});

  const Stream& stream() const override { return *stream_; }
  int64_t domain_size() const override { return geometry_.ct.volume.size(); }
  int64_t num_views() const override { return geometry_.num_views(); }
  int64_t elements_per_view() const override { return geometry_.elements_per_view(); }
  int num_subsets() const override { return num_subsets_; }

  absl::Status Forward(const float* x, float* y, int subset = kAllSubsets) override;
  // In the projector's execution mode.
  absl::Status Back(const float* y, float* x, int subset = kAllSubsets) override;
  absl::Status BackWithMode(const float* y, float* x, int subset, ExecutionMode mode);

  // kDeterministic's back projection (kAuto resolved for the backend).
  DeterministicBack deterministic_back() const { return deterministic_back_; }
  // The fixed-point scratch (FixedPointScratchBytes: 8 bytes per voxel and a
  // little), allocated by Create for a kDeterministic fixed-point projector,
  // else by the first fixed-point back projection; then reused by every call.
  absl::StatusOr<FixedPointScratch> fixed_point_scratch();

  const PetGeometry& geometry() const { return geometry_; }
  ExecutionMode mode() const { return mode_; }
  // Factors per LOR (c + cols * (r + rows * view)), attenuation times
  // efficiency, in the stream's memory; null with neither.
  const float* attenuation() const { return params_.atten; }
  // Kernel parameters (pointers in the stream's memory), for list-mode.
  const ProjectorParams& params() const { return params_; }
  // The views of `subset` (kAllSubsets: all); INVALID_ARGUMENT out of range.
  absl::StatusOr<ViewRange> Range(int subset) const;

 private:
  PetProjector(const PetGeometry& geometry, const Stream& stream, int num_subsets, ExecutionMode mode,
               DeterministicBack back)
      : geometry_(geometry), stream_(&stream), num_subsets_(num_subsets), mode_(mode), deterministic_back_(back) {}

  absl::Status Init(const float* mu_map, const float* efficiency);
  absl::Status RunForward(const ProjectorParams& params, const ViewRange& range, const float* x, float* y);

  PetGeometry geometry_;
  const Stream* stream_;
  int num_subsets_;
  ExecutionMode mode_;
  DeterministicBack deterministic_back_;
  ProjectorParams params_{};
  std::shared_ptr<Buffer> views_, masks_, atten_, fixed_scratch_;
};

// Host-side ProjectorParams pieces (also used by tests): the float grid and
// TOF constants, and per view the bit mask of dominant axes among its rays
// (conservative: near-ties set both bits).
GridParams MakeGridParams(const PetGeometry& geometry);
TofParams MakeTofParams(const TofSpec& tof);
std::vector<unsigned char> DominantAxisMasks(const ProjectorParams& host_params);

}  // namespace pet
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_PET_PROJECTOR_H_

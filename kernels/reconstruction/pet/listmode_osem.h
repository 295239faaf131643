// List-mode OSEM: reconstruction straight from events (listmode_file.h),
//
//   lambda <- lambda / s_S * sum over events e of subset S of w_e a_e / (a_e . lambda)
//
// where a_e is the row of the TOF system matrix (PetProjector: Joseph, TOF
// kernel, attenuation, efficiency) of the event's (view, col, row, TOF bin), w_e its
// weight (merged duplicates), subset S = the events whose view is in the
// projector's interleaved view subset S, and s_S = A_S^T 1 the sinogram-space
// sensitivity of that subset (attenuation included). Only the event LORs are
// forward-projected. On histogrammed events this is sinogram OSEM exactly (up
// to float rounding); the log-likelihood reported is the list-mode form
//   sum_e w_e log(a_e . lambda) - s_S . lambda
// (the subset's sinogram Poisson log-likelihood without background).
//
// Implementations:
//   CPU: per event (reference), threads over event ranges.
//   CUDA kNaive: one thread per event walks its TOF row for the forward value
//     and again to atomicAdd its back projection (events in input order).
//   CUDA kBucketed: events sorted once on the GPU by (subset, TOF bin, view,
//     row, col) and duplicates merged into (LOR, multiplicity); per subset a
//     forward pass over its unique keys fills a dense ratio TOF sinogram (zero
//     where no event), which the sinogram projector back-projects with its
//     ray-driven scatter (one thread per LOR, TOF bins summed per sample: far
//     fewer atomics than per event): float atomics with kDefault; with
//     kDeterministic 64-bit fixed-point integer atomics (bit-identical run to
//     run whatever the order of events and atomics; fixed_point.h), or the
//     voxel-driven gather (deterministic_back = kGather).
// Sensitivities use the projector in the same mode (kNaive: kDefault).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_PET_LISTMODE_OSEM_H_
#define TESSERA_KERNELS_RECONSTRUCTION_PET_LISTMODE_OSEM_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/buffer.h"
#include "common/device.h"
#include "kernels/reconstruction/pet/listmode_file.h"
#include "kernels/reconstruction/pet/listmode_kernels.h"
#include "kernels/reconstruction/pet/osem.h"
#include "kernels/reconstruction/pet/pet_geometry.h"
#include "kernels/reconstruction/pet/projector.h"

namespace tessera {
namespace recon {
namespace pet {

enum class ListModeMethod { kNaive, kBucketed };
const char* ListModeMethodName(ListModeMethod method);

struct ListModeOptions {
  int num_subsets = 1;
  ListModeMethod method = ListModeMethod::kBucketed;  // CUDA only; the CPU runs its reference
  // Optional mu-map (1/mm) on the volume grid in the stream's memory (PetProjectorOptions).
  const float* mu_map = nullptr;
  // kBucketed's back projection (and the sensitivities): float scatter, or
  // deterministic (fixed-point scatter or gather: deterministic_back).
  ExecutionMode mode = ExecutionMode::kDeterministic;
  float sensitivity_eps = 1e-12f;
  DeterministicBack deterministic_back = DeterministicBack::kAuto;  // PetProjectorOptions
  // Optional detection efficiencies per LOR, host memory (PetProjectorOptions):
  // folded into a_e and the sensitivities like the attenuation factors.
  const float* efficiency = nullptr;
};

class ListModeReconstructor {
 public:
  // Validates the geometry and options; computes the sensitivities. The
  // stream must outlive the reconstructor. List-mode limits: cols and rows
  // <= 65536 (u16 indices).
  static absl::StatusOr<std::unique_ptr<ListModeReconstructor>> Create(const PetGeometry& geometry,
                                                                       const Stream& stream,
                                                                       const ListModeOptions& options = {});

  // Host events. Checks every index against the geometry (INVALID_ARGUMENT
  // naming the event), drops weight-0 (delayed) events and prepares the rest
  // for the method (grouped by subset; or uploaded, sorted and merged).
  absl::Status SetEvents(const ListModeEvent* events, int64_t n);

  // out (domain_size, stream memory) = sum over subset `subset`'s events of
  // w_e a_e / (a_e . image); returns sum_e w_e log(a_e . image) (events with
  // a_e . image > 0).
  absl::StatusOr<double> DataTerm(const float* image, float* out, int subset);

  // `iterations` passes over the subsets, updating `image` (stream memory,
  // non-negative start) in place; progress after each sub-iteration with the
  // list-mode log-likelihood at the image that entered it.
  absl::Status Run(float* image, int iterations, const EmProgress& progress = nullptr);

  PetProjector& projector() { return *projector_; }
  const float* sensitivity(int subset) const;
  ListModeMethod method() const { return method_; }
  ExecutionMode mode() const { return projector_->mode(); }
  // Events kept by SetEvents (weight > 0), and after merging (kBucketed; else
  // the same).
  int64_t num_events() const { return num_events_; }
  int64_t num_unique() const { return num_unique_; }

 private:
  ListModeReconstructor(const Stream& stream, ListModeMethod method, float eps)
      : stream_(&stream), method_(method), eps_(eps) {}

  const Stream* stream_;
  ListModeMethod method_;
  float eps_;
  int num_subsets_ = 1;
  std::unique_ptr<PetProjector> projector_;
  std::shared_ptr<Buffer> sens_, scratch_;
  BucketKeyShape shape_{};
  bool have_events_ = false;
  int64_t num_events_ = 0, num_unique_ = 0;
  // CPU and kNaive: events grouped by subset (host or device memory).
  std::vector<ListModeEvent> host_events_;
  std::shared_ptr<Buffer> device_events_;
  std::vector<int64_t> subset_offsets_;
  // kBucketed.
  EventBuckets buckets_;
  std::shared_ptr<Buffer> ratio_;
};

}  // namespace pet
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_PET_LISTMODE_OSEM_H_

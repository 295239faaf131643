// A stack of 2-D non-Cartesian slices (slices and/or time frames of one
// acquisition) that share one trajectory and density weights, reconstructed
// in one call (issue 40): the operator (NUFFT plans, Toeplitz kernel) depends
// on the trajectory only, so it is made once per worker and only the coil maps
// (SenseOperator::SetMaps) and the data change from slice to slice.
//   CPU:  min(CpuThreads(), slices) workers, each with its own operator (an
//         operator is not thread-safe), take slices one at a time.
//   CUDA: one operator on the stream, slices in order (the plan reused).
// Each slice's image is the one CgSense / AdjointSense gives for that slice
// alone (bit-identical on the CPU: same plan, same arithmetic).
//
//   SenseGeometry g{nx, ny, coils, points, kx, ky, maps, dcf};
//   SenseStack stack{g, /*slices=*/32, /*slices_per_map_set=*/1};
//   auto r = CgSenseStack(stream, stack, kspace, options, images, on_slice_done);
//
// Layouts (stream memory): kspace slices x coils x points, maps sets x coils x
// ny x nx (see slices_per_map_set), images slices x ny x nx.
// options.progress, when set, is called from the workers concurrently (it
// must be thread-safe); slice_done is serialised. The first error (a
// callback's included) stops the remaining slices and is returned.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_MRI_SENSE_STACK_H_
#define TESSERA_KERNELS_RECONSTRUCTION_MRI_SENSE_STACK_H_

#include <complex>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/reconstruction/mri/cg_sense.h"
#include "kernels/reconstruction/mri/sense_operator.h"

namespace tessera {
namespace recon {
namespace mri {

struct SenseStack {
  SenseGeometry geometry;  // one slice; maps = the first map set
  int64_t slices = 1;
  // Consecutive slices sharing a map set: 0 one set for all, 1 a set per
  // slice, F the frames of one slice (slice s uses set s / F).
  int64_t slices_per_map_set = 0;
};

// Called once per finished slice with the number finished so far.
using SliceDone = std::function<absl::Status(int64_t slice, int64_t finished, int64_t total)>;

// One CgSenseResult per slice. INVALID_ARGUMENT for slices < 1, a negative
// slices_per_map_set and what CgSense refuses.
absl::StatusOr<std::vector<CgSenseResult>> CgSenseStack(const Stream& stream, const SenseStack& stack,
                                                        const std::complex<float>* kspace,
                                                        const CgSenseOptions& options, std::complex<float>* images,
                                                        const SliceDone& slice_done = nullptr);

// AdjointSense per slice.
absl::Status AdjointSenseStack(const Stream& stream, const SenseStack& stack, const std::complex<float>* kspace,
                               const SenseOperatorOptions& options, std::complex<float>* images,
                               const SliceDone& slice_done = nullptr);

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_SENSE_STACK_H_

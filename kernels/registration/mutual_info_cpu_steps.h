// The three steps of the CPU Mattes MI (mutual_info_cpu.cc), exposed so a
// caller can combine joint histograms before finalizing: the sharded MI
// (kernels/parallel) all-reduces the B x B histogram of its slab between
// JointHistogram and Finalize. Host arrays; options already validated.
#ifndef TESSERA_KERNELS_REGISTRATION_MUTUAL_INFO_CPU_STEPS_H_
#define TESSERA_KERNELS_REGISTRATION_MUTUAL_INFO_CPU_STEPS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/registration/grid_sampler_cpu_path.h"
#include "kernels/registration/mutual_info.h"

namespace tessera {
namespace registration {
namespace mi_cpu {

// Parzen-windowed joint histogram of n voxels, B x B (row = fixed bin); voxels
// with mask == 0 are skipped (mask may be null). Fixed point (issue 39):
// each voxel's products of Parzen weights are rounded to integer multiples
// of 2^-bits and summed as int64, which is exact and so independent of how
// the voxels are split over threads or ranks; JointHistogram is
// HistogramFromFixed(JointHistogramFixed(..., HistogramFixedPointBits(n))).
std::vector<double> JointHistogram(const float* fixed, const float* warped, const uint8_t* mask, int64_t n,
                                   const MattesMiOptions& options);
// The fraction bits for a histogram of total_voxels voxels (every bin stays
// below 2^62): 52 for small volumes, 62 - ceil(log2 N) above 1024 voxels
// (42 at 1M voxels, 32 at 1G: a rounding of 2^-32 per product).
int HistogramFixedPointBits(int64_t total_voxels);
// The integer histogram of n of those voxels (a shard's part: pass the
// whole volume's bits) and its value in double (bins * 2^-bits).
std::vector<int64_t> JointHistogramFixed(const float* fixed, const float* warped, const uint8_t* mask, int64_t n,
                                         const MattesMiOptions& options, int bits);
std::vector<double> HistogramFromFixed(const std::vector<int64_t>& fixed, int bits);

// MI and loss of a joint histogram. With `table` non-null it also gets the
// B x B gradient table T(a, b) = -G(a, b) * dt/dW / total that
// GradientFromTable contracts.
MattesMiResult Finalize(const std::vector<double>& histogram, const MattesMiOptions& options,
                        std::vector<double>* table);

// d(loss)/d(warped) for n voxels from Finalize's table and total weight
// (zero where masked, outside the warped range, or when total <= 0).
void GradientFromTable(const float* fixed, const float* warped, const uint8_t* mask, int64_t n,
                       const MattesMiOptions& options, const std::vector<double>& table, double total, float* grad);

// The two per-voxel steps on a given CPU path (issue 38; kScalar: the
// reference loops; JointHistogramFixed / GradientFromTable run kAuto). Every
// path gives the same integers and floats. grad may be `warped` itself (each
// voxel's gradient reads only its own fixed and warped values).
std::vector<int64_t> JointHistogramFixedOnPath(SamplerCpuPath path, const float* fixed, const float* warped,
                                               const uint8_t* mask, int64_t n, const MattesMiOptions& options,
                                               int bits);
void GradientFromTableOnPath(SamplerCpuPath path, const float* fixed, const float* warped, const uint8_t* mask,
                             int64_t n, const MattesMiOptions& options, const std::vector<double>& table,
                             double total, float* grad);

// MattesMutualInformation on the CPU with dLoss/dW written over `warped`
// (host arrays; the same checks and values as a separate grad array): saves
// the lean deformable stage an image-sized gradient array and a copy.
absl::StatusOr<MattesMiResult> MattesMutualInformationOverWarped(const NDArray& fixed, NDArray& warped,
                                                                 const NDArray* mask,
                                                                 const MattesMiOptions& options);

}  // namespace mi_cpu
}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_MUTUAL_INFO_CPU_STEPS_H_

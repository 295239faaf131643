// The three steps of the CPU Mattes MI (mutual_info_cpu.cc), exposed so a
// caller can combine joint histograms before finalizing: the sharded MI
// (kernels/parallel) all-reduces the B x B histogram of its slab between
// JointHistogram and Finalize. Host arrays; options already validated.
#ifndef TESSERA_KERNELS_REGISTRATION_MUTUAL_INFO_CPU_STEPS_H_
#define TESSERA_KERNELS_REGISTRATION_MUTUAL_INFO_CPU_STEPS_H_

#include <cstdint>
#include <vector>

#include "kernels/registration/mutual_info.h"

namespace tessera {
namespace registration {
namespace mi_cpu {

// Parzen-windowed joint histogram of n voxels, B x B (row = fixed bin); voxels
// with mask == 0 are skipped (mask may be null). Threads keep their own
// histogram, merged in a fixed order.
std::vector<double> JointHistogram(const float* fixed, const float* warped, const uint8_t* mask, int64_t n,
                                   const MattesMiOptions& options);

// MI and loss of a joint histogram. With `table` non-null it also gets the
// B x B gradient table T(a, b) = -G(a, b) * dt/dW / total that
// GradientFromTable contracts.
MattesMiResult Finalize(const std::vector<double>& histogram, const MattesMiOptions& options,
                        std::vector<double>* table);

// d(loss)/d(warped) for n voxels from Finalize's table and total weight
// (zero where masked, outside the warped range, or when total <= 0).
void GradientFromTable(const float* fixed, const float* warped, const uint8_t* mask, int64_t n,
                       const MattesMiOptions& options, const std::vector<double>& table, double total, float* grad);

}  // namespace mi_cpu
}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_MUTUAL_INFO_CPU_STEPS_H_

// The three device steps of the CUDA Mattes MI (mutual_info.cu), exposed so
// a caller can combine joint histograms before finalizing: the sharded MI
// (kernels/parallel/sharded_mi.cc) all-reduces the fixed-point histogram of
// its slab between AddJointHistogram and Finalize. The histogram is in fixed
// point, as the CPU reference's (mi_cpu::JointHistogramFixed) but with a
// fixed resolution: each voxel's Parzen products rounded to integer multiples
// of 2^-kHistogramBits and summed as 64-bit integers, exact in any order, so
// a sharded run finalizes the very histogram the unsharded one does, with the
// same kernel (issue 39). Device pointers, on `stream`; options already
// validated. CUDA builds only.
#ifndef TESSERA_KERNELS_REGISTRATION_MUTUAL_INFO_CUDA_STEPS_H_
#define TESSERA_KERNELS_REGISTRATION_MUTUAL_INFO_CUDA_STEPS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/registration/mutual_info.h"

namespace tessera {
namespace registration {
namespace mi_cuda {

// Fraction bits of the device histogram: a product of Parzen weights (<= 1)
// is an unsigned 32-bit integer of at most 2^24, so a lane's run of 4 voxels
// and a warp's 32 lanes sum in 32 bits (as cheap as the float histogram it
// replaced); bins are 64-bit (2^40 voxels). The rounding, 2^-25 per product,
// moves MI by far less than the CUDA-vs-CPU tolerance (mutual_info.h).
inline constexpr int kHistogramBits = 24;

// Adds the n voxels' fixed-point joint histogram (B x B, row = fixed bin)
// into `histogram`; zero it first for a new one. Voxels with mask == 0 skipped.
absl::Status AddJointHistogram(const Stream& stream, const float* fixed, const float* warped, const uint8_t* mask,
                               int64_t n, const MattesMiOptions& options, uint64_t* histogram);

// MI of the histogram into result[0] (and the total weight into result[1]),
// and the B x B gradient table T for Gradient into `table` (floats).
absl::Status Finalize(const Stream& stream, const uint64_t* histogram, const MattesMiOptions& options, float* table,
                      double* result);

// d(loss)/d(warped) of n voxels from Finalize's table (0 where masked or
// outside the warped range).
absl::Status Gradient(const Stream& stream, const float* fixed, const float* warped, const uint8_t* mask, int64_t n,
                      const MattesMiOptions& options, const float* table, float* grad);

// Finalize's result, read back (synchronizes the stream).
absl::StatusOr<MattesMiResult> ReadResult(const Stream& stream, const double* result);

}  // namespace mi_cuda
}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_MUTUAL_INFO_CUDA_STEPS_H_

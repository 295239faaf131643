// Internal: the steps behind BeamformPlan, each with a CPU reference (cpu::)
// and a CUDA version (cuda::) taking the same arguments in device memory.
//
// Minimum variance works on chunks of whole image columns [col_begin,
// col_begin + cols): chunk pixel q = iz + nz * (ix - col_begin), P = cols * nz.
//   X[c + N q]            delayed, transmit-compounded channel c of pixel q
//   R[q L L + i + j L]    covariance (i >= j written; BatchedCholeskySolve's layout)
//   V[q L + i]            R^-1 a on return of the solve (ones on entry)
#ifndef TESSERA_KERNELS_RECONSTRUCTION_ULTRASOUND_BEAMFORM_KERNELS_H_
#define TESSERA_KERNELS_RECONSTRUCTION_ULTRASOUND_BEAMFORM_KERNELS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "common/device.h"
#include "kernels/reconstruction/ultrasound/delay_model.h"

namespace tessera {
namespace recon {
namespace ultrasound {
namespace detail {

struct MvChunk {
  int col_begin = 0;  // first image column of the chunk
  int cols = 0;       // columns in the chunk
  int subarray = 0;   // L
  int temporal_half = 0;  // K
  float loading = 0;      // delta
  TESSERA_US_HD int64_t pixels(const BeamformParams& p) const { return int64_t{cols} * p.nz; }
};

// The largest L the covariance kernels take (linalg's batched solve limit).
inline constexpr int kMaxCovarianceSize = 128;
// Covariance staging limit (CUDA shared memory, 44 KiB of the 48): (2K + 1) N
// complex values.
inline constexpr int kMaxCovarianceRowValues = 5632;

namespace cpu {
void DelayAndSum(const BeamformParams& p, const CFloat* data, CFloat* image);
void DelayedChannels(const BeamformParams& p, const MvChunk& chunk, const CFloat* data, CFloat* x);
void Covariance(const BeamformParams& p, const MvChunk& chunk, const CFloat* x, CFloat* r);
void FillOnes(const BeamformParams& p, const MvChunk& chunk, CFloat* v);
void ApplyWeights(const BeamformParams& p, const MvChunk& chunk, const CFloat* x, const CFloat* v, const int* info,
                  CFloat* image);
}  // namespace cpu

namespace cuda {
absl::Status DelayAndSum(const Stream& stream, const BeamformParams& p, const CFloat* data, CFloat* image);
absl::Status DelayedChannels(const Stream& stream, const BeamformParams& p, const MvChunk& chunk, const CFloat* data,
                             CFloat* x);
absl::Status Covariance(const Stream& stream, const BeamformParams& p, const MvChunk& chunk, const CFloat* x,
                        CFloat* r);
absl::Status FillOnes(const Stream& stream, const BeamformParams& p, const MvChunk& chunk, CFloat* v);
absl::Status ApplyWeights(const Stream& stream, const BeamformParams& p, const MvChunk& chunk, const CFloat* x,
                          const CFloat* v, const int* info, CFloat* image);
}  // namespace cuda

}  // namespace detail
}  // namespace ultrasound
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_ULTRASOUND_BEAMFORM_KERNELS_H_

// Element-wise multi-coil operations of the SENSE encoding operator
// E x = {NUFFT(S_c x)}_c and its adjoint, on coil-major arrays (coil c's
// image at c * npix, its samples at c * m). Pointers in the stream's memory.
// CombineCoils sums coils in index order (deterministic in both backends).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_MRI_COIL_OPS_H_
#define TESSERA_KERNELS_RECONSTRUCTION_MRI_COIL_OPS_H_

#include <complex>
#include <cstdint>

#include "absl/status/status.h"
#include "common/device.h"

namespace tessera {
namespace recon {
namespace mri {

// out[c npix + p] = maps[c npix + p] * x[p]
absl::Status ExpandCoils(const Stream& stream, int coils, int64_t npix, const std::complex<float>* maps,
                         const std::complex<float>* x, std::complex<float>* out);
// x[p] = sum_c conj(maps[c npix + p]) * in[c npix + p]
absl::Status CombineCoils(const Stream& stream, int coils, int64_t npix, const std::complex<float>* maps,
                          const std::complex<float>* in, std::complex<float>* x);
// data[c m + j] *= weights[j]   (density compensation, broadcast over coils)
absl::Status WeightSamples(const Stream& stream, int coils, int64_t m, const float* weights, std::complex<float>* data);

namespace cpu {
void ExpandCoils(int coils, int64_t npix, const std::complex<float>* maps, const std::complex<float>* x,
                 std::complex<float>* out);
void CombineCoils(int coils, int64_t npix, const std::complex<float>* maps, const std::complex<float>* in,
                  std::complex<float>* x);
void WeightSamples(int coils, int64_t m, const float* weights, std::complex<float>* data);
}  // namespace cpu

namespace cuda {
absl::Status ExpandCoils(const Stream& stream, int coils, int64_t npix, const std::complex<float>* maps,
                         const std::complex<float>* x, std::complex<float>* out);
absl::Status CombineCoils(const Stream& stream, int coils, int64_t npix, const std::complex<float>* maps,
                          const std::complex<float>* in, std::complex<float>* x);
absl::Status WeightSamples(const Stream& stream, int coils, int64_t m, const float* weights, std::complex<float>* data);
}  // namespace cuda

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_COIL_OPS_H_

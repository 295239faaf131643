// The interface an iterative MRI solver needs of an encoding operator E
// (image -> multi-coil k-space), so CG-SENSE and compressed sensing run
// unchanged on the non-Cartesian SenseOperator (NUFFT, 2-D or 3-D,
// sense_operator.h) and the Cartesian one (FFT + sampling mask,
// cartesian_operator.h).
//
// Pointers are in the memory of the operator's stream (host for CPU streams,
// device for CUDA streams); images hold pixels() values, k-space
// kspace_size() values. Not thread-safe (operators own scratch).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_MRI_ENCODING_OPERATOR_H_
#define TESSERA_KERNELS_RECONSTRUCTION_MRI_ENCODING_OPERATOR_H_

#include <complex>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera {
namespace recon {
namespace mri {

class EncodingOperator {
 public:
  virtual ~EncodingOperator() = default;

  // kspace = E x.
  virtual absl::Status Forward(const std::complex<float>* x, std::complex<float>* kspace) = 0;
  // x = E^H W kspace (W: density weights or the sampling mask; kspace is not
  // modified).
  virtual absl::Status Adjoint(const std::complex<float>* kspace, std::complex<float>* x) = 0;
  // out = E^H W E x (out may not alias x).
  virtual absl::Status Normal(const std::complex<float>* x, std::complex<float>* out) = 0;

  // Image values (nx ny nz).
  virtual int64_t pixels() const = 0;
  // k-space values Forward writes (coils x samples).
  virtual int64_t kspace_size() const = 0;
  // The diagonal of E^H W E for maps normalised to sum_c |S_c|^2 = 1 (the sum
  // of the sample weights): what a relative regularisation weight is scaled
  // by, so the same lambda means the same balance at any size.
  virtual absl::StatusOr<double> NormalScale() const = 0;
};

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_ENCODING_OPERATOR_H_

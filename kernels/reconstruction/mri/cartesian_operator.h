// The Cartesian SENSE encoding operator (2-D or 3-D) for CG-SENSE on
// arbitrarily undersampled Cartesian k-space (issue 36):
//   E x = { M F (S_c . x) }_c      (coils x nz x ny x nx, BART's nx x ny x nz x coils)
// F the centred, unnormalised 3-D DFT (centered_fft.h: the NUFFT's sign and
// centring, so E of a volume of voxel values is what ellipsoid_phantom.h
// simulates at integer k), M a real sampling mask shared by the coils. Same
// interface as SenseOperator (encoding_operator.h): E^H E = F^H M F summed
// over coils has diagonal (sum of M) for normalised maps, the NormalScale
// that CgSense's relative lambda multiplies.
//
// The mask of measured data: SamplingMask marks a k-space location sampled
// when any coil has a non-zero value there (BART's convention for
// zero-filled k-space, as `bart pics` estimates its pattern); a location
// zero in every coil is unsampled. A real mask (weights) works too.
//
// Pointers in the stream's memory; maps and mask are referenced, not copied,
// and must outlive the operator. Create allocates coils x nx ny nz complex
// scratch (+ the FFT's work grids); Forward/Adjoint/Normal allocate nothing.
// Not thread-safe.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_MRI_CARTESIAN_OPERATOR_H_
#define TESSERA_KERNELS_RECONSTRUCTION_MRI_CARTESIAN_OPERATOR_H_

#include <complex>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/buffer.h"
#include "common/device.h"
#include "kernels/reconstruction/mri/centered_fft.h"
#include "kernels/reconstruction/mri/encoding_operator.h"

namespace tessera {
namespace recon {
namespace mri {

struct CartesianGeometry {
  int64_t nx = 0, ny = 0, nz = 1;
  int coils = 0;
  const std::complex<float>* maps = nullptr;  // coils x nz x ny x nx
  const float* mask = nullptr;                // nz x ny x nx (k-space, centred)
};

class CartesianSenseOperator : public EncodingOperator {
 public:
  // INVALID_ARGUMENT for nx, ny < 2, nz < 1, coils < 1 or null maps / mask.
  static absl::StatusOr<std::unique_ptr<CartesianSenseOperator>> Create(const Stream& stream,
                                                                        const CartesianGeometry& geometry);

  // kspace (coils x voxels) = M F S x.
  absl::Status Forward(const std::complex<float>* x, std::complex<float>* kspace) override;
  // x = S^H F^H M kspace.
  absl::Status Adjoint(const std::complex<float>* kspace, std::complex<float>* x) override;
  // out = S^H F^H M F S x.
  absl::Status Normal(const std::complex<float>* x, std::complex<float>* out) override;

  int64_t pixels() const override { return geometry_.nx * geometry_.ny * geometry_.nz; }
  int64_t kspace_size() const override { return geometry_.coils * pixels(); }
  // Sum of the mask.
  absl::StatusOr<double> NormalScale() const override;
  const CartesianGeometry& geometry() const { return geometry_; }

 private:
  CartesianSenseOperator(const Stream& stream, const CartesianGeometry& geometry)
      : stream_(stream), geometry_(geometry) {}

  const Stream& stream_;
  CartesianGeometry geometry_;
  std::unique_ptr<CenteredFft> fft_;
  std::shared_ptr<Buffer> scratch_;
  std::complex<float>* coil_images_ = nullptr;  // coils x voxels
};

// 1 where any of `coils` (coil-major, `voxels` each) is non-zero, else 0;
// host memory. Also returns how many locations are sampled in *sampled.
std::vector<float> SamplingMask(const std::complex<float>* kspace, int64_t voxels, int coils,
                                int64_t* sampled = nullptr);

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_CARTESIAN_OPERATOR_H_

// The non-Cartesian SENSE encoding operator on one stream:
//   E x = { NUFFT_type2(S_c . x) }_c      (coils x points)
// in 2-D (nz = 1, kz null) or 3-D (nz > 1 with kz: a 3-D NUFFT, used for 3-D
// radial "kooshball" trajectories; stack-of-stars data may instead go through
// sense_stack.h after an FFT along kz, stack_of_stars.h),
// with the NUFFT of nufft/nufft.h (sign -1 forward, +1 adjoint, so type 1 is
// E's exact adjoint up to the NUFFT tolerance), optional density weights W,
// and what CG-SENSE needs of it: the weighted adjoint E^H W y and the normal
// operator E^H W E x, through the NUFFT pair (type 2, weight, type 1) or,
// with use_toeplitz, through the Toeplitz embedding of each coil's A^H W A
// (nufft/toeplitz.h: pad, FFT, multiply, inverse FFT on the 2N grid; no
// spreading per iteration).
//
// Units: trajectory in 1/FOV (trajectory.h), converted to NUFFT coordinates
// 2 pi k / n here (n = nx, ny, nz per axis); no 1/sqrt(N) scaling, so E of an image of pixel values is
// the signal ellipse_phantom.h simulates (E^H E ~ (sum_j w_j) I for
// normalised maps).
//
// Plan/execute: Create copies the points into two NUFFT plans (ntransforms =
// coils), computes the Toeplitz kernel when asked, and allocates coils x
// (npix + points) complex scratch (+ coils x npix with Toeplitz); Forward,
// Adjoint and Normal allocate nothing. Pointers in the stream's memory; the maps and weights are
// referenced, not copied, and must outlive the operator. Not thread-safe.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_MRI_SENSE_OPERATOR_H_
#define TESSERA_KERNELS_RECONSTRUCTION_MRI_SENSE_OPERATOR_H_

#include <complex>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/buffer.h"
#include "common/device.h"
#include "kernels/reconstruction/execution_mode.h"
#include "kernels/reconstruction/mri/encoding_operator.h"
#include "kernels/reconstruction/nufft/nufft.h"
#include "kernels/reconstruction/nufft/toeplitz.h"

namespace tessera {
namespace recon {
namespace mri {

struct SenseGeometry {
  int64_t nx = 0, ny = 0;  // image
  int coils = 0;
  int64_t points = 0;                          // samples per coil
  const float* kx = nullptr;                   // points, 1/FOV units
  const float* ky = nullptr;
  const std::complex<float>* maps = nullptr;   // coils x nz x ny x nx
  const float* density_weights = nullptr;      // points, or null for W = I
  // 3-D (last so that 2-D aggregate initialisers stay valid): nz > 1 needs kz.
  int64_t nz = 1;
  const float* kz = nullptr;                   // points, 1/FOV units; null in 2-D
};

struct SenseOperatorOptions {
  double nufft_tolerance = 1e-5;
  double nufft_upsampling = 2.0;
  ExecutionMode mode = ExecutionMode::kDefault;
  bool use_toeplitz = false;  // Normal() through the Toeplitz embedding
};

class SenseOperator : public EncodingOperator {
 public:
  // INVALID_ARGUMENT for sizes < 1 (nx, ny >= 2; nz >= 2 when kz is set,
  // nz == 1 without kz), null trajectory or maps, or a NUFFT option the plan
  // refuses.
  static absl::StatusOr<std::unique_ptr<SenseOperator>> Create(const Stream& stream, const SenseGeometry& geometry,
                                                               const SenseOperatorOptions& options = {});
  // The operator keeps a reference to the stream: a temporary (Stream::Cpu())
  // would dangle, so it does not compile.
  static absl::StatusOr<std::unique_ptr<SenseOperator>> Create(const Stream&& stream, const SenseGeometry& geometry,
                                                               const SenseOperatorOptions& options = {}) = delete;
  SenseOperator(const SenseOperator&) = delete;
  SenseOperator& operator=(const SenseOperator&) = delete;

  // kspace (coils x points) = E x.
  absl::Status Forward(const std::complex<float>* x, std::complex<float>* kspace) override;
  // x = E^H W kspace (kspace is not modified).
  absl::Status Adjoint(const std::complex<float>* kspace, std::complex<float>* x) override;
  // out = E^H W E x (out may not alias x).
  absl::Status Normal(const std::complex<float>* x, std::complex<float>* out) override;

  // Points the operator at another set of coil maps of the same shape (the
  // next slice of a stack, sense_stack.h): the NUFFT plans and the Toeplitz
  // kernel depend on the trajectory and weights only, so they are reused.
  void SetMaps(const std::complex<float>* maps) { geometry_.maps = maps; }

  const SenseGeometry& geometry() const { return geometry_; }
  int64_t pixels() const override { return geometry_.nx * geometry_.ny * geometry_.nz; }
  int64_t kspace_size() const override { return geometry_.coils * geometry_.points; }
  // sum_j w_j (points without weights).
  absl::StatusOr<double> NormalScale() const override;

 private:
  SenseOperator(const Stream& stream, const SenseGeometry& geometry) : stream_(stream), geometry_(geometry) {}

  const Stream& stream_;
  SenseGeometry geometry_;
  std::unique_ptr<nufft::NufftPlan<float>> type2_, type1_;
  std::unique_ptr<nufft::ToeplitzOperator<float>> toeplitz_;  // with use_toeplitz
  std::shared_ptr<Buffer> scratch_;        // coil images, coil samples (, Toeplitz output)
  std::complex<float>* coil_images_ = nullptr;   // coils x npix
  std::complex<float>* coil_samples_ = nullptr;  // coils x points
  std::complex<float>* coil_normal_ = nullptr;   // coils x npix, Toeplitz only
};

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_SENSE_OPERATOR_H_

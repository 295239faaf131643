// CG-SENSE (Pruessmann et al. 2001; seed 001 section 2.2): the image x that
// solves the regularised, optionally density-weighted normal equations
//   (E^H W E + lambda' I) x = E^H W y
// for non-Cartesian multi-coil data y, by conjugate gradients
// (linalg::ConjugateGradientComplex) on the SenseOperator (sense_operator.h).
// The normal operator goes through the NUFFT pair (type 2, weight, type 1)
// or, with use_toeplitz, the Toeplitz embedding (nufft/toeplitz.h: kernel
// computed once, then FFTs only; faster per iteration, same solution to
// ~10 x the NUFFT tolerance).
//
// lambda is relative: lambda' = lambda * sum_j w_j (w = 1 without weights),
// the diagonal of E^H W E for maps normalised to sum_c |S_c|^2 = 1, so the
// same lambda means the same balance at any matrix size or sample count.
// With W = density weights the iteration converges faster (a preconditioner)
// but minimises the weighted residual.
//
//   SenseGeometry g{nx, ny, coils, m, kx, ky, maps, /*density_weights=*/nullptr};
//   CgSenseOptions options;  options.iterations = 20;  options.lambda = 1e-4;
//   auto result = CgSense(stream, g, kspace, options, image);
//
// 3-D (geometry.nz > 1 with kz) runs the same on a 3-D NUFFT; images are then
// nx x ny x nz. Pointers are in the stream's memory; image (nx x ny) is overwritten (CG
// starts from 0). Errors: those of SenseOperator::Create and
// ConjugateGradientComplex (INVALID_ARGUMENT for iterations < 1, a negative
// or non-finite lambda or tolerance; whatever the progress callback returns,
// CANCELLED for example, with `image` holding the last iterate).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_MRI_CG_SENSE_H_
#define TESSERA_KERNELS_RECONSTRUCTION_MRI_CG_SENSE_H_

#include <complex>
#include <functional>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/reconstruction/linalg/conjugate_gradient.h"
#include "kernels/reconstruction/mri/encoding_operator.h"
#include "kernels/reconstruction/mri/sense_operator.h"

namespace tessera {
namespace recon {
namespace mri {

struct CgSenseOptions {
  int iterations = 20;
  double lambda = 0;         // relative Tikhonov weight (see above), >= 0
  double tolerance = 1e-6;   // stop once ||r|| <= tolerance ||E^H W y||
  bool use_toeplitz = false;  // overrides nufft.use_toeplitz
  SenseOperatorOptions nufft;
  // After each iteration; a non-OK status stops the solve and is returned.
  std::function<absl::Status(int iteration, int total, double relative_residual)> progress;
};

struct CgSenseResult {
  linalg::CgResult cg;
  double lambda_absolute = 0;  // lambda' used
};

absl::StatusOr<CgSenseResult> CgSense(const Stream& stream, const SenseGeometry& geometry,
                                      const std::complex<float>* kspace, const CgSenseOptions& options,
                                      std::complex<float>* image);

// The same on an operator made beforehand (SenseOperator::Create with
// options.nufft and options.use_toeplitz, which are not read here), so a stack
// of slices sharing one trajectory pays the plans and Toeplitz kernel once
// (sense_stack.h). Bit-identical to the call above for the same operator.
absl::StatusOr<CgSenseResult> CgSense(const Stream& stream, SenseOperator& op, const std::complex<float>* kspace,
                                      const CgSenseOptions& options, std::complex<float>* image);

// The same on any encoding operator (encoding_operator.h: the 3-D Cartesian
// operator of cartesian_operator.h, for one), lambda' = lambda x
// op.NormalScale(). The SenseOperator overload above calls this one.
absl::StatusOr<CgSenseResult> CgSense(const Stream& stream, EncodingOperator& op, const std::complex<float>* kspace,
                                      const CgSenseOptions& options, std::complex<float>* image);

// The adjoint ("gridding") reconstruction x = E^H W y / (nx ny): with
// density weights in area units (density_compensation.h) an image on the
// phantom's scale, the baseline CG-SENSE improves on.
absl::Status AdjointSense(const Stream& stream, const SenseGeometry& geometry, const std::complex<float>* kspace,
                          const SenseOperatorOptions& options, std::complex<float>* image);
absl::Status AdjointSense(const Stream& stream, SenseOperator& op, const std::complex<float>* kspace,
                          std::complex<float>* image);
absl::Status AdjointSense(const Stream& stream, EncodingOperator& op, const std::complex<float>* kspace,
                          std::complex<float>* image);

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_CG_SENSE_H_

#include "kernels/reconstruction/mri/cs_sense.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/reconstruction/regularizers/tv.h"
#include "kernels/reconstruction/solvers/fista.h"
#include "kernels/reconstruction/vector_ops.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

using Complex = std::complex<float>;

absl::Status CheckArguments(const CsSenseOptions& options, const std::complex<float>* kspace,
                            const std::complex<float>* image) {
  if (options.iterations < 1) {
    return absl::InvalidArgumentError(absl::StrCat("CS-SENSE: iterations = ", options.iterations, " < 1"));
  }
  if (!(options.lambda >= 0) || !std::isfinite(options.lambda)) {
    return absl::InvalidArgumentError(absl::StrCat("CS-SENSE: lambda = ", options.lambda, " is not finite and >= 0"));
  }
  if (options.regularizer == CsRegularizer::kTv && options.tv_iterations < 1) {
    return absl::InvalidArgumentError(absl::StrCat("CS-SENSE: tv_iterations = ", options.tv_iterations, " < 1"));
  }
  if (!(options.lipschitz >= 0) || !std::isfinite(options.lipschitz)) {
    return absl::InvalidArgumentError(absl::StrCat("CS-SENSE: lipschitz = ", options.lipschitz, " is not finite and >= 0"));
  }
  if (options.lipschitz == 0 && options.power_iterations < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("CS-SENSE: power_iterations = ", options.power_iterations, " < 1"));
  }
  if (kspace == nullptr || image == nullptr) return absl::InvalidArgumentError("CS-SENSE: kspace or image is null");
  return absl::OkStatus();
}

// The prox of step * lambda' R on the image (interleaved floats).
using Prox = std::function<absl::Status(double step, float* x)>;

absl::StatusOr<Prox> MakeProx(const Stream& stream, const CsImageShape& shape, const CsSenseOptions& options,
                              double lambda) {
  if (options.regularizer == CsRegularizer::kL1Wavelet) {
    const regularizers::WaveletShape ws{shape.nx, shape.ny, shape.nz, options.wavelet, options.wavelet_min_size};
    TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<regularizers::WaveletProx> wavelet,
                             regularizers::WaveletProx::Create(stream, ws, options.seed, options.random_shift,
                                                                               options.shifts_per_iteration));
    std::shared_ptr<regularizers::WaveletProx> shared = std::move(wavelet);
    return Prox([shared, lambda](double step, float* x) {
      return shared->Apply(static_cast<float>(step * lambda), reinterpret_cast<Complex*>(x));
    });
  }
  const regularizers::TvShape ts{shape.nx, shape.ny, shape.nz, /*channels=*/2};
  TESSERA_ASSIGN_OR_RETURN(regularizers::TvProxPlan plan, regularizers::TvProxPlan::Create(stream, ts));
  auto shared = std::make_shared<regularizers::TvProxPlan>(std::move(plan));
  const int tv_iterations = options.tv_iterations;
  return Prox([shared, lambda, tv_iterations](double step, float* x) {
    regularizers::TvProxOptions tv;
    tv.weight = step * lambda;
    tv.iterations = tv_iterations;
    return shared->Apply(tv, x);
  });
}

}  // namespace

double BartScale(const std::complex<float>* image, int64_t n) {
  if (n <= 0) return 1;
  std::vector<float> mag(n);
  for (int64_t i = 0; i < n; ++i) mag[i] = std::abs(image[i]);
  auto at = [&](int64_t k) {
    std::nth_element(mag.begin(), mag.begin() + k, mag.end());
    return static_cast<double>(mag[k]);
  };
  const double max = *std::max_element(mag.begin(), mag.end());
  const double p90 = at(static_cast<int64_t>(n * 0.9));
  const double median = at(n / 2);
  const double scale = (max - p90) < 2 * (p90 - median) ? p90 : max;
  return scale > 0 ? scale : 1;
}

absl::StatusOr<CsSenseResult> CsSense(const Stream& stream, EncodingOperator& op, const CsImageShape& shape,
                                      const std::complex<float>* kspace, const CsSenseOptions& options,
                                      std::complex<float>* image) {
  TESSERA_RETURN_IF_ERROR(CheckArguments(options, kspace, image));
  if (shape.nx < 1 || shape.ny < 1 || shape.nz < 1 || shape.nx * shape.ny * shape.nz != op.pixels()) {
    return absl::InvalidArgumentError(absl::StrCat("CS-SENSE: image shape ", shape.nx, " x ", shape.ny, " x ",
                                                   shape.nz, " does not match the operator's ", op.pixels(),
                                                   " pixels"));
  }
  const int64_t npix = op.pixels();
  CsSenseResult result;

  // rhs = E^H y, and BART's data scale from its magnitudes.
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> rhs_buffer,
                           Buffer::Allocate(MemoryKindFor(stream), npix * sizeof(Complex), stream.ordinal()));
  auto* rhs = static_cast<Complex*>(rhs_buffer->data());
  TESSERA_RETURN_IF_ERROR(op.Adjoint(kspace, rhs));
  std::vector<Complex> host_rhs(npix);
  TESSERA_RETURN_IF_ERROR(
      CopyBytes(host_rhs.data(), MemoryKind::kHost, rhs, MemoryKindFor(stream), npix * sizeof(Complex), stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  result.data_scale = BartScale(host_rhs.data(), npix);
  result.lambda_absolute = options.lambda * result.data_scale;

  auto normal = [&](const float* x, float* out) -> absl::Status {
    return op.Normal(reinterpret_cast<const Complex*>(x), reinterpret_cast<Complex*>(out));
  };
  if (options.lipschitz > 0) {
    result.lipschitz = options.lipschitz;
  } else {
    TESSERA_ASSIGN_OR_RETURN(const solvers::LipschitzEstimate estimate,
                             solvers::EstimateLipschitzWithResidual(stream, 2 * npix, normal, options.power_iterations));
    // The Rayleigh quotient approaches from below: widen it by the residual
    // (or, as before, by a fixed 5 %).
    result.lipschitz = options.residual_step_bound ? estimate.bound() : 1.05 * estimate.rayleigh;
  }
  if (!(result.lipschitz > 0)) return absl::InvalidArgumentError("CS-SENSE: the normal operator is zero");

  TESSERA_ASSIGN_OR_RETURN(Prox prox, MakeProx(stream, shape, options, result.lambda_absolute));
  solvers::FistaProblem problem;
  problem.size = 2 * npix;
  problem.step = 1.0 / result.lipschitz;
  problem.gradient = [&](const float* x, float* g) -> absl::Status {
    TESSERA_RETURN_IF_ERROR(normal(x, g));
    return Axpy(stream, -1.f, reinterpret_cast<const float*>(rhs), g, 2 * npix);
  };
  problem.prox = prox;
  solvers::FistaOptions fista;
  fista.iterations = options.iterations;
  fista.adaptive_restart = options.adaptive_restart;
  fista.progress = options.progress;
  float* x = reinterpret_cast<float*>(image);
  TESSERA_RETURN_IF_ERROR(Fill(stream, x, 2 * npix, 0.f));
  TESSERA_ASSIGN_OR_RETURN(result.fista, solvers::Fista(stream, problem, fista, x));
  return result;
}

absl::StatusOr<CsSenseResult> CsSense(const Stream& stream, const SenseGeometry& geometry,
                                      const std::complex<float>* kspace, const CsSenseOptions& options,
                                      std::complex<float>* image, SenseOperatorOptions operator_options) {
  TESSERA_RETURN_IF_ERROR(CheckArguments(options, kspace, image));
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<SenseOperator> op,
                           SenseOperator::Create(stream, geometry, operator_options));
  return CsSense(stream, *op, CsImageShape{geometry.nx, geometry.ny, geometry.nz}, kspace, options, image);
}

}  // namespace mri
}  // namespace recon
}  // namespace tessera

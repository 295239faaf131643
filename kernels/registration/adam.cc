// Argument checks and backend dispatch for AdamStep.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/registration/adam.h"
#include "kernels/registration/adam_internal.h"
#include "kernels/registration/reg_checks.h"

namespace tessera {
namespace registration {

absl::Status AdamStep(NDArray& param, const NDArray& grad, NDArray& m, NDArray& v, const AdamOptions& o,
                      int64_t t, const Stream& stream) {
  using namespace reg_internal;  // NOLINT
  if (t < 1) return absl::InvalidArgumentError(absl::StrCat("AdamStep: step t must be >= 1, got ", t));
  if (!(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1) || !(o.eps > 0) || !std::isfinite(o.lr)) {
    return absl::InvalidArgumentError("AdamStep: need 0 <= beta1, beta2 < 1, eps > 0 and a finite lr");
  }
  const NDArray* arrays[] = {&param, &grad, &m, &v};
  const char* names[] = {"param", "grad", "m", "v"};
  for (int i = 0; i < 4; ++i) {
    TESSERA_RETURN_IF_ERROR(CheckArray(*arrays[i], names[i], DType::kFloat32));
    TESSERA_RETURN_IF_ERROR(CheckResidency(*arrays[i], names[i], stream));
    if (arrays[i]->num_elements() != param.num_elements()) {
      return absl::InvalidArgumentError(absl::StrCat("AdamStep: ", names[i], " has ", arrays[i]->num_elements(),
                                                     " elements, param ", param.num_elements()));
    }
    for (int j = 0; j < i; ++j) {
      if (arrays[i]->num_elements() > 0 && arrays[i]->raw_data() == arrays[j]->raw_data()) {
        return absl::InvalidArgumentError(absl::StrCat("AdamStep: ", names[i], " aliases ", names[j]));
      }
    }
  }
  const int64_t n = param.num_elements();
  if (n == 0) return absl::OkStatus();
  adam_internal::AdamCoefficients c;
  const double bc1 = 1.0 - std::pow(o.beta1, double(t));
  const double bc2 = 1.0 - std::pow(o.beta2, double(t));
  c.beta1 = float(o.beta1);
  c.one_minus_beta1 = float(1.0 - o.beta1);
  c.beta2 = float(o.beta2);
  c.one_minus_beta2 = float(1.0 - o.beta2);
  c.step = float(o.lr / bc1);
  c.inv_sqrt_bc2 = float(1.0 / std::sqrt(bc2));
  c.eps = float(o.eps);
  if (stream.backend() == Backend::kCpu) {
    adam_internal::AdamCpu(param.data<float>(), grad.data<float>(), m.data<float>(), v.data<float>(), n, c);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return adam_internal::AdamCuda(param.data<float>(), grad.data<float>(), m.data<float>(), v.data<float>(), n, c,
                                 stream);
#else
  return CudaUnavailable("AdamStep");
#endif
}

}  // namespace registration
}  // namespace tessera

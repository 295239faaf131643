#include "kernels/reconstruction/nufft/nufft_setup.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace tessera {
namespace recon {
namespace nufft {

NufftKernelInfo NufftSetup::info() const {
  NufftKernelInfo i;
  i.width = kernel.width;
  i.beta = kernel.beta;
  i.fine_grid = fine;
  return i;
}

absl::StatusOr<NufftSetup> MakeNufftSetup(NufftType type, std::array<int64_t, 3> modes, const NufftOptions& options,
                                          size_t element_bytes, size_t max_grid_bytes) {
  if (type != NufftType::kType1 && type != NufftType::kType2) {
    return absl::InvalidArgumentError(absl::StrCat("nufft: type must be 1 or 2, got ", static_cast<int>(type)));
  }
  const char* names[3] = {"modes[0]", "modes[1]", "modes[2]"};
  for (int a = 0; a < 2; ++a) {
    if (modes[a] < 2) {
      return absl::InvalidArgumentError(absl::StrCat("nufft: ", names[a], " must be >= 2, got ", modes[a]));
    }
  }
  if (modes[2] < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("nufft: modes[2] must be 1 (2-D) or >= 2 (3-D), got ", modes[2]));
  }
  if (options.sign != 0 && options.sign != 1 && options.sign != -1) {
    return absl::InvalidArgumentError(absl::StrCat("nufft: sign must be 0, +1 or -1, got ", options.sign));
  }
  if (options.ntransforms < 1) {
    return absl::InvalidArgumentError(absl::StrCat("nufft: ntransforms must be >= 1, got ", options.ntransforms));
  }
  NufftSetup s;
  s.type = type;
  s.dim = modes[2] == 1 ? 2 : 3;
  s.modes = modes;
  s.options = options;
  if (s.options.sign == 0) s.options.sign = type == NufftType::kType1 ? 1 : -1;
  TESSERA_ASSIGN_OR_RETURN(s.kernel, ChooseEsKernel(options.tolerance, options.upsampling));
  double bytes = static_cast<double>(element_bytes);
  for (int a = 0; a < s.dim; ++a) {
    if (modes[a] > (int64_t{1} << 28)) {
      return absl::ResourceExhaustedError(absl::StrCat("nufft: ", names[a], " = ", modes[a], " is too large"));
    }
    s.fine[a] = FineGridSize(modes[a], options.upsampling, s.kernel.width);
    bytes *= static_cast<double>(s.fine[a]);
  }
  if (bytes > static_cast<double>(max_grid_bytes)) {
    return absl::ResourceExhaustedError(absl::StrCat("nufft: the fine grid ", s.fine[0], " x ", s.fine[1], " x ",
                                                     s.fine[2], " needs ", bytes, " bytes, over the limit of ",
                                                     max_grid_bytes));
  }
  for (int a = 0; a < 3; ++a) {
    const int64_t n = modes[a], nf = s.fine[a];
    s.deconv[a].assign(n, 1.0);
    s.fine_index[a].assign(n, 0);
    if (a >= s.dim) continue;
    const std::vector<double> phihat = EsKernelFourierSeries(s.kernel, nf);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t k = i - n / 2;
      s.deconv[a][i] = 1.0 / phihat[std::llabs(k)];
      s.fine_index[a][i] = k < 0 ? k + nf : k;
    }
  }
  return s;
}

}  // namespace nufft
}  // namespace recon
}  // namespace tessera

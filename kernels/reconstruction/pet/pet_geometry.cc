#include "kernels/reconstruction/pet/pet_geometry.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera {
namespace recon {
namespace pet {

absl::Status Validate(const PetGeometry& g) {
  if (absl::Status s = recon::Validate(g.ct); !s.ok()) return s;
  const TofSpec& t = g.tof;
  if (t.num_bins < 1 || t.num_bins > kMaxTofBins) {
    return absl::InvalidArgumentError(
        absl::StrCat("tof.num_bins must be in [1, ", kMaxTofBins, "], got ", t.num_bins));
  }
  if (!t.enabled()) return absl::OkStatus();
  if (!std::isfinite(t.bin_mm) || t.bin_mm <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("tof.bin_mm must be finite and > 0, got ", t.bin_mm));
  }
  if (!std::isfinite(t.fwhm_mm) || t.fwhm_mm <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("tof.fwhm_mm must be finite and > 0, got ", t.fwhm_mm));
  }
  return absl::OkStatus();
}

std::string Describe(const PetGeometry& g) {
  std::string out = recon::Describe(g.ct);
  if (g.tof.enabled()) {
    absl::StrAppend(&out, absl::StrFormat("; TOF %d bins of %.4g mm, FWHM %.4g mm", g.tof.num_bins, g.tof.bin_mm,
                                          g.tof.fwhm_mm));
  } else {
    absl::StrAppend(&out, "; no TOF");
  }
  return out;
}

}  // namespace pet
}  // namespace recon
}  // namespace tessera

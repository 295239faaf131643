// Ultrasound test data with a known answer (the `tessera phantom us` verb and
// the demo): a linear array imaging point targets, or point targets beside an
// anechoic cyst in speckle, simulated analytically
// (kernels/reconstruction/ultrasound/simulator.h).
//   points  five targets on a diagonal 12..32 mm deep (resolution: FWHM)
//   cyst    a 3 mm anechoic cyst at 22 mm in speckle, two targets beside it
//           (contrast)
#ifndef TESSERA_SERVICES_RECONSTRUCTION_PHANTOMS_ULTRASOUND_PHANTOM_H_
#define TESSERA_SERVICES_RECONSTRUCTION_PHANTOMS_ULTRASOUND_PHANTOM_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/reconstruction/ultrasound/acquisition.h"
#include "kernels/reconstruction/ultrasound/simulator.h"

namespace tessera::recon::phantoms {

struct UltrasoundPhantomOptions {
  std::string kind = "points";   // "points" or "cyst"
  int channels = 128;            // 0.3 mm pitch, 5 MHz
  int transmits = 11;            // plane waves over +-10 degrees; 1: one 0-degree wave
  bool synthetic_aperture = false;  // every element fires once instead
  bool iq = true;                // IQ at 4 fc, else RF at 4 fc
  double noise = 1e-3;           // relative to the largest sample
  uint32_t seed = 1;
};

struct UltrasoundPhantom {
  ultrasound::Acquisition acquisition;
  std::vector<ultrasound::Scatterer> targets;  // the point targets (not the speckle)
  std::vector<ultrasound::Cyst> cysts;
};

// INVALID_ARGUMENT naming the option (unknown kind, channels outside
// 2..1024, transmits outside 1..128, negative noise).
absl::StatusOr<UltrasoundPhantom> MakeUltrasoundPhantom(const UltrasoundPhantomOptions& options);

}  // namespace tessera::recon::phantoms

#endif  // TESSERA_SERVICES_RECONSTRUCTION_PHANTOMS_ULTRASOUND_PHANTOM_H_

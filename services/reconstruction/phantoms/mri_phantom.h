// MRI test data with a known answer (the `tessera phantom mri` verb and the
// demo): the modified Shepp-Logan head seen by a birdcage coil array, its
// k-space computed exactly from the ellipses' spectra and the coil maps'
// band-limited Fourier series (kernels/reconstruction/mri/ellipse_phantom.h:
// no gridding, no inverse crime), in BART's layouts (formats/cfl.h):
//   radial     golden-angle radial, 2n samples per spoke: kspace
//              1 x 2n x spokes x coils, trajectory 3 x 2n x spokes (1/FOV)
//   cartesian  every R-th phase-encoding line (y) kept, the rest zero:
//              kspace n x n x 1 x coils
// plus the coil maps (n x n x 1 x coils) and the truth (the phantom averaged
// over each pixel, n x n).
#ifndef TESSERA_SERVICES_RECONSTRUCTION_PHANTOMS_MRI_PHANTOM_H_
#define TESSERA_SERVICES_RECONSTRUCTION_PHANTOMS_MRI_PHANTOM_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "services/reconstruction/formats/cfl.h"

namespace tessera::recon::phantoms {

struct MriPhantomOptions {
  std::string kind = "radial";  // "radial" or "cartesian"
  int64_t size = 128;           // image n x n, 8..1024
  int64_t spokes = 0;           // radial; 0: n / 2 (undersampled by pi)
  int coils = 8;                // 1..32
  int acceleration = 2;         // cartesian: R, 1..8, dividing n
};

struct MriPhantom {
  formats::CflArray kspace, trajectory, maps, truth;  // trajectory empty (no data) for cartesian
};

// INVALID_ARGUMENT naming the option that is out of range.
absl::StatusOr<MriPhantom> MakeMriPhantom(const MriPhantomOptions& options);

// Writes <dir>/kspace, traj (radial), coils and truth as .cfl/.hdr pairs.
absl::Status WriteMriPhantom(const MriPhantom& phantom, const std::string& dir);

}  // namespace tessera::recon::phantoms

#endif  // TESSERA_SERVICES_RECONSTRUCTION_PHANTOMS_MRI_PHANTOM_H_

// PET data corrections (issue 36) read from their NIfTI sinograms and checked
// against the geometry, for the run and for submit-time checks. The model is
//   expected counts = normalization * attenuation factors * (A x) + randoms + scatter
// (PetOptions in protos/tessera/v1/reconstruction.proto). The files have the
// counts' shape without a TOF axis; with TOF the additive terms are spread
// evenly over the K bins of their LOR, and the efficiency applies to every bin.
#ifndef TESSERA_SERVICES_RECONSTRUCTION_PET_CORRECTIONS_H_
#define TESSERA_SERVICES_RECONSTRUCTION_PET_CORRECTIONS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "common/ndarray.h"
#include "kernels/reconstruction/pet/pet_geometry.h"
#include "services/reconstruction/reconstruction_request.h"

namespace tessera::reconstruction {

struct PetCorrections {
  // Per LOR (c + cols * (r + rows * view)): normalization (> 0); empty: none.
  std::vector<float> efficiency;
  // Host float32, one value per sinogram element (pet_geometry.h layout, TOF
  // bins included): (randoms + scatter) / K; empty: neither file given.
  NDArray background;
};

// Reads spec's randoms_path, scatter_path and normalization_path (those not
// empty). INVALID_ARGUMENT naming the field ("pet.normalization: n.nii.gz:
// value 0 at bin 123 (col 3, projection 1); efficiencies must be > 0") for a
// shape other than the geometry's sinogram without TOF axis, a non-finite
// value, negative randoms or scatter, or a normalization <= 0; NOT_FOUND /
// DATA_LOSS from the reader.
absl::StatusOr<PetCorrections> ReadPetCorrections(const PetSpec& spec, const recon::pet::PetGeometry& geometry);

}  // namespace tessera::reconstruction

#endif  // TESSERA_SERVICES_RECONSTRUCTION_PET_CORRECTIONS_H_

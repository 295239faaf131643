// ISMRMRD raw data (HDF5, the format scanner converters and Gadgetron write)
// read through libismrmrd into the BART-convention arrays of cfl.h, so an
// ISMRMRD file and a set of .cfl files feed the same MRI reconstructions.
//
// What is read: the XML header's first encoding (encoded-space matrix and
// field of view) and every acquisition of the group, except noise
// measurements, navigator and phase-correction readouts (counted as skipped).
//   Cartesian (no acquisition has a trajectory): k-space nx x ny x nz x coils
//     (matrix of the encoded space), zero where no line was acquired. Readout
//     sample s lands at x = s - center_sample + nx/2 (samples falling outside
//     are dropped: readout oversampling), line (step1, step2) at
//     y = step1 - center1 + ny/2, z = step2 - center2 + nz/2 with the centres
//     of the header's encoding limits (nx/2 ... when absent).
//   Non-Cartesian (every acquisition has 2 or 3 trajectory dimensions):
//     k-space 1 x samples x readouts x coils, trajectory 3 x samples x
//     readouts in BART units (1/FOV); readouts in file order.
// ISMRMRD leaves trajectory units to the writer: the default reads them as
// fractions of the matrix ([-0.5, 0.5), Gadgetron's convention) and
// multiplies by the matrix size; kCyclesPerFov takes them as they are.
//
// Non-Cartesian stacks (issue 40): acquisitions with several slice and/or
// repetition indices give k-space 1 x samples x readouts x coils with
// SLICE_DIM 13 = slices and TIME_DIM 10 = repetitions (each image's readouts
// in file order); every (slice, repetition) must have the same readouts on the
// same trajectory (returned once), else INVALID_ARGUMENT naming them.
// Supported: one contrast, phase, set and average, one slice and repetition
// for Cartesian data (any other index is INVALID_ARGUMENT naming the
// acquisition), one channel count and (non-Cartesian) one readout length. Errors: NOT_FOUND for a missing
// file; INVALID_ARGUMENT for a file libismrmrd/HDF5 cannot open, a missing or
// unparsable header, no acquisitions, or inconsistent acquisitions; messages
// start with the path.
#ifndef TESSERA_SERVICES_RECONSTRUCTION_FORMATS_ISMRMRD_READER_H_
#define TESSERA_SERVICES_RECONSTRUCTION_FORMATS_ISMRMRD_READER_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "services/reconstruction/formats/cfl.h"

namespace tessera::recon::formats {

enum class IsmrmrdTrajectoryUnits { kFractionOfMatrix, kCyclesPerFov };

struct IsmrmrdReadOptions {
  std::string group = "dataset";  // HDF5 group holding the dataset
  IsmrmrdTrajectoryUnits trajectory_units = IsmrmrdTrajectoryUnits::kFractionOfMatrix;
};

struct IsmrmrdRawData {
  bool cartesian = true;
  std::array<int64_t, 3> matrix = {1, 1, 1};  // encoded space
  std::array<double, 3> fov_mm = {0, 0, 0};   // encoded space
  int coils = 0;
  CflArray kspace;      // BART layout (see above)
  CflArray trajectory;  // 3 x samples x readouts (non-Cartesian); no data when Cartesian
  int64_t acquisitions_read = 0;
  int64_t acquisitions_skipped = 0;  // noise, navigator, phase correction
};

absl::StatusOr<IsmrmrdRawData> ReadIsmrmrd(const std::string& path, const IsmrmrdReadOptions& options = {});

}  // namespace tessera::recon::formats

#endif  // TESSERA_SERVICES_RECONSTRUCTION_FORMATS_ISMRMRD_READER_H_

// One reconstruction, start to end, as plain C++: read the geometry and the
// measurements, reconstruct on the requested backend (CT: FBP/FDK, SART,
// OS-SART, CGLS; PET: MLEM/OSEM from a sinogram or list-mode events), write
// reconstruction.nii.gz (affine = the geometry's world coordinates) into the
// work directory (and output_dir), and summarise. The engine
// (reconstruction_engine.h) and `tessera recon` both run it.
// Stacks (issue 40): a 2-D geometry with a sinogram of (cols, projections,
// slices) reconstructs every slice with one plan / projector into nx x ny x
// slices (z stacked around the 2-D slab); PET takes one attenuation map for
// all slices or nx x ny x slices, and no corrections, TOF or list-mode. MRI
// stacks: mri_run.h.
#ifndef TESSERA_SERVICES_RECONSTRUCTION_RECONSTRUCTION_RUN_H_
#define TESSERA_SERVICES_RECONSTRUCTION_RECONSTRUCTION_RUN_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/jobs/job_types.h"
#include "services/reconstruction/reconstruction_request.h"
#include "tessera/v1/reconstruction.pb.h"

namespace tessera::reconstruction {

struct ReconRunContext {
  std::string work_dir;                                  // existing, empty directory
  std::function<void(const jobs::JobProgress&)> report;  // may be empty
  // OK to go on; CANCELLED / DEADLINE_EXCEEDED stops between iterations.
  std::function<absl::Status()> check_continue;          // may be empty
};

struct ReconOutcome {
  v1::ReconstructionResult result;
  std::vector<std::string> work_files;  // names under work_dir
};

// The inputs' cheap checks, for submit time: the geometry parses and is
// valid, the sinogram's NIfTI header (or the list-mode header) matches it,
// the attenuation map matches vol_geom, the method suits the geometry (fdk
// needs a cone beam). INVALID_ARGUMENT naming the field otherwise.
absl::Status CheckReconInputs(const ReconSpec& spec);

// Runs it. Values are checked as they are read (NaN, negative counts:
// INVALID_ARGUMENT naming the first bad index).
absl::StatusOr<ReconOutcome> RunReconstruction(const ReconSpec& spec, const ReconRunContext& ctx);

}  // namespace tessera::reconstruction

#endif  // TESSERA_SERVICES_RECONSTRUCTION_RECONSTRUCTION_RUN_H_

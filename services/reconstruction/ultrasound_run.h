// Ultrasound jobs of the reconstruction engine (issue 12): read the channel
// data (PICMUS HDF5, formats/ultrasound_h5.h, or USTB .uff, formats/
// ultrasound_uff.h, told apart by content), beamform one frame by
// delay-and-sum or minimum variance (kernels/reconstruction/ultrasound/
// beamform.h) on the job's backend, and write the log-compressed B-mode as
// reconstruction.nii.gz (dB, formats/ultrasound_image.h) and
// reconstruction.png.
//
// spec.deterministic holds without a switch: the beamformers have no atomics
// and sum every pixel in a fixed order, so CPU images do not depend on the
// thread count (beamform_determinism_test) and two CUDA runs are
// bit-identical (beamform_cuda_test); the result reports the flag as asked.
#ifndef TESSERA_SERVICES_RECONSTRUCTION_ULTRASOUND_RUN_H_
#define TESSERA_SERVICES_RECONSTRUCTION_ULTRASOUND_RUN_H_

#include "absl/status/status.h"
#include "common/device.h"
#include "services/reconstruction/reconstruction_request.h"
#include "services/reconstruction/reconstruction_run.h"

namespace tessera::reconstruction {

// Reads the file and checks it with the options (subarray <= channels, a
// valid grid): INVALID_ARGUMENT / NOT_FOUND / DATA_LOSS naming the field.
absl::Status CheckUltrasoundInputs(const ReconSpec& spec);

// Beamforms into ctx.work_dir; fills `out` (work files, result fields of the
// image) but not the common fields RunReconstruction sets.
absl::Status RunUltrasound(const ReconSpec& spec, const ReconRunContext& ctx, const Stream& stream,
                           ReconOutcome* out);

}  // namespace tessera::reconstruction

#endif  // TESSERA_SERVICES_RECONSTRUCTION_ULTRASOUND_RUN_H_

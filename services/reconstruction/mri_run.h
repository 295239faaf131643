// MRI jobs of the reconstruction engine (issue 12): read k-space, trajectory
// and coil maps (BART .cfl/.hdr pairs or one ISMRMRD .h5: formats/cfl.h,
// formats/ismrmrd_reader.h), reconstruct a 2-D image on the job's backend
//   adjoint  density-compensated NUFFT adjoint (Pipe-Menon weights); with
//            coil maps the coil-combined image, without them the
//            root-sum-of-squares of the coil images
//   cgsense  CG-SENSE (kernels/reconstruction/mri/cg_sense.h), the Toeplitz
//            normal operator unless no_toeplitz
//   sense    Cartesian SENSE unfolding (kernels/reconstruction/mri/cartesian_sense.h)
// and write |image| as reconstruction.nii.gz and the complex image as
// reconstruction.cfl/.hdr (BART's image layout nx x ny x 1).
//
// Stacks (issue 40; adjoint and cgsense on .cfl or ISMRMRD slices /
// repetitions, sense on Cartesian .cfl, image by image): k-space with
// TIME_DIM 10 (frames) and/or SLICE_DIM 13 (slices) > 1, all sampled on the
// one trajectory (3 x samples x spokes; a trajectory per frame is refused),
// coil maps with SLICE_DIM = the k-space's (a set per slice, shared by its
// frames) or 1 (one set for all). Reconstructed in one job by
// mri::CgSenseStack / AdjointSenseStack (one operator per CPU worker, slices
// in parallel; one on CUDA), each image as it would be alone. Output: the
// NIfTI volume nx x ny x (frames x slices), z = frame + frames * slice (BART's
// memory order), the .cfl with the k-space's TIME_DIM and SLICE_DIM; progress
// per finished image; result.residual_norms holds each image's final relative
// residual (in z order) instead of the per-iteration history of one image.
#ifndef TESSERA_SERVICES_RECONSTRUCTION_MRI_RUN_H_
#define TESSERA_SERVICES_RECONSTRUCTION_MRI_RUN_H_

#include "absl/status/status.h"
#include "common/device.h"
#include "services/reconstruction/reconstruction_request.h"
#include "services/reconstruction/reconstruction_run.h"

namespace tessera::reconstruction {

// Checks that the inputs agree with each other and the method (INVALID_ARGUMENT
// naming the input and dimension; NOT_FOUND; DATA_LOSS for a .cfl whose size
// disagrees with its .hdr). BART inputs are checked from their headers, so a
// submit does not read gigabytes of k-space; ISMRMRD files are read whole.
absl::Status CheckMriInputs(const ReconSpec& spec);

// Reconstructs into ctx.work_dir; fills `out` (work files, result fields of
// the image) but not the common fields RunReconstruction sets.
absl::Status RunMri(const ReconSpec& spec, const ReconRunContext& ctx, const Stream& stream, ReconOutcome* out);

}  // namespace tessera::reconstruction

#endif  // TESSERA_SERVICES_RECONSTRUCTION_MRI_RUN_H_

#include "cli/recon_args.h"

#include <functional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/output_args.h"
#include "common/status.h"

namespace tessera::cli {
namespace {

absl::StatusOr<double> ParseDouble(const Args& args, const std::string& flag) {
  double v = 0;
  if (!absl::SimpleAtod(args.Get(flag), &v)) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " expects a number, got '", args.Get(flag), "'"));
  }
  return v;
}

}  // namespace

std::vector<FlagSpec> ReconFlags(const std::string& modality) {
  std::vector<FlagSpec> flags = {
      {"device", "", "auto, cpu or cuda (default: auto locally, the server's in a job)"},
      {"deterministic", "", "fixed-order reductions: bit-identical reruns", true},
      {"out", "", "output NIfTI (locally) or output directory under the server's data roots (job)"},
      {"quiet", "", "no progress on stderr", true},
  };
  for (FlagSpec& f : OutputFormatFlags("a derived DICOM series: locally <stem>_dicom/ beside --out and no NIfTI; in a "
                                       "job reconstruction_dicom/, in output_dir instead of the NIfTI")) {
    flags.push_back(std::move(f));
  }
  if (modality == "mri") {
    flags.push_back({"kspace", "",
                     "k-space: BART .cfl/.hdr (either file or the base name) or ISMRMRD .h5; a non-Cartesian .cfl with "
                     "frames (dim 10) / slices (dim 13) is a stack on one trajectory, reconstructed in one job "
                     "(--coils: a map set per slice or one for all; output nx x ny x frames*slices)"});
    flags.push_back({"traj", "",
                     "non-Cartesian trajectory, BART cfl (3 x samples x spokes, 1/FOV units; kz with --coils nx x ny "
                     "x nz x coils: a 3-D volume); none with cgsense: Cartesian CG-SENSE (2-D or 3-D k-space)"});
    flags.push_back({"coils", "",
                     "coil sensitivities, BART cfl (nx x ny x nz x coils), or the word espirit: maps estimated from "
                     "the k-space centre by ESPIRiT (BART ecalib -m1; non-Cartesian centres gridded first; 3-D k-space or a "
                     "trajectory with kz: 3-D ESPIRiT)"});
    flags.push_back({"calibration-size", "0", "--coils espirit: calibration region side, 8..64 (0: 24)"});
    flags.push_back({"espirit-crop", "", "--coils espirit: maps 0 where the eigenvalue <= this, in [0, 1) (default 0.8)"});
    flags.push_back({"method", "cgsense", "adjoint | cgsense | sense"});
    flags.push_back({"iterations", "0", "cgsense iterations (0: 10; 30 with --regularizer, as bart pics)"});
    flags.push_back({"lambda", "",
                     "Tikhonov weight (default 0 for cgsense, 1e-3 for sense); with --regularizer the L1-wavelet / "
                     "TV weight on bart pics -R's scale (default 0.005)"});
    flags.push_back({"regularizer", "",
                     "cgsense: compressed sensing by FISTA, l1-wavelet (bart pics -R W:7:0:lambda) or tv "
                     "(-R T:7:0:lambda); empty: CG-SENSE"});
    flags.push_back({"acceleration", "0", "sense: R in 2..8 (0: from the data)"});
    flags.push_back({"tolerance", "", "NUFFT accuracy (default 1e-5)"});
    flags.push_back({"no-toeplitz", "", "cgsense: the NUFFT pair instead of the Toeplitz normal operator", true});
    return flags;
  }
  if (modality == "us") {
    flags.push_back({"rf", "", "channel data, UFF / PICMUS HDF5 (.uff or .h5)"});
    flags.push_back({"method", "das", "das | mv (minimum variance)"});
    flags.push_back({"subarray", "0", "mv subarray length L (0: channels / 2)"});
    flags.push_back({"loading", "", "mv diagonal loading, fraction of trace(R)/L (default 0.01)"});
    flags.push_back({"db", "", "dynamic range of the PNG, dB (default 60)"});
    flags.push_back({"x-mm", "", "lateral extent min,max in mm (default: the aperture)"});
    flags.push_back({"z-mm", "", "depth min,max in mm (default: 5 mm to the deepest sample)"});
    flags.push_back({"pixels", "", "image size nx,nz (default 256,256)"});
    flags.push_back({"f-number", "", "receive f-number (default 1.5)"});
    return flags;
  }
  flags.push_back({"geometry", "", "ASTRA geometry JSON (vol_geom + proj_geom)"});
  flags.push_back(
      {"sinogram", "",
       absl::StrCat(modality == "ct" ? "sinogram NIfTI (line integrals)" : "sinogram NIfTI (counts)",
                    "; with a 2-D geometry cols x views x slices is a stack reconstructed in one job "
                    "(output nx x ny x slices)")});
  flags.push_back({"iterations", "0", "iterations (0: the method's default)"});
  flags.push_back({"subsets", "0", "ordered subsets (os-sart, asd-pocs, osem; 0: default)"});
  if (modality == "ct") {
    flags.push_back({"method", "",
                     "fbp | fdk | sart | os-sart | cgls | fista-tv | asd-pocs (default: fbp in 2-D, fdk for cone)"});
    flags.push_back({"filter", "ram-lak", "fbp/fdk window: ram-lak | shepp-logan | cosine | hann"});
    flags.push_back({"cutoff", "1", "fbp/fdk filter cut-off, fraction of Nyquist in (0, 1]"});
    flags.push_back({"relaxation", "1", "sart/os-sart relaxation lambda in (0, 2)"});
    flags.push_back({"non-negative", "",
                     "sart/os-sart: clamp the image at 0; cgls: projected (clamped at 0, CG restarted where it binds); "
                     "fista-tv: the prox of TV + [x >= 0] (asd-pocs: always)",
                     true});
    flags.push_back({"tv-weight", "",
                     "fista-tv: TV weight relative to ||A^T y||_inf (default 0.002); asd-pocs: alpha, the TV step "
                     "relative to the first SART step (default 0.002)"});
    flags.push_back({"tv-iterations", "0", "fista-tv: FGP iterations per TV prox; asd-pocs: TV descent steps (0: 20)"});
    flags.push_back({"voxel-subdivision", "0",
                     "sart/os-sart/cgls/fista-tv/asd-pocs: solve on a grid N times finer per axis (z too for cone) "
                     "over the same field of view, each output voxel the mean of its N x N (x N) block; lowers the "
                     "pixel model's error at sub-voxel edges at N^2 (N^3) the memory and time per iteration; converges "
                     "more slowly, so give more --iterations (0/1: the output grid)"});
    flags.push_back({"redundancy-weights", "auto",
                     "fbp/fdk: auto (Parker weights for a short scan, Wang's for an offset detector) | none | "
                     "derivative (derivative + Hilbert filtering, weights after the filter: short scans of wide "
                     "cones; circular orbits, not out of core)"});
    flags.push_back({"device-memory-gib", "0",
                     "CUDA budget in GiB for volume + projections: fdk streams views in chunks and splits the "
                     "volume into z-slabs to fit; iterative methods are refused beyond it (0: free memory less a margin)"});
  } else {
    flags.push_back({"method", "osem", "mlem | osem"});
    flags.push_back({"listmode", "", "list-mode events (.tslm) instead of --sinogram"});
    flags.push_back({"attenuation", "", "mu-map NIfTI (1/mm) on vol_geom"});
    // expected counts = normalization * attenuation factors * (A x) + randoms + scatter
    flags.push_back({"randoms", "", "randoms sinogram NIfTI (expected counts; no TOF axis; sinogram data only)"});
    flags.push_back({"scatter", "", "scatter sinogram NIfTI (expected counts, normalised; no TOF axis; sinogram data only)"});
    flags.push_back({"normalization", "", "detection efficiency per bin, NIfTI sinogram (> 0, 1 = ideal; no TOF axis)"});
    flags.push_back({"tof-bins", "0", "TOF bins (0/1: none)"});
    flags.push_back({"tof-bin-mm", "0", "TOF bin width, mm"});
    flags.push_back({"tof-fwhm-mm", "0", "TOF kernel FWHM, mm"});
  }
  return flags;
}

namespace {

// Optional numeric flags: unset (empty) leaves the proto's optional field unset.
absl::Status SetOptionalDouble(const Args& args, const std::string& flag, const std::function<void(double)>& set) {
  if (args.Get(flag).empty()) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(double v, ParseDouble(args, flag));
  set(v);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> ParseDoubleList(const Args& args, const std::string& flag) {
  std::vector<double> out;
  for (absl::string_view part : absl::StrSplit(args.Get(flag), ',', absl::SkipEmpty())) {
    double v = 0;
    if (!absl::SimpleAtod(part, &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " expects comma-separated numbers, got '", args.Get(flag), "'"));
    }
    out.push_back(v);
  }
  return out;
}

absl::StatusOr<v1::ReconstructRequest> MriRequestFromArgs(const Args& args, bool absolute) {
  v1::ReconstructRequest request;
  v1::MriOptions* mri = request.mutable_mri();
  if (args.Get("kspace").empty()) return absl::InvalidArgumentError("--kspace is required");
  mri->mutable_kspace()->set_path(ServerPath(args.Get("kspace"), absolute));
  if (!args.Get("traj").empty()) mri->mutable_trajectory()->set_path(ServerPath(args.Get("traj"), absolute));
  if (args.Get("coils") == "espirit") {
    mri->set_coil_estimation("espirit");
  } else if (!args.Get("coils").empty()) {
    mri->mutable_coils()->set_path(ServerPath(args.Get("coils"), absolute));
  }
  TESSERA_ASSIGN_OR_RETURN(int calibration_size, args.GetInt("calibration-size"));
  mri->set_calibration_size(calibration_size);
  TESSERA_RETURN_IF_ERROR(SetOptionalDouble(args, "espirit-crop", [&](double v) { mri->set_espirit_crop(v); }));
  mri->set_method(args.Get("method"));
  TESSERA_ASSIGN_OR_RETURN(int iterations, args.GetInt("iterations"));
  TESSERA_ASSIGN_OR_RETURN(int acceleration, args.GetInt("acceleration"));
  mri->set_iterations(iterations);
  mri->set_acceleration(acceleration);
  TESSERA_RETURN_IF_ERROR(SetOptionalDouble(args, "lambda", [&](double v) { mri->set_lambda(v); }));
  TESSERA_RETURN_IF_ERROR(SetOptionalDouble(args, "tolerance", [&](double v) { mri->set_tolerance(v); }));
  mri->set_no_toeplitz(args.GetBool("no-toeplitz"));
  mri->set_regularizer(args.Get("regularizer"));
  return request;
}

absl::StatusOr<v1::ReconstructRequest> UltrasoundRequestFromArgs(const Args& args, bool absolute) {
  v1::ReconstructRequest request;
  v1::UltrasoundOptions* us = request.mutable_ultrasound();
  if (args.Get("rf").empty()) return absl::InvalidArgumentError("--rf is required");
  us->mutable_channel_data()->set_path(ServerPath(args.Get("rf"), absolute));
  us->set_method(args.Get("method"));
  TESSERA_ASSIGN_OR_RETURN(int subarray, args.GetInt("subarray"));
  us->set_subarray(subarray);
  TESSERA_RETURN_IF_ERROR(SetOptionalDouble(args, "loading", [&](double v) { us->set_loading(v); }));
  TESSERA_RETURN_IF_ERROR(SetOptionalDouble(args, "db", [&](double v) { us->set_dynamic_range_db(v); }));
  TESSERA_RETURN_IF_ERROR(SetOptionalDouble(args, "f-number", [&](double v) { us->set_f_number(v); }));
  TESSERA_ASSIGN_OR_RETURN(std::vector<double> x, ParseDoubleList(args, "x-mm"));
  TESSERA_ASSIGN_OR_RETURN(std::vector<double> z, ParseDoubleList(args, "z-mm"));
  for (double v : x) us->add_x_mm(v);
  for (double v : z) us->add_z_mm(v);
  for (absl::string_view part : absl::StrSplit(args.Get("pixels"), ',', absl::SkipEmpty())) {
    int v = 0;
    if (!absl::SimpleAtoi(part, &v)) {
      return absl::InvalidArgumentError(absl::StrCat("--pixels expects nx,nz, got '", args.Get("pixels"), "'"));
    }
    us->add_pixels(v);
  }
  return request;
}

}  // namespace

absl::StatusOr<v1::ReconstructRequest> ReconRequestFromArgs(const Args& args, const std::string& modality,
                                                            bool absolute) {
  if (modality == "mri" || modality == "us") {
    TESSERA_ASSIGN_OR_RETURN(v1::ReconstructRequest request, modality == "mri"
                                                                 ? MriRequestFromArgs(args, absolute)
                                                                 : UltrasoundRequestFromArgs(args, absolute));
    request.set_device(args.Get("device"));
    request.set_deterministic(args.GetBool("deterministic"));
    TESSERA_RETURN_IF_ERROR(OutputOptionsFromArgs(args, absolute, request.mutable_output()));
    return request;
  }
  v1::ReconstructRequest request;
  if (args.Get("geometry").empty()) return absl::InvalidArgumentError("--geometry is required");
  request.mutable_geometry()->set_path(ServerPath(args.Get("geometry"), absolute));
  if (!args.Get("sinogram").empty()) request.mutable_sinogram()->set_path(ServerPath(args.Get("sinogram"), absolute));
  TESSERA_ASSIGN_OR_RETURN(int iterations, args.GetInt("iterations"));
  TESSERA_ASSIGN_OR_RETURN(int subsets, args.GetInt("subsets"));
  request.set_device(args.Get("device"));
  request.set_deterministic(args.GetBool("deterministic"));
  if (modality == "ct") {
    v1::CtOptions* ct = request.mutable_ct();
    ct->set_method(args.Get("method"));
    ct->set_iterations(iterations);
    ct->set_subsets(subsets);
    ct->set_filter(args.Get("filter"));
    TESSERA_ASSIGN_OR_RETURN(double cutoff, ParseDouble(args, "cutoff"));
    TESSERA_ASSIGN_OR_RETURN(double relaxation, ParseDouble(args, "relaxation"));
    ct->set_filter_cutoff(cutoff);
    ct->set_relaxation(relaxation);
    ct->set_non_negative(args.GetBool("non-negative"));
    ct->set_redundancy_weights(args.Get("redundancy-weights"));
    if (!args.Get("tv-weight").empty()) {
      TESSERA_ASSIGN_OR_RETURN(double tv_weight, ParseDouble(args, "tv-weight"));
      ct->set_tv_weight(tv_weight);
    }
    TESSERA_ASSIGN_OR_RETURN(int tv_iterations, args.GetInt("tv-iterations"));
    ct->set_tv_iterations(tv_iterations);
    TESSERA_ASSIGN_OR_RETURN(int voxel_subdivision, args.GetInt("voxel-subdivision"));
    ct->set_voxel_subdivision(voxel_subdivision);
    TESSERA_ASSIGN_OR_RETURN(double device_memory_gib, ParseDouble(args, "device-memory-gib"));
    if (device_memory_gib != 0) ct->set_device_memory_gib(device_memory_gib);
  } else if (modality == "pet") {
    v1::PetOptions* pet = request.mutable_pet();
    pet->set_method(args.Get("method"));
    pet->set_iterations(iterations);
    pet->set_subsets(subsets);
    if (!args.Get("listmode").empty()) request.mutable_listmode()->set_path(ServerPath(args.Get("listmode"), absolute));
    if (!args.Get("attenuation").empty()) {
      pet->mutable_attenuation()->set_path(ServerPath(args.Get("attenuation"), absolute));
    }
    if (!args.Get("randoms").empty()) pet->mutable_randoms()->set_path(ServerPath(args.Get("randoms"), absolute));
    if (!args.Get("scatter").empty()) pet->mutable_scatter()->set_path(ServerPath(args.Get("scatter"), absolute));
    if (!args.Get("normalization").empty()) {
      pet->mutable_normalization()->set_path(ServerPath(args.Get("normalization"), absolute));
    }
    TESSERA_ASSIGN_OR_RETURN(int tof_bins, args.GetInt("tof-bins"));
    TESSERA_ASSIGN_OR_RETURN(double bin_mm, ParseDouble(args, "tof-bin-mm"));
    TESSERA_ASSIGN_OR_RETURN(double fwhm_mm, ParseDouble(args, "tof-fwhm-mm"));
    pet->set_tof_bins(tof_bins);
    pet->set_tof_bin_mm(bin_mm);
    pet->set_tof_fwhm_mm(fwhm_mm);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("recon: modality '", modality, "' is not ct, pet, mri or us"));
  }
  TESSERA_RETURN_IF_ERROR(OutputOptionsFromArgs(args, absolute, request.mutable_output()));
  return request;
}

}  // namespace tessera::cli

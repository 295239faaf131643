#include "cli/recon_args.h"


#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
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
      {"geometry", "", "ASTRA geometry JSON (vol_geom + proj_geom)"},
      {"sinogram", "", modality == "ct" ? "sinogram NIfTI (line integrals)" : "sinogram NIfTI (counts)"},
      {"iterations", "0", "iterations (0: the method's default)"},
      {"subsets", "0", "ordered subsets (os-sart, osem; 0: default)"},
      {"device", "", "auto, cpu or cuda (default: auto locally, the server's in a job)"},
      {"deterministic", "", "fixed-order reductions: bit-identical reruns", true},
      {"out", "", "output NIfTI (locally) or output directory under the server's data roots (job)"},
      {"quiet", "", "no progress on stderr", true},
  };
  if (modality == "ct") {
    flags.push_back({"method", "", "fbp | fdk | sart | os-sart | cgls (default: fbp in 2-D, fdk for cone)"});
    flags.push_back({"filter", "ram-lak", "fbp/fdk window: ram-lak | shepp-logan | cosine | hann"});
    flags.push_back({"cutoff", "1", "fbp/fdk filter cut-off, fraction of Nyquist in (0, 1]"});
    flags.push_back({"relaxation", "1", "sart/os-sart relaxation lambda in (0, 2)"});
    flags.push_back({"non-negative", "", "sart/os-sart: clamp the image at 0", true});
  } else {
    flags.push_back({"method", "osem", "mlem | osem"});
    flags.push_back({"listmode", "", "list-mode events (.tslm) instead of --sinogram"});
    flags.push_back({"attenuation", "", "mu-map NIfTI (1/mm) on vol_geom"});
    flags.push_back({"tof-bins", "0", "TOF bins (0/1: none)"});
    flags.push_back({"tof-bin-mm", "0", "TOF bin width, mm"});
    flags.push_back({"tof-fwhm-mm", "0", "TOF kernel FWHM, mm"});
  }
  return flags;
}

absl::StatusOr<v1::ReconstructRequest> ReconRequestFromArgs(const Args& args, const std::string& modality,
                                                            bool absolute) {
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
  } else if (modality == "pet") {
    v1::PetOptions* pet = request.mutable_pet();
    pet->set_method(args.Get("method"));
    pet->set_iterations(iterations);
    pet->set_subsets(subsets);
    if (!args.Get("listmode").empty()) request.mutable_listmode()->set_path(ServerPath(args.Get("listmode"), absolute));
    if (!args.Get("attenuation").empty()) {
      pet->mutable_attenuation()->set_path(ServerPath(args.Get("attenuation"), absolute));
    }
    TESSERA_ASSIGN_OR_RETURN(int tof_bins, args.GetInt("tof-bins"));
    TESSERA_ASSIGN_OR_RETURN(double bin_mm, ParseDouble(args, "tof-bin-mm"));
    TESSERA_ASSIGN_OR_RETURN(double fwhm_mm, ParseDouble(args, "tof-fwhm-mm"));
    pet->set_tof_bins(tof_bins);
    pet->set_tof_bin_mm(bin_mm);
    pet->set_tof_fwhm_mm(fwhm_mm);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("recon: modality '", modality, "' is not ct or pet"));
  }
  return request;
}

}  // namespace tessera::cli

// `tessera recon ct|pet|mri|us`: reconstructs on this machine and writes the
// volume to --out (NIfTI, affine = the geometry's world coordinates; MRI adds
// the complex image as <stem>.cfl/.hdr, ultrasound <stem>.png; with
// --output-format dicom|both the series <stem>_dicom/), printing a
// JSON summary on stdout and progress on stderr. It runs the same
// "reconstruction" engine as ReconstructionService and the scheduler's
// workers (`tessera job submit recon ct ...` sends the same flags to a server).
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/nifti_io.h"
#include "cli/args.h"
#include "cli/recon_args.h"
#include "cli/verbs.h"
#include "services/reconstruction/reconstruction_engine.h"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;

int Usage(const std::string& modality, const std::vector<FlagSpec>& specs, FILE* out, int rc) {
  if (modality.empty()) {
    std::fprintf(out,
                 "usage: tessera recon ct --sinogram S.nii.gz --geometry G.json --method fbp|fdk|sart|os-sart|cgls "
                 "--out V.nii.gz [flags]\n"
                 "       tessera recon pet --sinogram S.nii.gz | --listmode L.tslm --geometry G.json "
                 "--method mlem|osem --out V.nii.gz [flags]\n"
                 "       tessera recon mri --kspace K --traj T [--coils S] --method adjoint|cgsense|sense "
                 "--out X.nii.gz [flags]\n"
                 "       tessera recon us --rf R.uff|R.h5 --method das|mv [--subarray L] [--loading D] "
                 "--out B.nii.gz [flags]\n"
                 "       tessera recon ct|pet|mri|us --help\n");
    return rc;
  }
  const char* inputs = modality == "mri" ? "--kspace K [--traj T] [--coils S]"
                       : modality == "us" ? "--rf R.uff"
                                          : "--geometry G.json";
  std::fprintf(out, "usage: tessera recon %s %s --out V.nii.gz [flags]\n%s", modality.c_str(), inputs,
               FlagsHelp(specs).c_str());
  return rc;
}

}  // namespace

int RunRecon(int argc, char** argv) {
  const std::string modality = argc > 1 ? argv[1] : "";
  if (modality != "ct" && modality != "pet" && modality != "mri" && modality != "us") {
    if (modality == "--help" || modality == "-h") return Usage("", {}, stdout, 0);
    std::fprintf(stderr, "tessera recon: the first word must be ct, pet, mri or us\n");
    return Usage("", {}, stderr, 2);
  }
  const std::vector<FlagSpec> specs = ReconFlags(modality);
  auto args = Args::Parse(specs, argc, argv, 2);
  if (!args.ok()) {
    std::fprintf(stderr, "tessera recon %s: %s\n", modality.c_str(), std::string(args.status().message()).c_str());
    return Usage(modality, specs, stderr, 2);
  }
  if (args->help()) return Usage(modality, specs, stdout, 0);
  absl::StatusOr<v1::ReconstructRequest> request = ReconRequestFromArgs(*args, modality, /*absolute=*/true);
  if (!request.ok() || args->Get("out").empty()) {
    std::fprintf(stderr, "tessera recon %s: %s\n", modality.c_str(),
                 request.ok() ? "--out is required" : std::string(request.status().message()).c_str());
    return Usage(modality, specs, stderr, 2);
  }
  const fs::path out = fs::absolute(args->Get("out"));
  const bool gzip = absl::EndsWith(out.string(), ".nii.gz");
  if (!gzip && !absl::EndsWith(out.string(), ".nii")) {
    std::fprintf(stderr, "tessera recon: --out must end in .nii.gz or .nii, got '%s'\n", out.c_str());
    return 2;
  }
  std::error_code ec;
  fs::create_directories(out.parent_path(), ec);
  // The engine writes into a work directory beside --out, then the volume is
  // renamed into place (so a failed run leaves no partial output).
  const fs::path work = out.parent_path() / absl::StrCat(".recon-", out.filename().string(), ".work");
  fs::remove_all(work, ec);
  fs::create_directories(work, ec);
  if (ec) {
    std::fprintf(stderr, "tessera recon: cannot create %s: %s\n", work.c_str(), ec.message().c_str());
    return 1;
  }
  // Any local file may be named: the filesystem root is the data root.
  auto engine = reconstruction::ReconstructionEngine::Create({"/"}, int64_t{1} << 40, "auto");
  if (!engine.ok()) {
    std::fprintf(stderr, "tessera recon: %s\n", engine.status().ToString().c_str());
    return 1;
  }
  google::protobuf::Any spec;
  spec.PackFrom(*request);
  if (absl::Status valid = (*engine)->Validate(spec); !valid.ok()) {
    std::fprintf(stderr, "tessera recon %s: %s\n", modality.c_str(), std::string(valid.message()).c_str());
    fs::remove_all(work, ec);
    return valid.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  const bool quiet = args->GetBool("quiet");
  std::atomic<bool> never{false};
  jobs::EngineContext context("recon", work.string(), &never, absl::InfiniteFuture(),
                              [&](const jobs::JobProgress& p) {
                                if (!quiet) {
                                  std::fprintf(stderr, "[%3d%%] %s\n", static_cast<int>(p.fraction * 100),
                                               p.message.c_str());
                                }
                              });
  absl::StatusOr<jobs::EngineOutput> output = (*engine)->Run(spec, context);
  if (!output.ok()) {
    std::fprintf(stderr, "tessera recon %s: %s\n", modality.c_str(), output.status().ToString().c_str());
    fs::remove_all(work, ec);
    return output.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  absl::Status written = absl::OkStatus();
  // --output-format dicom: the series only (<stem>_dicom/), no NIfTI at --out.
  const std::string format = request->output().format();
  if (format != "dicom" && gzip) {
    fs::rename(work / "reconstruction.nii.gz", out, ec);
    if (ec) written = absl::InternalError(ec.message());
  } else if (format != "dicom") {
    absl::StatusOr<Volume> volume = ReadNifti((work / "reconstruction.nii.gz").string());
    written = volume.ok() ? WriteNifti(*volume, out.string()) : volume.status();
  }
  v1::ReconstructionResult result;
  output->result.UnpackTo(&result);
  // Companion files (the complex MRI image, the ultrasound PNG) beside --out:
  // reconstruction.png -> <stem>.png.
  const std::string stem = out.string().substr(0, out.string().size() - (gzip ? 7 : 4));
  if (written.ok() && fs::exists(work / "reconstruction_dicom")) {
    // The DICOM series (V.nii.gz -> V_dicom/), replacing an earlier one whole.
    fs::remove_all(stem + "_dicom", ec);
    fs::rename(work / "reconstruction_dicom", stem + "_dicom", ec);
    if (ec) written = absl::InternalError(absl::StrCat(stem, "_dicom: ", ec.message()));
  }
  for (const std::string& name : result.files()) {
    if (!written.ok() || name == "reconstruction.nii.gz" || name.find('/') != std::string::npos) continue;
    const std::string ext = fs::path(name).extension().string();
    fs::rename(work / name, stem + ext, ec);
    if (ec) written = absl::InternalError(absl::StrCat(stem, ext, ": ", ec.message()));
  }
  fs::remove_all(work, ec);
  if (!written.ok()) {
    std::fprintf(stderr, "tessera recon: cannot write %s: %s\n", out.c_str(), std::string(written.message()).c_str());
    return 1;
  }
  result.set_output_path(format == "dicom" ? stem + "_dicom" : out.string());
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = false;
  (void)google::protobuf::util::MessageToJsonString(result, &json, options);
  std::printf("%s\n", json.c_str());
  return 0;
}

}  // namespace tessera::cli

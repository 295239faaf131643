// `tessera apply-transforms`: antsApplyTransforms on this machine. Resamples
// --input onto --reference's grid (or maps --points) through the --transform
// chain and writes --out; prints a JSON summary on stdout. It runs the same
// "apply_transforms" engine as RegistrationService.ApplyTransforms and the
// scheduler's workers (`tessera job submit apply-transforms ...` sends the
// same flags, plus --registration-job, to a server).
//
//   tessera apply-transforms --reference fixed.nii.gz --input moving_labels.nii.gz \
//       --transform out/0Warp.nii.gz --transform out/0GenericAffine.mat \
//       --interpolation nearest --out labels_on_fixed.nii.gz
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/apply_transforms_args.h"
#include "cli/args.h"
#include "cli/verbs.h"
#include "common/json.h"
#include "common/nifti_io.h"
#include "common/status.h"
#include "services/registration/apply_transforms_engine.h"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;

int Usage(const std::vector<FlagSpec>& specs, FILE* out, int rc) {
  std::fprintf(out,
               "usage: tessera apply-transforms --reference R --input I | --points P.csv --transform F "
               "[--transform F2 ...] [--interpolation linear|nearest|bspline|label|generic-label] --out O\n"
               "ANTs order: the first transform is applied first to a reference point, so "
               "--transform 0Warp.nii.gz --transform 0GenericAffine.mat reproduces a registration's warped image;\n"
               "to map moving-image points onto the fixed image pass the inverse chain: "
               "--transform '[0GenericAffine.mat,1]' --transform 0InverseWarp.nii.gz\n%s",
               FlagsHelp(specs).c_str());
  return rc;
}

// Moves the engine's result to `out` (a NIfTI of the other compression is
// written again).
absl::Status MoveResult(const std::string& from, const std::string& out) {
  std::error_code ec;
  const bool same_kind = absl::EndsWith(from, ".gz") == absl::EndsWith(out, ".gz");
  if (same_kind) {
    fs::rename(from, out, ec);
    if (!ec) return absl::OkStatus();
    fs::copy_file(from, out, fs::copy_options::overwrite_existing, ec);
    if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot write ", out, ": ", ec.message()));
    return absl::OkStatus();
  }
  TESSERA_ASSIGN_OR_RETURN(Volume volume, ReadNifti(from));
  return WriteNifti(volume, out);
}

}  // namespace

int RunApplyTransforms(int argc, char** argv) {
  const std::vector<FlagSpec> specs = ApplyTransformsFlags(/*job=*/false);
  auto args = Args::Parse(specs, argc, argv, 1);
  if (!args.ok()) {
    std::fprintf(stderr, "tessera apply-transforms: %s\n", std::string(args.status().message()).c_str());
    return Usage(specs, stderr, 2);
  }
  if (args->help()) return Usage(specs, stdout, 0);
  absl::StatusOr<v1::ApplyTransformsRequest> request = ApplyTransformsRequestFromArgs(*args, /*job=*/false);
  if (!request.ok()) {
    std::fprintf(stderr, "tessera %s\n", std::string(request.status().message()).c_str());
    return Usage(specs, stderr, 2);
  }
  const std::string out = args->Get("out");
  const bool points = !request->points_path().empty();
  const bool volume_out = absl::EndsWith(out, ".nii") || absl::EndsWith(out, ".nii.gz");
  if (out.empty() || (points ? !absl::EndsWith(out, ".csv") : !volume_out)) {
    std::fprintf(stderr, "tessera apply-transforms: --out must name a %s file\n",
                 points ? ".csv" : ".nii or .nii.gz");
    return Usage(specs, stderr, 2);
  }
  // The engine writes into a work folder beside --out; the result is moved there.
  std::error_code ec;
  const fs::path out_path = fs::absolute(out, ec);
  std::string tmpl = (out_path.parent_path() / ".tessera-apply-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    std::fprintf(stderr, "tessera apply-transforms: cannot create a work folder beside %s\n", out.c_str());
    return 1;
  }
  const std::string work = tmpl;
  // Any local file may be named: the filesystem root is the data root.
  auto engine = registration::ApplyTransformsEngine::Create({"/"}, int64_t{1} << 40, "auto");
  absl::StatusOr<registration::ApplyTransformsOutcome> outcome =
      engine.ok() ? (*engine)->RunRequest(*request, work, "apply-transforms")
                  : absl::StatusOr<registration::ApplyTransformsOutcome>(engine.status());
  absl::Status moved = absl::OkStatus();
  if (outcome.ok()) {
    moved = MoveResult((fs::path(work) / (points ? "applied_points.csv" : "applied.nii.gz")).string(), out_path.string());
  }
  fs::remove_all(work, ec);
  if (!outcome.ok() || !moved.ok()) {
    const absl::Status& status = outcome.ok() ? moved : outcome.status();
    std::fprintf(stderr, "tessera apply-transforms: %s\n", status.ToString().c_str());
    return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  const v1::ApplyTransformsResult& r = outcome->result;
  if (!args->GetBool("quiet")) {
    for (const std::string& line : outcome->log) std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::vector<std::string> dims, log;
  for (int64_t d : r.dims()) dims.push_back(std::to_string(d));
  for (const std::string& line : outcome->log) log.push_back(JsonQuote(line));
  std::printf("{\"output\": %s, \"interpolation\": %s, \"backend\": %s, \"seconds\": %.4f, \"dims\": [%s], "
              "\"points\": %lld, \"log\": [%s]}\n",
              JsonQuote(out_path.string()).c_str(), JsonQuote(r.interpolation()).c_str(),
              JsonQuote(r.backend()).c_str(), r.seconds(), absl::StrJoin(dims, ", ").c_str(),
              static_cast<long long>(r.points()), absl::StrJoin(log, ", ").c_str());
  return 0;
}

}  // namespace tessera::cli

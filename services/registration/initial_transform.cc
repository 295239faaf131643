#include "services/registration/initial_transform.h"

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/registration/pipeline/ants_transform_io.h"
#include "services/common/data_roots.h"

namespace tessera::registration {
namespace {

// ParseItkAffine with every failure as bad input (a truncated .mat is DATA_LOSS there).
absl::StatusOr<Mat4> Parse(const std::string& bytes, const std::string& name) {
  absl::StatusOr<Mat4> parsed = ParseItkAffine(bytes, name);
  if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat("initial_transform: ", parsed.status().message()));
  return parsed;
}

}  // namespace

absl::StatusOr<std::optional<Mat4>> ReadInitialTransform(const v1::TransformSource& source,
                                                         const std::vector<std::string>& real_roots) {
  constexpr char kWhat[] = "initial_transform";
  std::optional<Mat4> t;
  switch (source.source_case()) {
    case v1::TransformSource::SOURCE_NOT_SET:
      if (source.inverse()) return absl::InvalidArgumentError("initial_transform: inverse set without a transform");
      return t;
    case v1::TransformSource::kRegistrationJobId:
      return absl::InvalidArgumentError(
          "initial_transform: registration_job_id is not supported as a start transform yet; pass the job's "
          "0GenericAffine.mat as path");
    case v1::TransformSource::kAffineFile: {
      TESSERA_ASSIGN_OR_RETURN(t, Parse(source.affine_file(), "affine_file"));
      break;
    }
    case v1::TransformSource::kPath: {
      const std::string& requested = source.path();
      if (absl::EndsWith(requested, ".nii") || absl::EndsWith(requested, ".nii.gz")) {
        return absl::InvalidArgumentError(absl::StrCat(
            "initial_transform: '", requested,
            "' looks like a displacement field; only an affine (.mat, .txt, .tfm) can start a registration for now"));
      }
      absl::StatusOr<std::string> path = ResolveUnderRoots(requested, real_roots);
      if (!path.ok()) return Annotate(path.status(), kWhat);
      std::ifstream in(*path, std::ios::binary);
      if (!in) return absl::NotFoundError(absl::StrCat("initial_transform: cannot open '", requested, "'"));
      std::ostringstream bytes;
      bytes << in.rdbuf();
      if (bytes.str().size() > (size_t{1} << 20)) {
        return absl::InvalidArgumentError(
            absl::StrCat("initial_transform: '", requested, "' is larger than 1 MiB: not an affine transform file"));
      }
      TESSERA_ASSIGN_OR_RETURN(t, Parse(bytes.str(), requested));
      break;
    }
  }
  if (source.inverse()) {
    absl::StatusOr<Mat4> inverse = InvertAffine(*t);
    if (!inverse.ok()) return absl::InvalidArgumentError("initial_transform: the affine is singular, no inverse");
    t = *inverse;
  }
  return t;
}

}  // namespace tessera::registration

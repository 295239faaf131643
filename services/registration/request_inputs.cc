#include "services/registration/request_inputs.h"

#include <sys/stat.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/dicom/volume_file.h"
#include "common/status.h"
#include "services/common/data_roots.h"

namespace tessera::registration {
namespace {

absl::StatusOr<Volume> Materialize(const VolumeInput& in, int64_t max_bytes, bool labels) {
  Volume volume;
  if (in.volume) {
    volume = *in.volume;
  } else {
    // DICOM files hold the voxels plus headers (and a zip may inflate): bound what is read.
    absl::StatusOr<Volume> read = ReadVolumeFile(in.path, nullptr, max_bytes > (int64_t{1} << 60) ? max_bytes : max_bytes + max_bytes / 8 + (int64_t{64} << 20));
    if (!read.ok()) return Annotate(read.status(), in.what);
    volume = *std::move(read);
    if (static_cast<int64_t>(volume.data.nbytes()) > max_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(in.what, ": '", in.path, "' holds ", volume.data.nbytes(),
                                                       " bytes, more than the server's limit of ", max_bytes));
    }
  }
  if (labels) TESSERA_RETURN_IF_ERROR(ToIntegerLabels(volume));
  return volume;
}

}  // namespace

absl::StatusOr<VolumeInput> ResolveVolumePath(const std::string& requested, const std::string& what,
                                              const std::vector<std::string>& real_roots, int64_t max_volume_bytes) {
  // A directory is a DICOM series (read when the job runs).
  absl::StatusOr<std::string> path = ResolveFileOrDirUnderRoots(requested, real_roots);
  if (!path.ok()) return Annotate(path.status(), what);
  struct stat st;
  // Refuse files that cannot fit before decompressing them (a little slack
  // for the header and incompressible data).
  if (stat(path->c_str(), &st) == 0 && st.st_size > max_volume_bytes + max_volume_bytes / 64 + (1 << 20)) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": '", requested, "' (", st.st_size,
                                                     " bytes) exceeds the server's volume limit of ",
                                                     max_volume_bytes, " bytes"));
  }
  VolumeInput in;
  in.what = what;
  in.path = *std::move(path);
  return in;
}

absl::StatusOr<RegistrationInputs> MaterializeInputs(const RequestInputs& inputs, int64_t max_volume_bytes) {
  RegistrationInputs in;
  TESSERA_ASSIGN_OR_RETURN(in.fixed, Materialize(inputs.fixed, max_volume_bytes, false));
  TESSERA_ASSIGN_OR_RETURN(in.moving, Materialize(inputs.moving, max_volume_bytes, false));
  if (inputs.fixed_labels) {
    TESSERA_ASSIGN_OR_RETURN(in.fixed_labels, Materialize(*inputs.fixed_labels, max_volume_bytes, true));
    if (in.fixed_labels->data.shape() != in.fixed.data.shape()) {
      return absl::InvalidArgumentError(absl::StrCat("fixed labels ", ShapeToString(in.fixed_labels->data.shape()),
                                                     " do not match the fixed image ",
                                                     ShapeToString(in.fixed.data.shape())));
    }
  }
  if (inputs.moving_labels) {
    TESSERA_ASSIGN_OR_RETURN(in.moving_labels, Materialize(*inputs.moving_labels, max_volume_bytes, true));
  }
  for (const auto& [from, to] : {std::make_pair(&inputs.fixed_mask, &in.fixed_mask),
                                 std::make_pair(&inputs.moving_mask, &in.moving_mask)}) {
    if (!*from) continue;
    TESSERA_ASSIGN_OR_RETURN(*to, Materialize(**from, max_volume_bytes, false));
    if ((*to)->data.rank() != 3) {
      return absl::InvalidArgumentError(absl::StrCat((*from)->what, " must be a 3-D volume, got shape ",
                                                     ShapeToString((*to)->data.shape())));
    }
  }
  in.initial_transform = inputs.initial_transform;
  return in;
}

}  // namespace tessera::registration

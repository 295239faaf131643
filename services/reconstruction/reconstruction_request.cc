#include "services/reconstruction/reconstruction_request.h"

#include <cmath>
#include <filesystem>
#include <system_error>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/device.h"
#include "common/status.h"
#include "kernels/reconstruction/grid_subdivision.h"
#include "services/common/data_roots.h"
#include "services/common/output_options.h"

namespace tessera::reconstruction {
namespace {

constexpr int kMaxIterations = 10000;
constexpr int kMaxSubsets = 4096;
constexpr int kMaxTofBins = 1024;

struct Named {
  const char* name;
  int value;
};
constexpr Named kCtMethods[] = {{"fbp", static_cast<int>(CtMethod::kFbp)},
                                {"fdk", static_cast<int>(CtMethod::kFdk)},
                                {"sart", static_cast<int>(CtMethod::kSart)},
                                {"os-sart", static_cast<int>(CtMethod::kOsSart)},
                                {"cgls", static_cast<int>(CtMethod::kCgls)},
                                {"fista-tv", static_cast<int>(CtMethod::kFistaTv)},
                                {"asd-pocs", static_cast<int>(CtMethod::kAsdPocs)}};
constexpr Named kPetMethods[] = {{"mlem", static_cast<int>(PetMethod::kMlem)},
                                 {"osem", static_cast<int>(PetMethod::kOsem)}};
constexpr Named kMriMethods[] = {{"adjoint", static_cast<int>(MriMethod::kAdjoint)},
                                 {"cgsense", static_cast<int>(MriMethod::kCgSense)},
                                 {"sense", static_cast<int>(MriMethod::kSense)}};
constexpr Named kMriRegularizers[] = {{"l1-wavelet", static_cast<int>(MriRegularizer::kL1Wavelet)},
                                      {"tv", static_cast<int>(MriRegularizer::kTv)}};
constexpr Named kUltrasoundMethods[] = {{"das", static_cast<int>(UltrasoundMethod::kDas)},
                                        {"mv", static_cast<int>(UltrasoundMethod::kMv)}};
constexpr Named kModalities[] = {{"ct", static_cast<int>(Modality::kCt)},
                                 {"pet", static_cast<int>(Modality::kPet)},
                                 {"mri", static_cast<int>(Modality::kMri)},
                                 {"ultrasound", static_cast<int>(Modality::kUltrasound)}};
constexpr int kMaxImagePixels = 8192;
constexpr int kMaxSubarray = 128;  // the batched Hermitian solve's limit
template <size_t N>
absl::StatusOr<int> Lookup(const Named (&table)[N], const std::string& name, const char* field) {
  std::vector<std::string> known;
  for (const Named& n : table) {
    if (name == n.name) return n.value;
    known.push_back(n.name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": '", name, "' is not one of ", absl::StrJoin(known, ", ")));
}

template <size_t N>
const char* NameOf(const Named (&table)[N], int value) {
  for (const Named& n : table) {
    if (n.value == value) return n.name;
  }
  return "?";
}

absl::Status CheckRange(const char* field, int value, int lo, int hi) {
  if (value < lo || value > hi) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must be in [", lo, ", ", hi, "], got ", value));
  }
  return absl::OkStatus();
}

// A server path under the roots, no larger than max_bytes.
absl::StatusOr<std::string> ResolveFile(const v1::FileSource& source, const char* field, bool required,
                                        const std::vector<std::string>& roots, int64_t max_bytes) {
  switch (source.source_case()) {
    case v1::FileSource::kPath: {
      absl::StatusOr<std::string> path = ResolveUnderRoots(source.path(), roots);
      if (!path.ok()) return Annotate(path.status(), field);
      std::error_code ec;
      const uintmax_t bytes = std::filesystem::file_size(*path, ec);
      if (!ec && max_bytes > 0 && bytes > static_cast<uintmax_t>(max_bytes)) {
        return absl::ResourceExhaustedError(
            absl::StrCat(field, ": ", *path, " is ", bytes, " bytes, over the server's limit of ", max_bytes));
      }
      return *std::move(path);
    }
    case v1::FileSource::kUploadId:
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": upload_id '", source.upload_id(),
          "' must be turned into a server path by ReconstructionService before the job is queued"));
    default:
      if (required) return absl::InvalidArgumentError(absl::StrCat(field, ": required (a path or an upload_id)"));
      return std::string();
  }
}

// A BART pair (either file or the base name; both files must exist under the
// roots) -> its canonical base path; an .h5 file -> its canonical path.
absl::StatusOr<std::string> ResolveMriInput(const v1::FileSource& source, const char* field, bool required,
                                            const std::vector<std::string>& roots, int64_t max_bytes) {
  if (source.source_case() != v1::FileSource::kPath) return ResolveFile(source, field, required, roots, max_bytes);
  std::string base = source.path();
  if (IsHdf5Path(base)) return ResolveFile(source, field, required, roots, max_bytes);
  for (const char* ext : {".cfl", ".hdr"}) {
    if (absl::EndsWith(base, ext)) base.resize(base.size() - 4);
  }
  std::string canonical_base;
  for (const char* ext : {".hdr", ".cfl"}) {
    v1::FileSource file;
    file.set_path(base + ext);
    TESSERA_ASSIGN_OR_RETURN(std::string path, ResolveFile(file, field, true, roots, max_bytes));
    path.resize(path.size() - 4);
    if (!canonical_base.empty() && canonical_base != path) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": ", base, ".hdr and .cfl resolve to different places"));
    }
    canonical_base = path;
  }
  return canonical_base;
}

absl::Status CheckFiniteRange(const char* field, double value, double lo, double hi) {
  if (!std::isfinite(value) || value < lo || value > hi) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must be in [", lo, ", ", hi, "], got ", value));
  }
  return absl::OkStatus();
}

absl::StatusOr<MriSpec> ParseMri(const v1::MriOptions& o, const std::vector<std::string>& roots, int64_t max_bytes) {
  MriSpec spec;
  if (!o.method().empty()) {
    TESSERA_ASSIGN_OR_RETURN(int v, Lookup(kMriMethods, o.method(), "mri.method"));
    spec.method = static_cast<MriMethod>(v);
  }
  TESSERA_RETURN_IF_ERROR(CheckRange("mri.iterations", o.iterations(), 0, kMaxIterations));
  if (o.iterations() > 0) spec.iterations = o.iterations();
  spec.lambda = spec.method == MriMethod::kSense ? 1e-3 : 0.0;
  if (o.has_lambda()) {
    TESSERA_RETURN_IF_ERROR(CheckFiniteRange("mri.lambda", o.lambda(), 0, 1e6));
    spec.lambda = o.lambda();
  }
  if (!o.regularizer().empty()) {
    // Compressed sensing (issue 36): FISTA in place of CG, lambda on BART's scale.
    TESSERA_ASSIGN_OR_RETURN(int v, Lookup(kMriRegularizers, o.regularizer(), "mri.regularizer"));
    if (spec.method != MriMethod::kCgSense) {
      return absl::InvalidArgumentError(absl::StrCat("mri.regularizer: only with method cgsense (method ",
                                                     MriMethodName(spec.method), ")"));
    }
    spec.regularizer = static_cast<MriRegularizer>(v);
    if (!o.has_lambda()) spec.lambda = 0.005;
    if (o.iterations() == 0) spec.iterations = 30;  // bart pics' default
  }
  if (o.acceleration() != 0) TESSERA_RETURN_IF_ERROR(CheckRange("mri.acceleration", o.acceleration(), 2, 8));
  spec.acceleration = o.acceleration();
  if (o.has_tolerance()) {
    TESSERA_RETURN_IF_ERROR(CheckFiniteRange("mri.tolerance", o.tolerance(), 1e-6, 1e-1));
    spec.tolerance = o.tolerance();
  }
  spec.toeplitz = !o.no_toeplitz();
  TESSERA_ASSIGN_OR_RETURN(spec.kspace_path, ResolveMriInput(o.kspace(), "mri.kspace", true, roots, max_bytes));
  TESSERA_ASSIGN_OR_RETURN(spec.trajectory_path,
                           ResolveMriInput(o.trajectory(), "mri.trajectory", false, roots, max_bytes));
  TESSERA_ASSIGN_OR_RETURN(spec.coils_path, ResolveMriInput(o.coils(), "mri.coils", false, roots, max_bytes));
  const bool ismrmrd = IsHdf5Path(spec.kspace_path);
  if (spec.method == MriMethod::kSense) {
    if (!spec.trajectory_path.empty()) {
      return absl::InvalidArgumentError("mri.trajectory: sense reconstructs Cartesian k-space (no trajectory)");
    }
  } else if (!ismrmrd && spec.trajectory_path.empty() && spec.method != MriMethod::kCgSense) {
    // cgsense without a trajectory is Cartesian CG-SENSE (issue 36: 2-D or 3-D).
    return absl::InvalidArgumentError(absl::StrCat("mri.trajectory: required for ", MriMethodName(spec.method),
                                                   " with BART input (ISMRMRD files carry their own)"));
  }
  if (!o.coil_estimation().empty()) {
    if (o.coil_estimation() != "espirit") {
      return absl::InvalidArgumentError(absl::StrCat("mri.coil_estimation: unknown \"", o.coil_estimation(),
                                                     "\" (espirit, or empty for maps from mri.coils)"));
    }
    if (!spec.coils_path.empty()) {
      return absl::InvalidArgumentError("mri.coil_estimation: espirit estimates the coil maps; give no mri.coils");
    }
    spec.espirit = true;
  }
  if (o.calibration_size() != 0) {
    if (!spec.espirit) return absl::InvalidArgumentError("mri.calibration_size: only with coil_estimation espirit");
    TESSERA_RETURN_IF_ERROR(CheckRange("mri.calibration_size", o.calibration_size(), 8, 64));
    spec.calibration_size = o.calibration_size();
  }
  if (o.has_espirit_crop()) {
    if (!spec.espirit) return absl::InvalidArgumentError("mri.espirit_crop: only with coil_estimation espirit");
    if (!std::isfinite(o.espirit_crop()) || o.espirit_crop() < 0 || o.espirit_crop() >= 1) {
      return absl::InvalidArgumentError(absl::StrCat("mri.espirit_crop must be in [0, 1), got ", o.espirit_crop()));
    }
    spec.espirit_crop = o.espirit_crop();
  }
  if (spec.method != MriMethod::kAdjoint && spec.coils_path.empty() && !spec.espirit) {
    return absl::InvalidArgumentError(absl::StrCat("mri.coils: ", MriMethodName(spec.method),
                                                   " needs coil sensitivities (a cfl, or coil_estimation espirit)"));
  }
  if (!spec.coils_path.empty() && IsHdf5Path(spec.coils_path)) {
    return absl::InvalidArgumentError("mri.coils: coil sensitivities are read from a BART .cfl/.hdr pair");
  }
  return spec;
}

absl::StatusOr<UltrasoundSpec> ParseUltrasound(const v1::UltrasoundOptions& o, const std::vector<std::string>& roots,
                                               int64_t max_bytes) {
  UltrasoundSpec spec;
  if (!o.method().empty()) {
    TESSERA_ASSIGN_OR_RETURN(int v, Lookup(kUltrasoundMethods, o.method(), "ultrasound.method"));
    spec.method = static_cast<UltrasoundMethod>(v);
  }
  TESSERA_ASSIGN_OR_RETURN(spec.channel_data_path,
                           ResolveFile(o.channel_data(), "ultrasound.channel_data", true, roots, max_bytes));
  if (o.subarray() != 0) TESSERA_RETURN_IF_ERROR(CheckRange("ultrasound.subarray", o.subarray(), 1, kMaxSubarray));
  spec.subarray = o.subarray();
  if (o.has_loading()) {
    TESSERA_RETURN_IF_ERROR(CheckFiniteRange("ultrasound.loading", o.loading(), 0, 1e3));
    spec.loading = o.loading();
  }
  if (o.has_dynamic_range_db()) {
    TESSERA_RETURN_IF_ERROR(CheckFiniteRange("ultrasound.dynamic_range_db", o.dynamic_range_db(), 1, 200));
    spec.dynamic_range_db = o.dynamic_range_db();
  }
  if (o.has_f_number()) {
    TESSERA_RETURN_IF_ERROR(CheckFiniteRange("ultrasound.f_number", o.f_number(), 0, 100));
    spec.f_number = o.f_number();
  }
  for (const auto& [field, values, out] :
       {std::make_tuple("ultrasound.x_mm", &o.x_mm(), &spec.x_mm), std::make_tuple("ultrasound.z_mm", &o.z_mm(), &spec.z_mm)}) {
    if (values->empty()) continue;
    if (values->size() != 2 || !std::isfinite((*values)[0]) || !std::isfinite((*values)[1]) ||
        !((*values)[0] < (*values)[1])) {
      return absl::InvalidArgumentError(absl::StrCat(field, " must be [min, max] with min < max, got [",
                                                     absl::StrJoin(*values, ", "), "]"));
    }
    out->assign(values->begin(), values->end());
  }
  if (!o.pixels().empty()) {
    if (o.pixels_size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat("ultrasound.pixels must be [nx, nz], got ", o.pixels_size(),
                                                     " values"));
    }
    TESSERA_RETURN_IF_ERROR(CheckRange("ultrasound.pixels[0]", o.pixels(0), 1, kMaxImagePixels));
    TESSERA_RETURN_IF_ERROR(CheckRange("ultrasound.pixels[1]", o.pixels(1), 1, kMaxImagePixels));
    spec.nx = o.pixels(0);
    spec.nz = o.pixels(1);
  }
  return spec;
}

absl::StatusOr<CtSpec> ParseCt(const v1::CtOptions& o) {
  CtSpec spec;
  if (!o.method().empty()) {
    TESSERA_ASSIGN_OR_RETURN(spec.method, ParseCtMethod(o.method()));
    spec.method_given = true;
  }
  if (!o.filter().empty()) {
    absl::StatusOr<recon::fbp::FilterKind> filter = recon::fbp::ParseFilterKind(o.filter());
    if (!filter.ok()) return Annotate(filter.status(), "ct.filter");
    spec.filter = *filter;
  }
  if (o.has_filter_cutoff()) {
    if (!(o.filter_cutoff() > 0 && o.filter_cutoff() <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat("ct.filter_cutoff must be in (0, 1], got ", o.filter_cutoff()));
    }
    spec.filter_cutoff = o.filter_cutoff();
  }
  if (o.has_relaxation()) {
    if (!(o.relaxation() > 0 && o.relaxation() < 2)) {
      return absl::InvalidArgumentError(absl::StrCat("ct.relaxation must be in (0, 2), got ", o.relaxation()));
    }
    spec.relaxation = o.relaxation();
  }
  if (o.has_device_memory_gib()) {
    // 0: the device's free memory less a margin. The upper bound only keeps
    // the byte count far from overflow (no GPU has 64 TiB).
    constexpr double kMaxDeviceMemoryGib = 65536;
    if (!(std::isfinite(o.device_memory_gib()) && o.device_memory_gib() >= 0 &&
          o.device_memory_gib() <= kMaxDeviceMemoryGib)) {
      return absl::InvalidArgumentError(absl::StrCat("ct.device_memory_gib must be in [0, ", kMaxDeviceMemoryGib,
                                                     "] (0: free device memory less a margin), got ",
                                                     o.device_memory_gib()));
    }
    spec.device_memory_gib = o.device_memory_gib();
  }
  TESSERA_RETURN_IF_ERROR(CheckRange("ct.iterations", o.iterations(), 0, kMaxIterations));
  TESSERA_RETURN_IF_ERROR(CheckRange("ct.subsets", o.subsets(), 0, kMaxSubsets));
  spec.iterations = o.iterations();
  spec.subsets = o.subsets();
  spec.non_negative = o.non_negative();
  // Parker / offset-detector weights (fbp/redundancy_weights.h): on unless
  // "none"; "derivative": the weights after a derivative + Hilbert filter
  // (fbp/short_scan_derivative.h).
  if (o.redundancy_weights() == "none" || o.redundancy_weights() == "derivative") {
    if (spec.method != CtMethod::kFbp && spec.method != CtMethod::kFdk) {
      return absl::InvalidArgumentError(absl::StrCat("ct.redundancy_weights \"", o.redundancy_weights(),
                                                     "\" applies to fbp/fdk only (method ", CtMethodName(spec.method),
                                                     ")"));
    }
    if (o.redundancy_weights() == "none") {
      spec.redundancy_weights = false;
    } else {
      spec.derivative_filtering = true;
    }
  } else if (!o.redundancy_weights().empty() && o.redundancy_weights() != "auto") {
    return absl::InvalidArgumentError(absl::StrCat(
        "ct.redundancy_weights must be \"auto\", \"none\" or \"derivative\", got \"", o.redundancy_weights(), "\""));
  }
  if (spec.subsets > 1 && spec.method != CtMethod::kOsSart && spec.method != CtMethod::kAsdPocs) {
    return absl::InvalidArgumentError(
        absl::StrCat("ct.subsets applies to os-sart and asd-pocs only (method ", CtMethodName(spec.method), ")"));
  }
  // TV-regularised methods (issue 36): tv_weight and tv_iterations belong to them.
  const bool tv_method = spec.method == CtMethod::kFistaTv || spec.method == CtMethod::kAsdPocs;
  if ((o.has_tv_weight() || o.tv_iterations() != 0) && !tv_method) {
    return absl::InvalidArgumentError(absl::StrCat("ct.", o.has_tv_weight() ? "tv_weight" : "tv_iterations",
                                                   " applies to fista-tv and asd-pocs only (method ",
                                                   CtMethodName(spec.method), ")"));
  }
  if (o.has_tv_weight()) {
    if (!(std::isfinite(o.tv_weight()) && o.tv_weight() > 0)) {
      return absl::InvalidArgumentError(absl::StrCat("ct.tv_weight must be finite and > 0, got ", o.tv_weight()));
    }
    spec.tv_weight = o.tv_weight();
  }
  TESSERA_RETURN_IF_ERROR(CheckRange("ct.tv_iterations", o.tv_iterations(), 0, kMaxIterations));
  if (o.tv_iterations() > 0) spec.tv_iterations = o.tv_iterations();
  // A finer reconstruction grid (grid_subdivision.h): for the iterative
  // methods, whose pixel model it refines; fbp/fdk sample a filtered
  // back-projection at voxel centres and would only blur by averaging.
  TESSERA_RETURN_IF_ERROR(CheckRange("ct.voxel_subdivision", o.voxel_subdivision(), 0, recon::kMaxVoxelSubdivision));
  if (o.voxel_subdivision() > 1 && (spec.method == CtMethod::kFbp || spec.method == CtMethod::kFdk)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ct.voxel_subdivision applies to the iterative methods only (sart, os-sart, cgls, fista-tv, asd-pocs; method ",
        spec.method_given ? CtMethodName(spec.method) : "fbp/fdk, the default", ")"));
  }
  if (o.voxel_subdivision() > 0) spec.voxel_subdivision = o.voxel_subdivision();
  switch (spec.method) {
    case CtMethod::kFbp:
    case CtMethod::kFdk:
      if (spec.iterations > 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("ct.iterations: ", CtMethodName(spec.method), " is not iterative"));
      }
      break;
    case CtMethod::kSart:
      if (spec.iterations == 0) spec.iterations = 10;
      spec.subsets = 1;
      break;
    case CtMethod::kOsSart:
      if (spec.iterations == 0) spec.iterations = 10;
      if (spec.subsets == 0) spec.subsets = 10;
      break;
    case CtMethod::kCgls:
      if (spec.iterations == 0) spec.iterations = 20;
      spec.subsets = 1;
      break;
    case CtMethod::kFistaTv:
      if (spec.iterations == 0) spec.iterations = 50;
      spec.subsets = 1;
      break;
    case CtMethod::kAsdPocs:
      // OS-ASD-POCS by default: 20 one-subset (SIRT-like) SART passes leave
      // sparse-view data far from converged (bench/results/2026-12-07-cpu-ct-tv.md).
      if (spec.iterations == 0) spec.iterations = 20;
      if (spec.subsets == 0) spec.subsets = 10;
      break;
  }
  return spec;
}

absl::StatusOr<PetSpec> ParsePet(const v1::PetOptions& o) {
  PetSpec spec;
  if (!o.method().empty()) {
    TESSERA_ASSIGN_OR_RETURN(spec.method, ParsePetMethod(o.method()));
  }
  TESSERA_RETURN_IF_ERROR(CheckRange("pet.iterations", o.iterations(), 0, kMaxIterations));
  TESSERA_RETURN_IF_ERROR(CheckRange("pet.subsets", o.subsets(), 0, kMaxSubsets));
  TESSERA_RETURN_IF_ERROR(CheckRange("pet.tof_bins", o.tof_bins(), 0, kMaxTofBins));
  if (spec.method == PetMethod::kMlem) {
    if (o.subsets() > 1) return absl::InvalidArgumentError("pet.subsets applies to osem only (method mlem)");
    spec.subsets = 1;
    spec.iterations = o.iterations() > 0 ? o.iterations() : 20;
  } else {
    spec.subsets = o.subsets() > 0 ? o.subsets() : 8;
    spec.iterations = o.iterations() > 0 ? o.iterations() : 4;
  }
  spec.tof_bins = std::max(1, o.tof_bins());
  if (spec.tof_bins > 1) {
    if (!(o.tof_bin_mm() > 0) || !std::isfinite(o.tof_bin_mm())) {
      return absl::InvalidArgumentError(absl::StrCat("pet.tof_bin_mm must be positive with tof_bins > 1, got ",
                                                     o.tof_bin_mm()));
    }
    if (!(o.tof_fwhm_mm() > 0) || !std::isfinite(o.tof_fwhm_mm())) {
      return absl::InvalidArgumentError(absl::StrCat("pet.tof_fwhm_mm must be positive with tof_bins > 1, got ",
                                                     o.tof_fwhm_mm()));
    }
    spec.tof_bin_mm = o.tof_bin_mm();
    spec.tof_fwhm_mm = o.tof_fwhm_mm();
  }
  return spec;
}

}  // namespace

const char* ModalityName(Modality modality) { return NameOf(kModalities, static_cast<int>(modality)); }
const char* CtMethodName(CtMethod method) { return NameOf(kCtMethods, static_cast<int>(method)); }
const char* MriMethodName(MriMethod method) { return NameOf(kMriMethods, static_cast<int>(method)); }
const char* UltrasoundMethodName(UltrasoundMethod method) {
  return NameOf(kUltrasoundMethods, static_cast<int>(method));
}
bool IsHdf5Path(const std::string& path) { return absl::EndsWith(path, ".h5") || absl::EndsWith(path, ".uff"); }
const char* PetMethodName(PetMethod method) { return NameOf(kPetMethods, static_cast<int>(method)); }

absl::StatusOr<CtMethod> ParseCtMethod(const std::string& name) {
  TESSERA_ASSIGN_OR_RETURN(int v, Lookup(kCtMethods, name, "ct.method"));
  return static_cast<CtMethod>(v);
}
absl::StatusOr<PetMethod> ParsePetMethod(const std::string& name) {
  TESSERA_ASSIGN_OR_RETURN(int v, Lookup(kPetMethods, name, "pet.method"));
  return static_cast<PetMethod>(v);
}
absl::StatusOr<ReconSpec> ResolveReconstructRequest(const v1::ReconstructRequest& request,
                                                    const std::vector<std::string>& roots, int64_t max_input_bytes,
                                                    const std::string& default_device) {
  ReconSpec spec;
  spec.max_input_bytes = max_input_bytes;
  switch (request.modality_case()) {
    case v1::ReconstructRequest::kCt: {
      spec.modality = Modality::kCt;
      TESSERA_ASSIGN_OR_RETURN(spec.ct, ParseCt(request.ct()));
      break;
    }
    case v1::ReconstructRequest::kPet: {
      spec.modality = Modality::kPet;
      TESSERA_ASSIGN_OR_RETURN(spec.pet, ParsePet(request.pet()));
      break;
    }
    case v1::ReconstructRequest::kMri: {
      spec.modality = Modality::kMri;
      TESSERA_ASSIGN_OR_RETURN(spec.mri, ParseMri(request.mri(), roots, max_input_bytes));
      break;
    }
    case v1::ReconstructRequest::kUltrasound: {
      spec.modality = Modality::kUltrasound;
      TESSERA_ASSIGN_OR_RETURN(spec.ultrasound, ParseUltrasound(request.ultrasound(), roots, max_input_bytes));
      break;
    }
    default:
      return absl::InvalidArgumentError("set ct, pet, mri or ultrasound options (the modality)");
  }
  spec.device = request.device().empty() ? default_device : request.device();
  TESSERA_RETURN_IF_ERROR(CheckDeviceName(spec.device, "device"));
  spec.deterministic = request.deterministic();
  if (!request.output_dir().empty()) {
    absl::StatusOr<std::string> dir = ResolveOutputDirUnderRoots(request.output_dir(), roots);
    if (!dir.ok()) return Annotate(dir.status(), "output_dir");
    spec.output_dir = *std::move(dir);
  }
  // A reconstruction lies on no input series: patient and study only from
  // output.reference_series.
  TESSERA_ASSIGN_OR_RETURN(spec.output, ResolveOutputOptions(request.output(), roots, "", max_input_bytes));
  if (spec.modality == Modality::kMri || spec.modality == Modality::kUltrasound) {
    for (const auto& [source, field] : {std::make_pair(&request.geometry(), "geometry"),
                                        std::make_pair(&request.sinogram(), "sinogram"),
                                        std::make_pair(&request.listmode(), "listmode")}) {
      if (source->source_case() != v1::FileSource::SOURCE_NOT_SET) {
        return absl::InvalidArgumentError(absl::StrCat(field, ": not used by ", ModalityName(spec.modality),
                                                       " (its inputs are in the ", ModalityName(spec.modality),
                                                       " options)"));
      }
    }
    return spec;
  }
  TESSERA_ASSIGN_OR_RETURN(spec.geometry_path,
                           ResolveFile(request.geometry(), "geometry", true, roots, int64_t{64} << 20));
  const bool has_sinogram = request.sinogram().source_case() != v1::FileSource::SOURCE_NOT_SET;
  const bool has_listmode = request.listmode().source_case() != v1::FileSource::SOURCE_NOT_SET;
  if (spec.modality == Modality::kCt && has_listmode) {
    return absl::InvalidArgumentError("listmode: list-mode data is PET only; CT takes a sinogram");
  }
  if (has_sinogram == has_listmode) {
    return absl::InvalidArgumentError(spec.modality == Modality::kCt
                                          ? "sinogram: required"
                                          : "give exactly one of sinogram and listmode");
  }
  if (has_sinogram) {
    TESSERA_ASSIGN_OR_RETURN(spec.sinogram_path,
                             ResolveFile(request.sinogram(), "sinogram", true, roots, max_input_bytes));
  } else {
    TESSERA_ASSIGN_OR_RETURN(spec.listmode_path,
                             ResolveFile(request.listmode(), "listmode", true, roots, max_input_bytes));
  }
  if (spec.modality == Modality::kPet) {
    TESSERA_ASSIGN_OR_RETURN(spec.pet.attenuation_path, ResolveFile(request.pet().attenuation(), "pet.attenuation",
                                                                    false, roots, max_input_bytes));
    // Corrections (issue 36); their values are checked by CheckReconInputs.
    const v1::PetOptions& pet = request.pet();
    for (const auto& [source, field, out] :
         {std::make_tuple(&pet.randoms(), "pet.randoms", &spec.pet.randoms_path),
          std::make_tuple(&pet.scatter(), "pet.scatter", &spec.pet.scatter_path),
          std::make_tuple(&pet.normalization(), "pet.normalization", &spec.pet.normalization_path)}) {
      TESSERA_ASSIGN_OR_RETURN(*out, ResolveFile(*source, field, false, roots, max_input_bytes));
      if (has_listmode && !out->empty() && out != &spec.pet.normalization_path) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ": list-mode data not supported (list-mode OSEM has no per-event background term); "
                   "reconstruct the histogrammed sinogram instead (pet.normalization works with list-mode)"));
      }
    }
  }
  return spec;
}

}  // namespace tessera::reconstruction

// A ReconstructRequest (protos/tessera/v1/reconstruction.proto) checked and
// resolved into plain C++: paths canonicalised under the data roots, methods
// and filters parsed, defaults filled in. Shared by the reconstruction engine
// (services/reconstruction/reconstruction_engine.h), its service adapter and
// `tessera recon`.
#ifndef TESSERA_SERVICES_RECONSTRUCTION_RECONSTRUCTION_REQUEST_H_
#define TESSERA_SERVICES_RECONSTRUCTION_RECONSTRUCTION_REQUEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/dicom/result_volume_output.h"
#include "kernels/reconstruction/fbp/filter.h"
#include "tessera/v1/reconstruction.pb.h"

namespace tessera::reconstruction {

enum class Modality { kCt, kPet, kMri, kUltrasound };

enum class CtMethod { kFbp, kFdk, kSart, kOsSart, kCgls, kFistaTv, kAsdPocs };
enum class PetMethod { kMlem, kOsem };
enum class MriMethod { kAdjoint, kCgSense, kSense };
enum class MriRegularizer { kNone, kL1Wavelet, kTv };  // cgsense: kNone is CG-SENSE, else FISTA
enum class UltrasoundMethod { kDas, kMv };

const char* ModalityName(Modality modality);
const char* CtMethodName(CtMethod method);
const char* PetMethodName(PetMethod method);
const char* MriMethodName(MriMethod method);
const char* UltrasoundMethodName(UltrasoundMethod method);

struct CtSpec {
  CtMethod method = CtMethod::kFbp;  // fbp for 2-D geometries, fdk for cone (when the request leaves it empty)
  bool method_given = false;
  int iterations = 0;                // filled per method when 0
  int subsets = 1;
  recon::fbp::FilterKind filter = recon::fbp::FilterKind::kRamLak;
  double filter_cutoff = 1.0;
  double relaxation = 1.0;
  bool non_negative = false;
  bool redundancy_weights = true;    // fbp/fdk: Parker / offset-detector weights where the geometry needs them
  bool derivative_filtering = false;  // fbp/fdk: ct.redundancy_weights "derivative" (fbp.h ShortScanMethod)
  double tv_weight = 0.002;          // fista-tv (relative to ||A^T y||_inf) / asd-pocs alpha
  int tv_iterations = 20;            // fista-tv / asd-pocs inner TV iterations
  double device_memory_gib = 0;      // CUDA budget for volume + projections; 0: free memory less a margin
  int voxel_subdivision = 1;         // iterative methods: solve on a grid this many times finer, block-average back
};

struct PetSpec {
  PetMethod method = PetMethod::kOsem;
  int iterations = 4;
  int subsets = 8;
  std::string attenuation_path;      // canonical, or empty
  int tof_bins = 1;
  double tof_bin_mm = 0;
  double tof_fwhm_mm = 0;
  // Corrections (canonical paths, or empty): expected counts =
  // normalization * attenuation factors * (A x) + randoms + scatter.
  std::string randoms_path;
  std::string scatter_path;
  std::string normalization_path;
};

// An MRI input names a BART .cfl/.hdr pair by its base path (no extension)
// or an ISMRMRD file by its .h5 path.
struct MriSpec {
  MriMethod method = MriMethod::kCgSense;
  std::string kspace_path;           // canonical
  std::string trajectory_path;       // canonical base path, or empty
  std::string coils_path;            // canonical base path, or empty
  int iterations = 10;
  double lambda = 0;
  int acceleration = 0;              // sense; 0: from the data
  double tolerance = 1e-5;
  bool toeplitz = true;
  bool espirit = false;              // coil maps by ESPIRiT from the k-space, not from coils_path
  int calibration_size = 24;         // espirit
  double espirit_crop = 0.8;         // espirit
  MriRegularizer regularizer = MriRegularizer::kNone;  // cgsense: FISTA with lambda as BART pics -R's
};

struct UltrasoundSpec {
  UltrasoundMethod method = UltrasoundMethod::kDas;
  std::string channel_data_path;     // canonical
  int subarray = 0;                  // 0: channels / 2
  double loading = 0.01;
  double dynamic_range_db = 60;
  std::vector<double> x_mm, z_mm;    // [min, max] or empty (default extent)
  int nx = 256, nz = 256;
  double f_number = 1.5;
};

// True for paths ending in ".h5" (ISMRMRD / UFF); otherwise a cfl base path.
bool IsHdf5Path(const std::string& path);

struct ReconSpec {
  Modality modality = Modality::kCt;
  std::string geometry_path;         // canonical paths under the data roots
  std::string sinogram_path;         // empty for list-mode
  std::string listmode_path;         // PET only
  CtSpec ct;
  PetSpec pet;
  MriSpec mri;
  UltrasoundSpec ultrasound;
  std::string device = "auto";       // "auto", "cpu" or "cuda"
  bool deterministic = false;
  std::string output_dir;            // canonical, or empty
  // request.output, checked: reconstruction_dicom/ beside or instead of the
  // output_dir's reconstruction.nii.gz (services/common/output_options.h).
  dicom::ResultOutputPlan output;
  int64_t max_input_bytes = 0;
};

// INVALID_ARGUMENT naming the field for a bad option or a missing input (an
// upload_id is refused: the service rewrites uploads to server paths before
// submitting); NOT_FOUND / PERMISSION_DENIED for paths (ResolveUnderRoots);
// RESOURCE_EXHAUSTED for an input file over max_input_bytes. Does not read
// the files (ValidateReconInputs does).
absl::StatusOr<ReconSpec> ResolveReconstructRequest(const v1::ReconstructRequest& request,
                                                    const std::vector<std::string>& roots, int64_t max_input_bytes,
                                                    const std::string& default_device);

// Parses "fbp", "os-sart", ... (as the proto and CLI spell them; filters:
// recon::fbp::ParseFilterKind).
absl::StatusOr<CtMethod> ParseCtMethod(const std::string& name);
absl::StatusOr<PetMethod> ParsePetMethod(const std::string& name);

}  // namespace tessera::reconstruction

#endif  // TESSERA_SERVICES_RECONSTRUCTION_RECONSTRUCTION_REQUEST_H_

#include "services/reconstruction/mri_run.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/buffer.h"
#include "common/nifti_io.h"
#include "common/status.h"
#include "kernels/reconstruction/mri/cartesian_operator.h"
#include "kernels/reconstruction/mri/cartesian_sense.h"
#include "kernels/reconstruction/mri/cg_sense.h"
#include "kernels/reconstruction/mri/cs_sense.h"
#include "kernels/reconstruction/mri/density_compensation.h"
#include "kernels/reconstruction/mri/espirit.h"
#include "kernels/reconstruction/mri/espirit3d.h"
#include "kernels/reconstruction/mri/espirit_gridding.h"
#include "kernels/reconstruction/mri/espirit_gridding3d.h"
#include "kernels/reconstruction/mri/noncartesian_3d.h"
#include "kernels/reconstruction/mri/sense_stack.h"
#include "kernels/reconstruction/mri/trajectory.h"
#include "services/reconstruction/formats/cfl.h"
#include "services/reconstruction/formats/ismrmrd_reader.h"
#include "services/reconstruction/recon_run_util.h"

namespace tessera::reconstruction {
namespace {

namespace fs = std::filesystem;
namespace formats = recon::formats;
namespace mri = recon::mri;
using Complex = std::complex<float>;

constexpr char kImageFile[] = "reconstruction.nii.gz";
constexpr char kCflBase[] = "reconstruction";

// The inputs in BART's layout, read and checked against each other.
struct MriInputs {
  bool cartesian = false;
  formats::CflArray kspace, trajectory, maps;  // maps empty without coils
  bool has_maps = false;
  int64_t nx = 0, ny = 0;
  int64_t nz = 1;  // issue 36: > 1 for a 3-D volume (maps' / Cartesian k-space's dimension 2)
  int coils = 0;
  mri::Trajectory2D traj;                      // non-Cartesian (3-D: samples and spokes only)
  mri::Trajectory3D traj3;                     // non-Cartesian 3-D
  bool cartesian_cg = false;                   // cgsense on Cartesian k-space (FFT encoding, 2-D or 3-D)
  std::array<double, 3> voxel_mm = {1, 1, 1};  // from ISMRMRD's field of view, else 1 mm
  // A stack (issue 40): frames x slices 2-D images on the one trajectory,
  // frame fastest (BART's TIME_DIM 10 before SLICE_DIM 13).
  int64_t frames = 1, slices = 1;
  bool maps_per_slice = false;  // else one map set for every slice
  std::string maps_note;        // how the maps were made, for the result's geometry (espirit)
  int64_t images() const { return frames * slices; }
};

// The whole array, or (for submit-time checks of possibly large inputs) its
// header and the .cfl's size only.
absl::StatusOr<formats::CflArray> ReadCflInput(const std::string& path, const char* field, bool with_data) {
  absl::StatusOr<formats::CflArray> a = with_data ? formats::ReadCfl(path) : formats::ReadCflHeader(path);
  if (!a.ok()) return Annotate(a.status(), field);
  return a;
}

// Image size for an adjoint without maps: the smallest even N covering the
// trajectory's largest |k| (k in 1/FOV spans [-N/2, N/2)), as BART estimates it.
int64_t ImageSizeFromTrajectory(const mri::Trajectory2D& t) {
  double kmax = 0;
  for (int64_t i = 0; i < t.size(); ++i) kmax = std::max({kmax, std::abs(double{t.kx[i]}), std::abs(double{t.ky[i]})});
  return std::max<int64_t>(2, 2 * static_cast<int64_t>(std::ceil(kmax)));
}

// Issue 36: 3-D ESPIRiT (espirit3d.h, on the CPU) for the nx x ny x nz volume:
// from Cartesian k-space, or the centre of the 3-D trajectory in->traj3 gridded.
absl::Status EstimateEspiritMaps3d(const MriSpec& m, MriInputs* in) {
  mri::EspiritOptions options;
  options.calibration_size = m.calibration_size;
  options.crop = m.espirit_crop;
  const std::array<int64_t, 3> dims = {in->nx, in->ny, in->nz};
  const mri::Trajectory3D& t = in->traj3;
  absl::StatusOr<mri::EspiritMaps> maps =
      in->cartesian ? mri::Espirit3dCartesian(in->kspace.data.data(), dims, in->coils, options)
                    : mri::Espirit3dNonCartesian(Stream::Cpu(), t.size(), t.kx.data(), t.ky.data(), t.kz.data(),
                                                 in->kspace.data.data(), in->coils, dims, options);
  if (!maps.ok()) return Annotate(maps.status(), "mri.coil_estimation");
  TESSERA_ASSIGN_OR_RETURN(in->maps, formats::MakeCfl({in->nx, in->ny, in->nz, in->coils}));
  in->maps.data = std::move(maps->maps);
  in->has_maps = true;
  in->maps_note = absl::StrFormat("coil maps: ESPIRiT 3-D (calibration %lld x %lld x %lld)",
                                  static_cast<long long>(maps->calibration_x),
                                  static_cast<long long>(maps->calibration_y),
                                  static_cast<long long>(maps->calibration_z));
  return absl::OkStatus();
}

// Issue 36: the coil maps by ESPIRiT from the k-space (Cartesian centre, or
// the non-Cartesian centre gridded) instead of read from mri.coils; with_data
// false checks the sizes only. A volume (nz > 1) takes 3-D ESPIRiT, whose
// calibration box is min(calibration_size, nz) deep.
absl::Status EstimateEspiritMaps(const MriSpec& m, bool with_data, MriInputs* in) {
  if (in->images() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("mri.coil_estimation: espirit takes one 2-D image, the k-space is a "
                                                   "stack of ", in->images(), "; give mri.coils"));
  }
  if (in->nx > 0 && (m.calibration_size > in->nx || m.calibration_size > in->ny)) {
    return absl::InvalidArgumentError(absl::StrCat("mri.calibration_size: ", m.calibration_size,
                                                   " exceeds the image size ", in->nx, " x ", in->ny));
  }
  if (!with_data) return absl::OkStatus();
  if (in->nz > 1) return EstimateEspiritMaps3d(m, in);
  mri::EspiritOptions options;
  options.calibration_size = m.calibration_size;
  options.crop = m.espirit_crop;
  absl::StatusOr<mri::EspiritMaps> maps =
      in->cartesian ? mri::EspiritCartesian(in->kspace.data.data(), in->nx, in->ny, in->coils, options)
                    : mri::EspiritNonCartesian(in->traj, in->kspace.data.data(), in->coils, in->nx, in->ny, options);
  if (!maps.ok()) return Annotate(maps.status(), "mri.coil_estimation");
  TESSERA_ASSIGN_OR_RETURN(in->maps, formats::MakeCfl({in->nx, in->ny, 1, in->coils}));
  in->maps.data = std::move(maps->maps);
  in->has_maps = true;
  in->maps_note = absl::StrFormat("coil maps: ESPIRiT (calibration %lld^2)",
                                  static_cast<long long>(std::max(maps->calibration_x, maps->calibration_y)));
  return absl::OkStatus();
}

// Issue 36: cgsense on Cartesian k-space nx x ny x nz x coils (zero where not
// sampled) with maps of the same shape: one image or volume, no stack.
absl::StatusOr<MriInputs> CartesianCgInputs(const MriSpec& m, bool with_data, MriInputs in) {
  const formats::CflArray& k = in.kspace;
  if (!m.espirit) {  // espirit: maps of the k-space's shape are estimated below
    for (int d = 0; d < formats::kCflDims; ++d) {
      if (in.maps.dim(d) != k.dim(d)) {
        return absl::InvalidArgumentError(absl::StrCat("mri.coils: dimension ", d, " is ", in.maps.dim(d),
                                                       " but the k-space's is ", k.dim(d),
                                                       " (Cartesian cgsense: both nx x ny x nz x coils)"));
      }
    }
  }
  for (int d = formats::kCoilDim + 1; d < formats::kCflDims; ++d) {
    if (k.dim(d) != 1) {
      return absl::InvalidArgumentError(absl::StrCat("mri.kspace: dimension ", d, " is ", k.dim(d),
                                                     "; Cartesian cgsense takes one image or volume "
                                                     "(nx x ny x nz x coils)"));
    }
  }
  if (k.dim(formats::kReadDim) < 2 || k.dim(formats::kPhs1Dim) < 2) {
    return absl::InvalidArgumentError(absl::StrCat("mri.kspace: image ", k.dim(0), " x ", k.dim(1),
                                                   " (each side must be >= 2)"));
  }
  in.nx = k.dim(formats::kReadDim);
  in.ny = k.dim(formats::kPhs1Dim);
  in.nz = k.dim(formats::kPhs2Dim);
  in.coils = static_cast<int>(k.dim(formats::kCoilDim));
  in.cartesian_cg = true;
  if (m.espirit) TESSERA_RETURN_IF_ERROR(EstimateEspiritMaps(m, with_data, &in));
  return in;
}

// Issue 36: non-Cartesian 3-D: maps nx x ny x nz x coils (nz > 1), a
// trajectory with kz (3 x samples x readouts), k-space 1 x samples x readouts
// x coils; one volume (no frames or slices).
absl::StatusOr<MriInputs> NonCartesian3DInputs(const MriSpec& m, bool with_data, MriInputs in) {
  if (m.espirit && !in.has_maps) {
    return absl::InvalidArgumentError("mri.coil_estimation: espirit maps for 3-D non-Cartesian data need the "
                                      "trajectory's values; give mri.coils (nx x ny x nz x coils)");
  }
  absl::StatusOr<formats::NonCartesianDims> dims = formats::CheckNonCartesianCfl(in.kspace, in.trajectory, in.maps);
  if (!dims.ok()) return Annotate(dims.status(), "mri");
  if (in.nz > 1 && in.nz != dims->nz) {  // ISMRMRD's encoded matrix
    return absl::InvalidArgumentError(absl::StrCat("mri.coils: dimension 2 is ", dims->nz, " but ", m.kspace_path,
                                                   " encodes ", in.nz, " partitions"));
  }
  in.nx = dims->nx;
  in.ny = dims->ny;
  in.nz = dims->nz;
  in.coils = dims->coils;
  in.traj.samples = dims->samples;
  in.traj.spokes = dims->spokes;
  if (with_data && in.traj3.kx.empty()) {  // espirit has parsed it already (NonCartesian3DEspiritInputs)
    absl::StatusOr<mri::Trajectory3D> traj = formats::Trajectory3DFromCfl(in.trajectory);
    if (!traj.ok()) return Annotate(traj.status(), "mri.trajectory");
    in.traj3 = *std::move(traj);
  }
  return in;
}

// Whether a 3 x ... trajectory array has a non-zero kz (a 3-D trajectory).
bool TrajectoryHasKz(const formats::CflArray& t) {
  if (t.dim(0) != 3) return false;
  for (size_t j = 2; j < t.data.size(); j += 3) {
    if (t.data[j] != Complex(0, 0)) return true;
  }
  return false;
}

// Issue 36: 3-D non-Cartesian data with mri.coil_estimation espirit: the
// trajectory (with kz), the k-space 1 x samples x readouts x coils, the volume
// from ISMRMRD's encoded matrix or else the trajectory's extent per axis (the
// smallest even N covering max |k|, as ImageSizeFromTrajectory); then the maps
// (with_data).
absl::Status NonCartesian3DEspiritInputs(const MriSpec& m, bool with_data, MriInputs* in) {
  absl::StatusOr<mri::Trajectory3D> traj = formats::Trajectory3DFromCfl(in->trajectory);
  if (!traj.ok()) return Annotate(traj.status(), "mri.trajectory");
  in->traj3 = *std::move(traj);
  const mri::Trajectory3D& t = in->traj3;
  const formats::CflArray& k = in->kspace;
  bool flat = k.dim(0) == 1 && k.dim(1) * k.dim(2) == t.size();
  for (int d = formats::kCoilDim + 1; d < formats::kCflDims; ++d) flat = flat && k.dim(d) == 1;
  if (!flat) {
    return absl::InvalidArgumentError(absl::StrCat("mri.kspace: expected 1 x ", t.samples, " x ", t.spokes,
                                                   " x coils to match the 3-D trajectory (one volume)"));
  }
  in->coils = static_cast<int>(k.dim(formats::kCoilDim));
  in->traj.samples = t.samples;
  in->traj.spokes = t.spokes;
  if (in->nz <= 1 || in->nx <= 0 || in->ny <= 0) {
    double kmax[3] = {0, 0, 0};
    for (int64_t j = 0; j < t.size(); ++j) {
      kmax[0] = std::max(kmax[0], std::abs(double{t.kx[j]}));
      kmax[1] = std::max(kmax[1], std::abs(double{t.ky[j]}));
      kmax[2] = std::max(kmax[2], std::abs(double{t.kz[j]}));
    }
    // (1e-3 below: a float kooshball coordinate of |k| = N/2 may round just above it.)
    in->nx = std::max<int64_t>(2, 2 * static_cast<int64_t>(std::ceil(kmax[0] - 1e-3)));
    in->ny = std::max<int64_t>(2, 2 * static_cast<int64_t>(std::ceil(kmax[1] - 1e-3)));
    in->nz = std::max<int64_t>(2, 2 * static_cast<int64_t>(std::ceil(kmax[2] - 1e-3)));
  }
  TESSERA_RETURN_IF_ERROR(EstimateEspiritMaps(m, /*with_data=*/false, in));  // the size checks
  if (!with_data) return absl::OkStatus();
  return EstimateEspiritMaps3d(m, in);
}

// with_data false: BART inputs are checked from their headers (shapes and file
// sizes) and the trajectory's values are not read; ISMRMRD files are read whole.
absl::StatusOr<MriInputs> ReadInputs(const ReconSpec& spec, bool with_data) {
  const MriSpec& m = spec.mri;
  MriInputs in;
  if (IsHdf5Path(m.kspace_path)) {
    absl::StatusOr<formats::IsmrmrdRawData> raw = formats::ReadIsmrmrd(m.kspace_path);
    if (!raw.ok()) return Annotate(raw.status(), "mri.kspace");
    in.cartesian = raw->cartesian;
    in.kspace = std::move(raw->kspace);
    in.trajectory = std::move(raw->trajectory);
    for (int d = 0; d < 3; ++d) {
      if (raw->matrix[d] > 0 && raw->fov_mm[d] > 0) in.voxel_mm[d] = raw->fov_mm[d] / raw->matrix[d];
    }
    in.nz = raw->matrix[2];  // 3-D (issue 36): the maps must match, checked below
    in.nx = raw->matrix[0];
    in.ny = raw->matrix[1];
  } else {
    TESSERA_ASSIGN_OR_RETURN(in.kspace, ReadCflInput(m.kspace_path, "mri.kspace", with_data));
    if (!m.trajectory_path.empty()) {
      TESSERA_ASSIGN_OR_RETURN(in.trajectory, ReadCflInput(m.trajectory_path, "mri.trajectory", with_data));
    }
    in.cartesian = m.trajectory_path.empty();
  }
  if (!m.coils_path.empty()) {
    TESSERA_ASSIGN_OR_RETURN(in.maps, ReadCflInput(m.coils_path, "mri.coils", with_data));
    in.has_maps = true;
  }
  if (m.method == MriMethod::kSense) {
    if (!in.cartesian) return absl::InvalidArgumentError("mri.kspace: sense needs Cartesian k-space (it has a trajectory)");
    const formats::CflArray& k = in.kspace;
    const formats::CflArray& s = in.maps;
    if (k.dim(formats::kPhs2Dim) != 1 || (!m.espirit && s.dim(formats::kPhs2Dim) != 1)) {
      return absl::InvalidArgumentError("mri: sense is 2-D (k-space and coils must have dimension 2 of size 1); "
                                        "3-D Cartesian k-space takes cgsense");
    }
    for (int d : {formats::kReadDim, formats::kPhs1Dim, formats::kCoilDim}) {
      if (!m.espirit && k.dim(d) != s.dim(d)) {
        return absl::InvalidArgumentError(absl::StrCat("mri: k-space dimension ", d, " is ", k.dim(d),
                                                       " but the coils' is ", s.dim(d)));
      }
    }
    absl::StatusOr<std::array<int64_t, 2>> stack = formats::StackDims(k, {0, 1, formats::kCoilDim});
    if (!stack.ok()) return Annotate(stack.status(), "mri (sense)");
    in.frames = (*stack)[0];
    in.slices = (*stack)[1];
    if (!m.espirit) {  // maps: one set, or one per slice (SLICE_DIM)
      for (int d = 4; d < formats::kCflDims; ++d) {
        if (s.dim(d) == 1 || (d == formats::kSliceDim && s.dim(d) == in.slices)) continue;
        return absl::InvalidArgumentError(absl::StrCat("mri.coils: dimension ", d, " is ", s.dim(d),
                                                       "; give one map set, or one per slice (dimension 13 = ",
                                                       in.slices, ")"));
      }
      in.maps_per_slice = s.dim(formats::kSliceDim) > 1;
    }
    in.nx = k.dim(formats::kReadDim);
    in.ny = k.dim(formats::kPhs1Dim);
    in.coils = static_cast<int>(k.dim(formats::kCoilDim));
    if (m.espirit) TESSERA_RETURN_IF_ERROR(EstimateEspiritMaps(m, with_data, &in));
    return in;
  }
  if (in.cartesian && m.method == MriMethod::kCgSense) return CartesianCgInputs(m, with_data, std::move(in));
  if (in.cartesian) {
    return absl::InvalidArgumentError(absl::StrCat("mri: ", MriMethodName(m.method),
                                                   " reconstructs non-Cartesian data; give a trajectory (or use sense "
                                                   "or cgsense)"));
  }
  if (m.espirit && !in.trajectory.data.empty() && (in.nz > 1 || TrajectoryHasKz(in.trajectory))) {
    TESSERA_RETURN_IF_ERROR(NonCartesian3DEspiritInputs(m, with_data, &in));
    if (!with_data) return in;  // the maps are estimated when the job runs
  }
  const bool three_d = in.has_maps && in.maps.dim(formats::kPhs2Dim) > 1;
  if (three_d) return NonCartesian3DInputs(m, with_data, std::move(in));
  if (in.nz > 1) {  // ISMRMRD's encoded matrix
    return absl::InvalidArgumentError(absl::StrCat("mri.coils: ", m.kspace_path, " encodes ", in.nz,
                                                   " partitions; a 3-D reconstruction needs coil maps nx x ny x nz x "
                                                   "coils (dimension 2 = ", in.nz, ")"));
  }
  if (with_data || !in.trajectory.data.empty()) {
    absl::StatusOr<mri::Trajectory2D> traj = formats::TrajectoryFromCfl(in.trajectory);
    if (!traj.ok()) return Annotate(traj.status(), "mri.trajectory");
    in.traj = *std::move(traj);
  } else {  // the shape TrajectoryFromCfl would see: 3 x samples x spokes
    in.traj.samples = in.trajectory.dim(1);
    in.traj.spokes = in.trajectory.dim(2);
  }
  if (in.has_maps) {
    absl::StatusOr<formats::NonCartesianDims> dims = formats::CheckNonCartesianCfl(in.kspace, in.trajectory, in.maps);
    if (!dims.ok()) return Annotate(dims.status(), "mri");
    in.nx = dims->nx;
    in.ny = dims->ny;
    in.coils = dims->coils;
    in.frames = dims->frames;
    in.slices = dims->slices;
    in.maps_per_slice = dims->maps_per_slice;
  } else {
    const formats::CflArray& k = in.kspace;
    if (k.dim(0) != 1 || k.dim(1) * k.dim(2) != in.traj.size()) {
      return absl::InvalidArgumentError(absl::StrCat("mri.kspace: expected 1 x ", in.traj.samples, " x ",
                                                     in.traj.spokes, " x coils to match the trajectory"));
    }
    absl::StatusOr<std::array<int64_t, 2>> stack = formats::StackDims(k, {1, 2, formats::kCoilDim});
    if (!stack.ok()) return Annotate(stack.status(), "mri");
    in.frames = (*stack)[0];
    in.slices = (*stack)[1];
    in.coils = static_cast<int>(k.dim(formats::kCoilDim));
    if (in.nx <= 0 && !in.traj.kx.empty()) in.nx = in.ny = ImageSizeFromTrajectory(in.traj);
    if (m.espirit) TESSERA_RETURN_IF_ERROR(EstimateEspiritMaps(m, with_data, &in));
  }
  return in;
}

// A host vector in the stream's memory (a copy on the GPU, the data itself on the CPU).
template <typename T>
class OnStream {
 public:
  static absl::StatusOr<OnStream> Make(const std::vector<T>& host, const Stream& stream) {
    OnStream o;
    if (stream.backend() == Backend::kCpu) {
      o.ptr_ = host.data();
      return o;
    }
    TESSERA_ASSIGN_OR_RETURN(o.buffer_, Buffer::Allocate(MemoryKind::kDevice, host.size() * sizeof(T), stream.ordinal()));
    TESSERA_RETURN_IF_ERROR(CopyBytes(o.buffer_->data(), MemoryKind::kDevice, host.data(), MemoryKind::kHost,
                                      host.size() * sizeof(T), stream));
    o.ptr_ = static_cast<const T*>(o.buffer_->data());
    return o;
  }
  const T* get() const { return ptr_; }

 private:
  std::shared_ptr<Buffer> buffer_;
  const T* ptr_ = nullptr;
};

// A result image in the stream's memory, read back to the host.
class ImageOnStream {
 public:
  static absl::StatusOr<ImageOnStream> Make(int64_t pixels, const Stream& stream) {
    ImageOnStream o;
    o.host_.assign(pixels, Complex(0, 0));
    o.stream_ = &stream;
    if (stream.backend() == Backend::kCuda) {
      TESSERA_ASSIGN_OR_RETURN(o.buffer_, Buffer::Allocate(MemoryKind::kDevice, pixels * sizeof(Complex), stream.ordinal()));
    }
    return o;
  }
  Complex* get() { return buffer_ ? static_cast<Complex*>(buffer_->data()) : host_.data(); }
  absl::StatusOr<std::vector<Complex>> ToHost() {
    if (buffer_) {
      TESSERA_RETURN_IF_ERROR(CopyBytes(host_.data(), MemoryKind::kHost, buffer_->data(), MemoryKind::kDevice,
                                        host_.size() * sizeof(Complex), *stream_));
    }
    TESSERA_RETURN_IF_ERROR(stream_->Synchronize());
    return host_;
  }

 private:
  std::vector<Complex> host_;
  std::shared_ptr<Buffer> buffer_;
  const Stream* stream_ = nullptr;
};

// CG iterations as progress (and residuals in the result).
std::function<absl::Status(int, int, double)> CgProgress(const ReconRunContext& ctx, v1::ReconstructionResult* result) {
  return [&ctx, result](int iteration, int total, double residual) -> absl::Status {
    result->add_residual_norms(residual);
    Report(ctx, "reconstruct", iteration, total, IterationFraction(iteration, total), {{"residual", residual}},
           absl::StrFormat("CG-SENSE iteration %d of %d", iteration, total));
    return Continue(ctx);
  };
}

// The NUFFT options every non-Cartesian path takes from the request (the
// Toeplitz choice is each caller's: the adjoint needs no kernel).
mri::SenseOperatorOptions NufftOptionsOf(const ReconSpec& spec) {
  mri::SenseOperatorOptions o;
  o.nufft_tolerance = spec.mri.tolerance;
  o.mode = spec.deterministic ? recon::ExecutionMode::kDeterministic : recon::ExecutionMode::kDefault;
  return o;
}

// The Cartesian FFT encoding operator (cartesian_operator.h) for the
// k-space's non-zero pattern, with the mask it reads (on the CPU `d_mask`
// points into `mask`, whose buffer a move keeps).
struct CartesianEncoding {
  std::vector<float> mask;
  OnStream<float> d_mask;
  std::unique_ptr<mri::CartesianSenseOperator> op;
  int64_t sampled = 0;  // k-space locations with a non-zero value
};

absl::StatusOr<CartesianEncoding> MakeCartesianEncoding(const MriInputs& in, const Complex* maps,
                                                        const Stream& stream) {
  CartesianEncoding e;
  e.mask = mri::SamplingMask(in.kspace.data.data(), in.nx * in.ny * in.nz, in.coils, &e.sampled);
  if (e.sampled == 0) return absl::InvalidArgumentError("mri.kspace: every value is zero (nothing sampled)");
  TESSERA_ASSIGN_OR_RETURN(e.d_mask, OnStream<float>::Make(e.mask, stream));
  absl::StatusOr<std::unique_ptr<mri::CartesianSenseOperator>> op =
      mri::CartesianSenseOperator::Create(stream, {in.nx, in.ny, in.nz, in.coils, maps, e.d_mask.get()});
  if (!op.ok()) return Annotate(op.status(), "mri");
  e.op = *std::move(op);
  return e;
}

// Issue 36: CG-SENSE with the Cartesian FFT encoding operator; the sampling
// mask is the k-space's non-zero pattern (cartesian_operator.h).
absl::StatusOr<std::vector<Complex>> ReconstructCartesianCg(const ReconSpec& spec, const MriInputs& in,
                                                            const ReconRunContext& ctx, const Stream& stream,
                                                            v1::ReconstructionResult* result) {
  const MriSpec& m = spec.mri;
  const int64_t voxels = in.nx * in.ny * in.nz;
  TESSERA_ASSIGN_OR_RETURN(auto maps, OnStream<Complex>::Make(in.maps.data, stream));
  TESSERA_ASSIGN_OR_RETURN(auto kspace, OnStream<Complex>::Make(in.kspace.data, stream));
  TESSERA_ASSIGN_OR_RETURN(ImageOnStream image, ImageOnStream::Make(voxels, stream));
  TESSERA_ASSIGN_OR_RETURN(CartesianEncoding encoding, MakeCartesianEncoding(in, maps.get(), stream));
  const int64_t sampled = encoding.sampled;
  result->set_geometry(absl::StrFormat(
      "Cartesian %s %lld x %lld x %lld, %d coils, %lld of %lld k-space locations sampled (R = %.2f; the mask is the "
      "non-zero pattern), CG-SENSE with the FFT encoding operator",
      in.nz > 1 ? "3-D" : "2-D", static_cast<long long>(in.nx), static_cast<long long>(in.ny),
      static_cast<long long>(in.nz), in.coils, static_cast<long long>(sampled), static_cast<long long>(voxels),
      static_cast<double>(voxels) / sampled));
  mri::CgSenseOptions options;
  options.iterations = m.iterations;
  options.lambda = m.lambda;
  options.progress = CgProgress(ctx, result);
  absl::StatusOr<mri::CgSenseResult> r = mri::CgSense(stream, *encoding.op, kspace.get(), options, image.get());
  if (!r.ok()) return Annotate(r.status(), "mri");
  result->set_iterations(r->cg.iterations);
  return image.ToHost();
}

// Issue 36: a 3-D non-Cartesian volume: a stack of stars through the kz FFT
// and the 2-D slice stack, anything else through the 3-D NUFFT
// (noncartesian_3d.h); the result's geometry names the path.
absl::StatusOr<std::vector<Complex>> ReconstructNonCartesian3D(const ReconSpec& spec, const MriInputs& in,
                                                               const ReconRunContext& ctx, const Stream& stream,
                                                               v1::ReconstructionResult* result) {
  const MriSpec& m = spec.mri;
  const mri::Trajectory3D& t = in.traj3;
  mri::NonCartesian3D problem{in.nx,       in.ny,       in.nz,       in.coils,           t.size(),
                              t.kx.data(), t.ky.data(), t.kz.data(), in.kspace.data.data(), in.maps.data.data(),
                              nullptr};
  mri::Recon3DOptions options;
  options.adjoint_only = m.method == MriMethod::kAdjoint;
  options.cg.iterations = m.iterations;
  options.cg.lambda = m.lambda;
  options.cg.use_toeplitz = m.toeplitz;
  options.cg.nufft = NufftOptionsOf(spec);
  // The stack-of-stars path (kz FFT + 2-D slices) is the cheaper exact one on
  // the CPU (7.7x at 128^3, 8 coils); on CUDA the 3-D NUFFT is (3.7x on an
  // H100, 0.29 vs 1.09 s: the slice path's kz FFT runs on the host and its
  // slices one after another; bench/results/2026-12-07-h100-recon-depth.md).
  options.allow_stack_of_stars = stream.backend() == Backend::kCpu;
  const bool stack =
      options.allow_stack_of_stars &&
      mri::DetectStackOfStars(t.size(), t.kx.data(), t.ky.data(), t.kz.data(), nullptr, in.nz).has_value();
  std::vector<float> density;
  if (options.adjoint_only) {
    Report(ctx, "reconstruct", 0, 1, 0.1, {}, "density compensation (3-D)");
    absl::StatusOr<std::vector<float>> d = mri::DensityCompensation3D(problem, t.samples);
    if (!d.ok()) return Annotate(d.status(), "mri.trajectory");
    density = *std::move(d);
    problem.density_weights = density.data();
  }
  if (stack) {  // slices finish on several workers: progress per slice
    options.slice_done = [&](int64_t, int64_t finished, int64_t total) -> absl::Status {
      Report(ctx, "reconstruct", finished, total, IterationFraction(finished, total), {},
             absl::StrFormat("slice %lld of %lld done (stack of stars)", static_cast<long long>(finished),
                             static_cast<long long>(total)));
      return Continue(ctx);
    };
  } else if (!options.adjoint_only) {
    options.cg.progress = CgProgress(ctx, result);
  }
  std::vector<Complex> image(in.nx * in.ny * in.nz);
  absl::StatusOr<mri::Recon3DResult> r = mri::ReconstructNonCartesian3D(stream, problem, options, image.data());
  if (!r.ok()) return Annotate(r.status(), "mri");
  result->set_geometry(absl::StrFormat("non-Cartesian 3-D %lld x %lld x %lld, %lld samples x %lld readouts, %d coils, "
                                       "path: %s",
                                       static_cast<long long>(in.nx), static_cast<long long>(in.ny),
                                       static_cast<long long>(in.nz), static_cast<long long>(t.samples),
                                       static_cast<long long>(t.spokes), in.coils, mri::Path3DName(r->path)));
  if (!options.adjoint_only) {
    result->set_iterations(r->iterations);
    if (stack) result->add_residual_norms(r->relative_residual);
  }
  return image;
}

// Issue 36: compressed sensing (cgsense with a regularizer): FISTA with the
// L1-wavelet or TV prox (cs_sense.h, lambda on BART's scale) on the Cartesian
// FFT operator, the 3-D NUFFT or the 2-D one (Toeplitz normal operator unless
// no_toeplitz). A stack's images run one after another on one operator (maps
// swapped per map set); progress per iteration for one image, per image for a
// stack.
absl::StatusOr<std::vector<Complex>> ReconstructCs(const ReconSpec& spec, const MriInputs& in,
                                                   const ReconRunContext& ctx, const Stream& stream,
                                                   v1::ReconstructionResult* result) {
  const MriSpec& m = spec.mri;
  const int64_t voxels = in.nx * in.ny * in.nz, images = in.images();
  TESSERA_ASSIGN_OR_RETURN(auto maps, OnStream<Complex>::Make(in.maps.data, stream));
  TESSERA_ASSIGN_OR_RETURN(auto kspace, OnStream<Complex>::Make(in.kspace.data, stream));
  TESSERA_ASSIGN_OR_RETURN(ImageOnStream image, ImageOnStream::Make(images * voxels, stream));
  absl::StatusOr<OnStream<float>> kx, ky, kz;
  absl::StatusOr<CartesianEncoding> cartesian;
  std::unique_ptr<mri::SenseOperator> sense;  // non-Cartesian: maps swapped per map set
  mri::EncodingOperator* op = nullptr;
  int64_t kspace_per_image = 0;
  std::string encoding;
  if (in.cartesian_cg) {
    cartesian = MakeCartesianEncoding(in, maps.get(), stream);
    if (!cartesian.ok()) return cartesian.status();
    op = cartesian->op.get();
    encoding = absl::StrFormat("Cartesian %s %lld x %lld x %lld, %d coils, R = %.2f (the mask is the non-zero pattern)",
                               in.nz > 1 ? "3-D" : "2-D", static_cast<long long>(in.nx),
                               static_cast<long long>(in.ny), static_cast<long long>(in.nz), in.coils,
                               static_cast<double>(voxels) / cartesian->sampled);
  } else {
    const bool three_d = in.nz > 1;
    mri::SenseGeometry g;
    g.nx = in.nx;
    g.ny = in.ny;
    g.nz = in.nz;
    g.coils = in.coils;
    g.maps = maps.get();
    g.points = three_d ? in.traj3.size() : in.traj.size();
    TESSERA_ASSIGN_OR_RETURN(kx, OnStream<float>::Make(three_d ? in.traj3.kx : in.traj.kx, stream));
    TESSERA_ASSIGN_OR_RETURN(ky, OnStream<float>::Make(three_d ? in.traj3.ky : in.traj.ky, stream));
    g.kx = kx->get();
    g.ky = ky->get();
    if (three_d) {
      TESSERA_ASSIGN_OR_RETURN(kz, OnStream<float>::Make(in.traj3.kz, stream));
      g.kz = kz->get();
    }
    mri::SenseOperatorOptions nufft = NufftOptionsOf(spec);
    nufft.use_toeplitz = m.toeplitz;
    absl::StatusOr<std::unique_ptr<mri::SenseOperator>> s = mri::SenseOperator::Create(stream, g, nufft);
    if (!s.ok()) return Annotate(s.status(), "mri");
    sense = *std::move(s);
    op = sense.get();
    kspace_per_image = in.coils * g.points;
    encoding = absl::StrFormat("non-Cartesian %s %lld x %lld x %lld, %lld points, %d coils%s",
                               three_d ? "3-D" : "2-D", static_cast<long long>(in.nx), static_cast<long long>(in.ny),
                               static_cast<long long>(in.nz), static_cast<long long>(g.points), in.coils,
                               images == 1 ? ""
                                           : absl::StrFormat(", %lld frames x %lld slices on one trajectory",
                                                             static_cast<long long>(in.frames),
                                                             static_cast<long long>(in.slices)));
  }
  if (images > 1 && sense == nullptr) {
    return absl::InvalidArgumentError("mri.regularizer: a Cartesian stack is not supported; give one image");
  }
  mri::CsSenseOptions options;
  options.regularizer =
      m.regularizer == MriRegularizer::kTv ? mri::CsRegularizer::kTv : mri::CsRegularizer::kL1Wavelet;
  options.iterations = m.iterations;
  options.lambda = m.lambda;
  const char* name = m.regularizer == MriRegularizer::kTv ? "TV" : "L1-wavelet";
  if (images == 1) {
    options.progress = [&](int iteration, int total, double update) -> absl::Status {
      result->add_residual_norms(update);
      Report(ctx, "reconstruct", iteration, total, IterationFraction(iteration, total), {{"relative_update", update}},
             absl::StrFormat("FISTA (%s) iteration %d of %d", name, iteration, total));
      return Continue(ctx);
    };
  }
  const int64_t pixels_per_map_set = in.coils * voxels;
  const mri::CsImageShape shape{in.nx, in.ny, in.nz};
  mri::CsSenseResult last;
  for (int64_t i = 0; i < images; ++i) {
    if (sense != nullptr && images > 1) {
      const int64_t map_set = in.maps_per_slice ? i / in.frames : 0;
      sense->SetMaps(maps.get() + map_set * pixels_per_map_set);
    }
    absl::StatusOr<mri::CsSenseResult> r =
        mri::CsSense(stream, *op, shape, kspace.get() + i * kspace_per_image, options, image.get() + i * voxels);
    if (!r.ok()) return Annotate(r.status(), images > 1 ? absl::StrCat("mri (image ", i, ")") : "mri");
    last = *r;
    if (images > 1) {
      result->add_residual_norms(r->fista.residual_norms.empty() ? 0 : r->fista.residual_norms.back());
      Report(ctx, "reconstruct", i + 1, images, IterationFraction(static_cast<int>(i + 1), static_cast<int>(images)), {},
             absl::StrFormat("image %lld of %lld done (FISTA, %s)", static_cast<long long>(i + 1),
                             static_cast<long long>(images)));
      TESSERA_RETURN_IF_ERROR(Continue(ctx));
    }
  }
  result->set_iterations(last.fista.iterations);
  result->set_geometry(absl::StrFormat("%s, compressed sensing: FISTA %s, lambda %g on BART's scale (x data scale %g%s)",
                                       encoding, name, m.lambda, last.data_scale, images > 1 ? ", last image" : ""));
  return image.ToHost();
}

absl::StatusOr<std::vector<Complex>> Reconstruct(const ReconSpec& spec, const MriInputs& in, const ReconRunContext& ctx,
                                                 const Stream& stream, v1::ReconstructionResult* result) {
  const MriSpec& m = spec.mri;
  if (m.method == MriMethod::kSense) {
    mri::CartesianSenseOptions options;
    options.reduction = m.acceleration;
    options.axis = 1;
    options.lambda = static_cast<float>(m.lambda);
    Report(ctx, "reconstruct", 0, 1, 0.1, {}, absl::StrFormat("SENSE unfolding, %d coils", in.coils));
    if (in.images() == 1) {
      absl::StatusOr<mri::CartesianSenseResult> r =
          mri::CartesianSense(stream, in.nx, in.ny, in.coils, in.kspace.data, in.maps.data, options);
      if (!r.ok()) return Annotate(r.status(), "mri");
      result->set_geometry(absl::StrFormat("Cartesian 2-D %lld x %lld, %d coils, R = %d (%lld lines outside the class ignored, %lld pixels unsolved)",
                                           static_cast<long long>(in.nx), static_cast<long long>(in.ny), in.coils,
                                           r->reduction, static_cast<long long>(r->ignored_lines),
                                           static_cast<long long>(r->failed_pixels)));
      return std::move(r->image);
    }
    // A stack: each image unfolded alone (its own FFTs and systems; nothing
    // to share between slices but the options), progress per image.
    const int64_t set = in.nx * in.ny * in.coils;
    std::vector<Complex> images;
    images.reserve(in.images() * in.nx * in.ny);
    int64_t failed = 0;
    int reduction = 0;
    for (int64_t i = 0; i < in.images(); ++i) {
      const std::vector<Complex> k(in.kspace.data.begin() + i * set, in.kspace.data.begin() + (i + 1) * set);
      const int64_t map_set = in.maps_per_slice ? i / in.frames : 0;
      const std::vector<Complex> maps(in.maps.data.begin() + map_set * set, in.maps.data.begin() + (map_set + 1) * set);
      absl::StatusOr<mri::CartesianSenseResult> r = mri::CartesianSense(stream, in.nx, in.ny, in.coils, k, maps, options);
      if (!r.ok()) return Annotate(r.status(), absl::StrCat("mri (image ", i, ")"));
      images.insert(images.end(), r->image.begin(), r->image.end());
      failed += r->failed_pixels;
      reduction = r->reduction;
      Report(ctx, "reconstruct", i + 1, in.images(), IterationFraction(static_cast<int>(i + 1), static_cast<int>(in.images())),
             {}, absl::StrFormat("image %lld of %lld done", static_cast<long long>(i + 1),
                                 static_cast<long long>(in.images())));
      TESSERA_RETURN_IF_ERROR(Continue(ctx));
    }
    result->set_geometry(absl::StrFormat("Cartesian 2-D %lld x %lld, %d coils, R = %d, %lld frames x %lld slices (%lld pixels unsolved)",
                                         static_cast<long long>(in.nx), static_cast<long long>(in.ny), in.coils,
                                         reduction, static_cast<long long>(in.frames),
                                         static_cast<long long>(in.slices), static_cast<long long>(failed)));
    return images;
  }

  if (m.method == MriMethod::kCgSense && m.regularizer != MriRegularizer::kNone) {
    return ReconstructCs(spec, in, ctx, stream, result);
  }
  if (in.cartesian_cg) return ReconstructCartesianCg(spec, in, ctx, stream, result);
  if (in.nz > 1) return ReconstructNonCartesian3D(spec, in, ctx, stream, result);

  const mri::SenseOperatorOptions nufft = NufftOptionsOf(spec);
  TESSERA_ASSIGN_OR_RETURN(auto kx, OnStream<float>::Make(in.traj.kx, stream));
  TESSERA_ASSIGN_OR_RETURN(auto ky, OnStream<float>::Make(in.traj.ky, stream));
  TESSERA_ASSIGN_OR_RETURN(auto kspace, OnStream<Complex>::Make(in.kspace.data, stream));
  const int64_t points = in.traj.size(), pixels = in.nx * in.ny, images = in.images();
  result->set_geometry(absl::StrFormat("non-Cartesian 2-D %lld x %lld, %lld samples x %lld readouts, %d coils%s%s",
                                       static_cast<long long>(in.nx), static_cast<long long>(in.ny),
                                       static_cast<long long>(in.traj.samples), static_cast<long long>(in.traj.spokes),
                                       in.coils, in.has_maps ? "" : " (no maps: root-sum-of-squares)",
                                       images == 1 ? ""
                                                   : absl::StrFormat(", %lld frames x %lld slices on one trajectory",
                                                                     static_cast<long long>(in.frames),
                                                                     static_cast<long long>(in.slices))));
  mri::SenseStack stack;
  mri::SenseGeometry& g = stack.geometry;
  g.nx = in.nx;
  g.ny = in.ny;
  g.points = points;
  g.kx = kx.get();
  g.ky = ky.get();
  stack.slices = images;
  stack.slices_per_map_set = in.maps_per_slice ? in.frames : 0;
  // A stack reports each finished image (and checks for cancellation there);
  // one image reports its CG iterations instead.
  mri::SliceDone image_done;
  if (images > 1) {
    image_done = [&](int64_t image, int64_t finished, int64_t total) -> absl::Status {
      Report(ctx, "reconstruct", finished, total, IterationFraction(finished, total), {},
             absl::StrFormat("image %lld of %lld done (frame %lld, slice %lld)", static_cast<long long>(finished),
                             static_cast<long long>(total), static_cast<long long>(image % in.frames),
                             static_cast<long long>(image / in.frames)));
      return Continue(ctx);
    };
  }

  if (m.method == MriMethod::kAdjoint) {
    // Radial diameters: the analytic ramp, exact and O(samples); Pipe-Menon
    // otherwise (its cone must be wider than the gap between neighbouring
    // samples, which an undersampled radial scan exceeds near the edge).
    const bool radial = mri::IsRadialDiameters(in.traj);
    Report(ctx, "reconstruct", 0, 1, 0.1, {},
           radial ? "density compensation (radial ramp)" : "density compensation (Pipe-Menon)");
    absl::StatusOr<std::vector<float>> density =
        radial ? mri::RadialRampDensity(in.traj) : mri::PipeMenonDensity(in.traj);
    if (!density.ok()) return Annotate(density.status(), "mri.trajectory");
    TESSERA_ASSIGN_OR_RETURN(auto weights, OnStream<float>::Make(*density, stream));
    g.density_weights = weights.get();
    if (in.has_maps) {
      TESSERA_ASSIGN_OR_RETURN(auto maps, OnStream<Complex>::Make(in.maps.data, stream));
      TESSERA_ASSIGN_OR_RETURN(ImageOnStream image, ImageOnStream::Make(images * pixels, stream));
      g.coils = in.coils;
      g.maps = maps.get();
      TESSERA_RETURN_IF_ERROR(
          Annotate(mri::AdjointSenseStack(stream, stack, kspace.get(), nufft, image.get(), image_done), "mri"));
      return image.ToHost();
    }
    // Each coil of each image alone (a unit map): a stack of images x coils
    // one-coil images (k-space's own order), combined as the root sum of squares.
    const std::vector<Complex> ones(pixels, Complex(1, 0));
    TESSERA_ASSIGN_OR_RETURN(auto unit, OnStream<Complex>::Make(ones, stream));
    TESSERA_ASSIGN_OR_RETURN(ImageOnStream coil_images, ImageOnStream::Make(images * in.coils * pixels, stream));
    g.coils = 1;
    g.maps = unit.get();
    stack.slices = images * in.coils;
    stack.slices_per_map_set = 0;
    const mri::SliceDone coil_done = [&](int64_t, int64_t finished, int64_t total) -> absl::Status {
      Report(ctx, "reconstruct", finished, total, IterationFraction(finished, total), {},
             absl::StrFormat("coil image %lld of %lld", static_cast<long long>(finished), static_cast<long long>(total)));
      return Continue(ctx);
    };
    TESSERA_RETURN_IF_ERROR(
        Annotate(mri::AdjointSenseStack(stream, stack, kspace.get(), nufft, coil_images.get(), coil_done), "mri"));
    TESSERA_ASSIGN_OR_RETURN(std::vector<Complex> coil, coil_images.ToHost());
    std::vector<Complex> rss(images * pixels);
    for (int64_t i = 0; i < images; ++i) {
      std::vector<float> sum_sq(pixels, 0.f);
      for (int c = 0; c < in.coils; ++c) {
        const Complex* v = coil.data() + (i * in.coils + c) * pixels;
        for (int64_t p = 0; p < pixels; ++p) sum_sq[p] += std::norm(v[p]);
      }
      for (int64_t p = 0; p < pixels; ++p) rss[i * pixels + p] = Complex(std::sqrt(sum_sq[p]), 0);
    }
    return rss;
  }

  // CG-SENSE.
  TESSERA_ASSIGN_OR_RETURN(auto maps, OnStream<Complex>::Make(in.maps.data, stream));
  TESSERA_ASSIGN_OR_RETURN(ImageOnStream image, ImageOnStream::Make(images * pixels, stream));
  g.coils = in.coils;
  g.maps = maps.get();
  mri::CgSenseOptions options;
  options.iterations = m.iterations;
  options.lambda = m.lambda;
  options.use_toeplitz = m.toeplitz;
  options.nufft = nufft;
  if (images == 1) {
    options.progress = [&](int iteration, int total, double residual) -> absl::Status {
      result->add_residual_norms(residual);
      Report(ctx, "reconstruct", iteration, total, IterationFraction(iteration, total), {{"residual", residual}},
             absl::StrFormat("CG-SENSE iteration %d of %d", iteration, total));
      return Continue(ctx);
    };
  }
  absl::StatusOr<std::vector<mri::CgSenseResult>> r =
      mri::CgSenseStack(stream, stack, kspace.get(), options, image.get(), image_done);
  if (!r.ok()) return Annotate(r.status(), "mri");
  int iterations = 0;
  for (const mri::CgSenseResult& slice : *r) {
    iterations = std::max(iterations, slice.cg.iterations);
    if (images > 1) result->add_residual_norms(slice.cg.relative_residual);  // one per image
  }
  result->set_iterations(iterations);
  return image.ToHost();
}

}  // namespace

absl::Status CheckMriInputs(const ReconSpec& spec) { return ReadInputs(spec, /*with_data=*/false).status(); }

absl::Status RunMri(const ReconSpec& spec, const ReconRunContext& ctx, const Stream& stream, ReconOutcome* out) {
  TESSERA_ASSIGN_OR_RETURN(MriInputs in, ReadInputs(spec, /*with_data=*/true));
  TESSERA_RETURN_IF_ERROR(Continue(ctx));
  v1::ReconstructionResult& result = out->result;
  result.set_modality("mri");
  result.set_method(MriMethodName(spec.mri.method));
  TESSERA_ASSIGN_OR_RETURN(std::vector<Complex> image, Reconstruct(spec, in, ctx, stream, &result));
  if (!in.maps_note.empty()) result.set_geometry(absl::StrCat(result.geometry(), ", ", in.maps_note));
  TESSERA_RETURN_IF_ERROR(Continue(ctx));
  Report(ctx, "output", 0, 0, 0.97, {}, "writing reconstruction.nii.gz and reconstruction.cfl");

  // The complex image for BART users (a stack keeps k-space's TIME_DIM and
  // SLICE_DIM), |image| as NIfTI for everyone else (a stack's images along z,
  // frame fastest: z = frame + frames * slice).
  std::vector<int64_t> cfl_dims(formats::kCflDims, 1);
  cfl_dims[formats::kReadDim] = in.nx;
  cfl_dims[formats::kPhs1Dim] = in.ny;
  cfl_dims[formats::kPhs2Dim] = in.nz;
  cfl_dims[formats::kTimeDim] = in.frames;
  cfl_dims[formats::kSliceDim] = in.slices;
  TESSERA_ASSIGN_OR_RETURN(formats::CflArray cfl, formats::MakeCfl(cfl_dims));
  cfl.data = image;
  TESSERA_RETURN_IF_ERROR(formats::WriteCfl((fs::path(ctx.work_dir) / kCflBase).string(), cfl));
  Volume magnitude;
  // A 3-D volume (nz > 1, never a stack) along z like a stack's images.
  const int64_t depth = in.nz * in.images();
  TESSERA_ASSIGN_OR_RETURN(magnitude.data, NDArray::Allocate({in.nx, in.ny, depth}, DType::kFloat32));
  float* v = magnitude.data.data<float>();
  for (int64_t i = 0; i < in.nx * in.ny * depth; ++i) v[i] = std::abs(image[i]);
  magnitude.geometry.spacing = in.voxel_mm;
  magnitude.geometry.origin = {-0.5 * in.nx * in.voxel_mm[0], -0.5 * in.ny * in.voxel_mm[1],
                               in.nz > 1 ? -0.5 * in.nz * in.voxel_mm[2] : 0};
  magnitude.description = absl::StrCat("tessera mri ", MriMethodName(spec.mri.method));
  TESSERA_RETURN_IF_ERROR(WriteNifti(magnitude, (fs::path(ctx.work_dir) / kImageFile).string()));
  out->work_files = {kImageFile, absl::StrCat(kCflBase, ".cfl"), absl::StrCat(kCflBase, ".hdr")};
  for (int64_t d : {in.nx, in.ny, depth}) result.add_dims(d);
  for (double s : in.voxel_mm) result.add_spacing(s);
  return absl::OkStatus();
}

}  // namespace tessera::reconstruction

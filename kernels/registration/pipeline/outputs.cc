#include "kernels/registration/pipeline/outputs.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/nifti_io.h"
#include "common/status.h"
#include "kernels/registration/pipeline/ants_transform_io.h"

namespace tessera::registration {
namespace {

struct Point {
  double x, y, z;
};

Point Apply(const Mat4& m, Point p) {
  return {m[0] * p.x + m[1] * p.y + m[2] * p.z + m[3], m[4] * p.x + m[5] * p.y + m[6] * p.z + m[7],
          m[8] * p.x + m[9] * p.y + m[10] * p.z + m[11]};
}

// Trilinear sample of component `c` of a planar field (or a scalar volume,
// c = 0) at continuous index (i, j, k); `border` clamps, else zero outside.
double Sample(const float* data, const int64_t n[3], int c, Point idx, bool border) {
  double pos[3] = {idx.x, idx.y, idx.z};
  int64_t lo[3];
  double frac[3];
  for (int d = 0; d < 3; ++d) {
    if (border) pos[d] = std::clamp(pos[d], 0.0, static_cast<double>(n[d] - 1));
    lo[d] = static_cast<int64_t>(std::floor(pos[d]));
    frac[d] = pos[d] - lo[d];
  }
  const int64_t voxels = n[0] * n[1] * n[2];
  double s = 0;
  for (int corner = 0; corner < 8; ++corner) {
    int64_t q[3];
    double w = 1;
    bool inside = true;
    for (int d = 0; d < 3; ++d) {
      const int bit = (corner >> d) & 1;
      q[d] = lo[d] + bit;
      w *= bit ? frac[d] : 1 - frac[d];
      if (q[d] < 0 || q[d] >= n[d]) {
        if (border) q[d] = std::clamp<int64_t>(q[d], 0, n[d] - 1);
        else inside = false;
      }
    }
    if (!inside || w == 0) continue;
    s += w * data[c * voxels + q[0] + n[0] * (q[1] + n[1] * q[2])];
  }
  return s;
}

absl::Status MakeDir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create ", dir, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

std::array<double, 3> GridCentre(const Volume& volume) {
  const Point c = Apply(volume.geometry.IndexToWorld(), {(volume.data.dim(0) - 1) / 2.0, (volume.data.dim(1) - 1) / 2.0,
                                                         (volume.data.dim(2) - 1) / 2.0});
  return {c.x, c.y, c.z};
}

absl::StatusOr<NDArray> InvertDisplacement(const NDArray& v, const Geometry& geometry, int iterations) {
  if (v.rank() != 4 || v.dim(3) != 3 || v.dtype() != DType::kFloat32) {
    return absl::InvalidArgumentError("displacement must be float32 (nx, ny, nz, 3)");
  }
  const int64_t n[3] = {v.dim(0), v.dim(1), v.dim(2)};
  const int64_t voxels = n[0] * n[1] * n[2];
  const Mat4 to_world = geometry.IndexToWorld();
  TESSERA_ASSIGN_OR_RETURN(Mat4 to_index, InvertAffine(to_world));
  TESSERA_ASSIGN_OR_RETURN(NDArray w, NDArray::Allocate(v.shape(), DType::kFloat32));
  float* ww = w.data<float>();
  const float* vv = v.data<float>();
  for (int64_t i = 0; i < 3 * voxels; ++i) ww[i] = -vv[i];
  for (int it = 0; it < iterations; ++it) {
    for (int64_t k = 0; k < n[2]; ++k) {
      for (int64_t j = 0; j < n[1]; ++j) {
        for (int64_t i = 0; i < n[0]; ++i) {
          const int64_t at = i + n[0] * (j + n[1] * k);
          const Point y = Apply(to_world, {double(i), double(j), double(k)});
          const Point q = {y.x + ww[at], y.y + ww[voxels + at], y.z + ww[2 * voxels + at]};
          const Point qi = Apply(to_index, q);
          for (int c = 0; c < 3; ++c) ww[c * voxels + at] = static_cast<float>(-Sample(vv, n, c, qi, true));
        }
      }
    }
  }
  return w;
}

absl::StatusOr<NDArray> ApplyAntsTransformsCpu(const Volume& moving, const Volume& fixed_like, const Mat4& affine_ras,
                                               const NDArray& v) {
  TESSERA_ASSIGN_OR_RETURN(NDArray image, moving.data.AsType(DType::kFloat32));
  const int64_t mn[3] = {image.dim(0), image.dim(1), image.dim(2)};
  const int64_t fn[3] = {fixed_like.data.dim(0), fixed_like.data.dim(1), fixed_like.data.dim(2)};
  const int64_t voxels = fn[0] * fn[1] * fn[2];
  const Mat4 fixed_to_world = fixed_like.geometry.IndexToWorld();
  TESSERA_ASSIGN_OR_RETURN(Mat4 moving_to_index, InvertAffine(moving.geometry.IndexToWorld()));
  TESSERA_ASSIGN_OR_RETURN(NDArray out, NDArray::Allocate({fn[0], fn[1], fn[2]}, DType::kFloat32));
  for (int64_t k = 0; k < fn[2]; ++k) {
    for (int64_t j = 0; j < fn[1]; ++j) {
      for (int64_t i = 0; i < fn[0]; ++i) {
        const int64_t at = i + fn[0] * (j + fn[1] * k);
        Point p = Apply(fixed_to_world, {double(i), double(j), double(k)});
        if (!v.empty()) {
          p = {p.x + v.data<float>()[at], p.y + v.data<float>()[voxels + at], p.z + v.data<float>()[2 * voxels + at]};
        }
        const Point m = Apply(moving_to_index, Apply(affine_ras, p));
        out.data<float>()[at] = static_cast<float>(Sample(image.data<float>(), mn, 0, m, false));
      }
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<OutputWriter>> OutputWriter::Start(const RegistrationResult& result,
                                                                  const Volume& fixed, const std::string& dir,
                                                                  bool inverse_warp,
                                                                  const dicom::ResultOutputPlan& formats) {
  TESSERA_RETURN_IF_ERROR(MakeDir(dir));
  std::unique_ptr<OutputWriter> writer(new OutputWriter());
  writer->dir_ = dir;
  writer->fixed_ = &fixed;
  writer->formats_ = formats;
  OutputWriter* w = writer.get();
  writer->thread_ = std::thread([w, &result, &fixed, inverse_warp] { w->WriteTransformOutputs(result, fixed, inverse_warp); });
  return writer;
}

void OutputWriter::WriteTransformOutputs(const RegistrationResult& result, const Volume& fixed, bool inverse_warp) {
  // The warp (the largest file: 3 floats per voxel) is compressed on a
  // thread of its own while the warped image and the affine are written: each
  // file's compression is one core's work.
  absl::Status warp_status;
  std::thread warp_writer;
  if (!result.displacement_ras.empty()) {
    files_.warp = dir_ + "/0Warp.nii.gz";
    warp_writer = std::thread(
        [&] { warp_status = WriteAntsWarp(files_.warp, result.displacement_ras, fixed.geometry); });
  }
  auto run = [&]() -> absl::Status {
    TESSERA_ASSIGN_OR_RETURN(dicom::ResultVolumeFiles warped,
                             dicom::WriteResultVolume(result.warped, dir_, "warped.nii.gz", dicom::ResultVolumeKind::kImage,
                                                      formats_, "tessera register: warped moving image"));
    AddResultVolume(warped, &files_.warped, &files_.warped_dicom);
    files_.affine = dir_ + "/0GenericAffine.mat";
    // ITK convention: the centre is the fixed image's centre (it only changes
    // how the parameters read, not the transform).
    TESSERA_RETURN_IF_ERROR(WriteItkAffine(files_.affine, result.affine_ras, GridCentre(fixed)));
    if (!result.displacement_ras.empty() && inverse_warp) {
      files_.inverse_warp = dir_ + "/0InverseWarp.nii.gz";
      TESSERA_ASSIGN_OR_RETURN(NDArray inverse, InvertDisplacement(result.displacement_ras, fixed.geometry));
      TESSERA_RETURN_IF_ERROR(WriteAntsWarp(files_.inverse_warp, inverse, fixed.geometry));
    }
    return absl::OkStatus();
  };
  status_ = run();
  if (warp_writer.joinable()) warp_writer.join();
  if (status_.ok()) status_ = warp_status;
}

OutputWriter::~OutputWriter() {
  if (thread_.joinable()) thread_.join();
}

void OutputWriter::AddResultVolume(const dicom::ResultVolumeFiles& written, std::string* nifti, std::string* dicom,
                                   OutputFiles* files) {
  if (files == nullptr) files = &files_;
  if (!written.nifti.empty()) *nifti = dir_ + "/" + written.nifti;
  if (written.dicom.empty()) return;
  *dicom = dir_ + "/" + written.dicom;
  for (const std::string& name : written.files) {
    if (name != written.nifti) files->dicom_files.push_back(name);
  }
  files->notes.push_back(written.note);
}

absl::StatusOr<OutputFiles> OutputWriter::Finish(const NDArray* warped_labels) {
  absl::StatusOr<dicom::ResultVolumeFiles> labels;
  if (warped_labels != nullptr) {
    labels = dicom::WriteResultVolume(Volume{*warped_labels, fixed_->geometry, "tessera warped labels"}, dir_,
                                      "warped_labels.nii.gz", dicom::ResultVolumeKind::kLabels, formats_,
                                      "tessera register: warped moving labels");
  }
  if (thread_.joinable()) thread_.join();
  TESSERA_RETURN_IF_ERROR(status_);
  OutputFiles files = files_;
  if (warped_labels != nullptr) {
    TESSERA_RETURN_IF_ERROR(labels.status());
    AddResultVolume(*labels, &files.warped_labels, &files.warped_labels_dicom, &files);
  }
  return files;
}

absl::StatusOr<OutputFiles> WriteRegistrationOutputs(const RegistrationResult& result, const Volume& fixed,
                                                     const std::string& dir, const NDArray* warped_labels,
                                                     bool inverse_warp, const dicom::ResultOutputPlan& formats) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<OutputWriter> writer,
                           OutputWriter::Start(result, fixed, dir, inverse_warp, formats));
  return writer->Finish(warped_labels);
}

}  // namespace tessera::registration

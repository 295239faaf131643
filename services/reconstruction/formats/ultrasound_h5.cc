#include "services/reconstruction/formats/ultrasound_h5.h"

#include <hdf5.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/durable_file.h"
#include "common/status.h"

namespace tessera::recon::formats {
namespace {

namespace us = ::tessera::recon::ultrasound;

// Closes an HDF5 handle with the right function on scope exit.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// HDF5 prints its error stack to stderr unless told not to; errors here are
// returned as statuses instead. (The library is built thread-safe; the
// setting is per thread and restored.)
class QuietHdf5 {
 public:
  QuietHdf5() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietHdf5() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

std::string Dataset(const char* name) { return absl::StrCat(kUltrasoundDatasetGroup, "/", name); }

std::string DimsString(const std::vector<hsize_t>& dims) {
  std::string s;
  for (hsize_t d : dims) absl::StrAppend(&s, "[", d, "]");
  return dims.empty() ? "a scalar" : s;
}

bool Exists(hid_t file, const std::string& path) {
  // H5Lexists needs every intermediate link to exist: walk down.
  size_t pos = 1;
  while (true) {
    const size_t next = path.find('/', pos);
    const std::string prefix = path.substr(0, next);
    if (H5Lexists(file, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (next == std::string::npos) return true;
    pos = next + 1;
  }
}

// Reads a numeric dataset converted to T (double or float).
template <typename T>
absl::Status ReadNumeric(hid_t file, const std::string& file_path, const std::string& name, std::vector<T>* values,
                         std::vector<hsize_t>* dims) {
  if (!Exists(file, name)) return absl::InvalidArgumentError(absl::StrCat(file_path, ": ", name, " is missing"));
  Handle dset(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!dset.ok()) return absl::InvalidArgumentError(absl::StrCat(file_path, ": ", name, " is not a dataset"));
  Handle type(H5Dget_type(dset.get()), H5Tclose);
  const H5T_class_t cls = H5Tget_class(type.get());
  if (cls != H5T_FLOAT && cls != H5T_INTEGER) {
    return absl::InvalidArgumentError(absl::StrCat(file_path, ": ", name, " is not numeric"));
  }
  Handle space(H5Dget_space(dset.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) return absl::DataLossError(absl::StrCat(file_path, ": ", name, ": unreadable dataspace"));
  dims->assign(rank, 0);
  H5Sget_simple_extent_dims(space.get(), dims->data(), nullptr);
  hsize_t count = 1;
  for (hsize_t d : *dims) count *= d;
  if (count > (hsize_t{1} << 33)) {
    return absl::InvalidArgumentError(absl::StrCat(file_path, ": ", name, " is ", DimsString(*dims), " (too large)"));
  }
  values->resize(count);
  const hid_t mem_type = sizeof(T) == sizeof(double) ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT;
  if (count > 0 && H5Dread(dset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values->data()) < 0) {
    return absl::DataLossError(absl::StrCat(file_path, ": cannot read the values of ", name, " (truncated file?)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> ReadScalar(hid_t file, const std::string& path, const char* name) {
  std::vector<double> v;
  std::vector<hsize_t> dims;
  TESSERA_RETURN_IF_ERROR(ReadNumeric(file, path, Dataset(name), &v, &dims));
  if (v.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", Dataset(name), " is ", DimsString(dims), " (expected one value)"));
  }
  return v[0];
}

// Writes a dataset of `dims` from host values of the given native type.
absl::Status Write(hid_t loc, const std::string& path, const char* name, hid_t file_type, hid_t mem_type,
                   const std::vector<hsize_t>& dims, const void* values) {
  Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
  Handle dset(H5Dcreate2(loc, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  if (!space.ok() || !dset.ok() || H5Dwrite(dset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) < 0) {
    return absl::InternalError(absl::StrCat(path, ": cannot write ", name));
  }
  return absl::OkStatus();
}

absl::Status WriteScalar(hid_t loc, const std::string& path, const char* name, double value, hid_t file_type) {
  return Write(loc, path, name, file_type, H5T_NATIVE_DOUBLE, {1}, &value);
}

}  // namespace

absl::StatusOr<us::Acquisition> ReadUltrasoundH5(const std::string& path) {
  QuietHdf5 quiet;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  if (is_hdf5 <= 0) return absl::InvalidArgumentError(absl::StrCat(path, ": not an HDF5 file"));
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) return absl::DataLossError(absl::StrCat(path, ": HDF5 cannot open it (truncated or damaged)"));
  const hid_t f = file.get();
  if (!Exists(f, kUltrasoundDatasetGroup)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no ", kUltrasoundDatasetGroup,
                                                   " group (PICMUS/USTB us_dataset layout expected; USTB .uff "
                                                   "channel_data files are not supported)"));
  }

  us::Acquisition a;
  // Probe.
  std::vector<double> geometry;
  std::vector<hsize_t> dims;
  TESSERA_RETURN_IF_ERROR(ReadNumeric(f, path, Dataset("probe_geometry"), &geometry, &dims));
  int channels = 0;
  bool rows_xyz = true;  // [3][channels]
  if (dims.size() == 2 && dims[0] == 3) {
    channels = static_cast<int>(dims[1]);
  } else if (dims.size() == 2 && dims[1] == 3) {
    channels = static_cast<int>(dims[0]);
    rows_xyz = false;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", Dataset("probe_geometry"), " is ", DimsString(dims),
                                                   " (expected [3][channels])"));
  }
  for (int e = 0; e < channels; ++e) {
    auto at = [&](int axis) { return rows_xyz ? geometry[axis * channels + e] : geometry[e * 3 + axis]; };
    if (at(1) != 0 || at(2) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", Dataset("probe_geometry"), " element ", e,
                                                     " has y = ", at(1), ", z = ", at(2),
                                                     " (only linear arrays along x are supported)"));
    }
    a.probe.element_x.push_back(at(0));
  }
  if (Exists(f, Dataset("element_width"))) {
    TESSERA_ASSIGN_OR_RETURN(a.probe.element_width, ReadScalar(f, path, "element_width"));
  }

  // Sampling.
  TESSERA_ASSIGN_OR_RETURN(a.sampling.sampling_frequency_hz, ReadScalar(f, path, "sampling_frequency"));
  TESSERA_ASSIGN_OR_RETURN(a.sampling.initial_time_s, ReadScalar(f, path, "initial_time"));
  TESSERA_ASSIGN_OR_RETURN(a.sampling.sound_speed, ReadScalar(f, path, "sound_speed"));
  TESSERA_ASSIGN_OR_RETURN(const double modulation, ReadScalar(f, path, "modulation_frequency"));
  if (Exists(f, Dataset("center_frequency"))) {
    TESSERA_ASSIGN_OR_RETURN(a.probe.center_frequency_hz, ReadScalar(f, path, "center_frequency"));
  } else {
    a.probe.center_frequency_hz = modulation > 0 ? modulation : a.sampling.sampling_frequency_hz / 4;
  }

  // Transmit sequence.
  if (Exists(f, Dataset("transmit_elements"))) {
    std::vector<double> elements;
    TESSERA_RETURN_IF_ERROR(ReadNumeric(f, path, Dataset("transmit_elements"), &elements, &dims));
    a.sequence.kind = us::TransmitKind::kSyntheticAperture;
    for (double e : elements) {
      if (e != std::floor(e) || e < 0 || e >= channels) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": ", Dataset("transmit_elements"), " holds ", e,
                                                       " (elements are 0..", channels - 1, ")"));
      }
      a.sequence.elements.push_back(static_cast<int>(e));
    }
  } else {
    TESSERA_RETURN_IF_ERROR(ReadNumeric(f, path, Dataset("angles"), &a.sequence.angles_rad, &dims));
    a.sequence.kind = us::TransmitKind::kPlaneWave;
  }
  const int transmits = a.sequence.transmits();

  // Channel data.
  std::vector<float> real, imag;
  TESSERA_RETURN_IF_ERROR(ReadNumeric(f, path, Dataset("data/real"), &real, &dims));
  if (dims.size() != 3 || dims[0] != static_cast<hsize_t>(transmits) || dims[1] != static_cast<hsize_t>(channels)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", Dataset("data/real"), " is ", DimsString(dims),
                                                   " (expected [", transmits, " transmits][", channels,
                                                   " channels][samples])"));
  }
  a.data.samples = static_cast<int64_t>(dims[2]);
  a.data.channels = channels;
  a.data.transmits = transmits;
  const bool has_imag = Exists(f, Dataset("data/imag"));
  if (has_imag) {
    std::vector<hsize_t> imag_dims;
    TESSERA_RETURN_IF_ERROR(ReadNumeric(f, path, Dataset("data/imag"), &imag, &imag_dims));
    if (imag_dims != dims) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", Dataset("data/imag"), " is ", DimsString(imag_dims),
                                                     " but data/real is ", DimsString(dims)));
    }
  }
  bool complex_data = modulation > 0;
  if (!complex_data && has_imag) {
    for (float v : imag) complex_data |= v != 0;
  }
  if (modulation > 0 && !has_imag) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", Dataset("data/imag"), " is missing but ",
                                                   Dataset("modulation_frequency"), " = ", modulation, " (IQ data)"));
  }
  if (complex_data) {
    a.sampling.demodulation_frequency_hz = modulation;
    a.data.iq.resize(real.size());
    for (size_t i = 0; i < real.size(); ++i) a.data.iq[i] = {real[i], imag[i]};
  } else {
    a.data.rf = std::move(real);
  }
  TESSERA_RETURN_IF_ERROR(Annotate(us::ValidateAcquisition(a), path));
  return a;
}

absl::Status WriteUltrasoundH5(const us::Acquisition& a, const std::string& path) {
  TESSERA_RETURN_IF_ERROR(Annotate(us::ValidateAcquisition(a), path));
  QuietHdf5 quiet;
  // The handles close (and the file is complete) before the rename.
  return WriteFileAtomically(path, [&](const std::string& tmp) -> absl::Status {
    Handle file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (!file.ok()) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot create ", tmp));
    Handle us_group(H5Gcreate2(file.get(), "/US", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    Handle group(H5Gcreate2(file.get(), kUltrasoundDatasetGroup, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    Handle data_group(H5Gcreate2(group.get(), "data", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    if (!us_group.ok() || !group.ok() || !data_group.ok()) {
      return absl::InternalError(absl::StrCat(path, ": cannot create the groups"));
    }
    const hid_t g = group.get();
    const int n = a.probe.channels(), t = a.sequence.transmits();
    std::vector<double> geometry(3 * n, 0.0);
    for (int e = 0; e < n; ++e) geometry[e] = a.probe.element_x[e];
    TESSERA_RETURN_IF_ERROR(
        Write(g, path, "probe_geometry", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {3, hsize_t(n)}, geometry.data()));
    TESSERA_RETURN_IF_ERROR(WriteScalar(g, path, "sampling_frequency", a.sampling.sampling_frequency_hz,
                                        H5T_IEEE_F64LE));
    TESSERA_RETURN_IF_ERROR(WriteScalar(g, path, "initial_time", a.sampling.initial_time_s, H5T_IEEE_F64LE));
    TESSERA_RETURN_IF_ERROR(WriteScalar(g, path, "sound_speed", a.sampling.sound_speed, H5T_IEEE_F64LE));
    TESSERA_RETURN_IF_ERROR(WriteScalar(g, path, "modulation_frequency", a.sampling.demodulation_frequency_hz,
                                        H5T_IEEE_F64LE));
    TESSERA_RETURN_IF_ERROR(WriteScalar(g, path, "center_frequency", a.probe.center_frequency_hz, H5T_IEEE_F64LE));
    TESSERA_RETURN_IF_ERROR(WriteScalar(g, path, "element_width", a.probe.element_width, H5T_IEEE_F64LE));
    if (a.sequence.kind == us::TransmitKind::kSyntheticAperture) {
      TESSERA_RETURN_IF_ERROR(Write(g, path, "transmit_elements", H5T_STD_I32LE, H5T_NATIVE_INT, {hsize_t(t)},
                                    a.sequence.elements.data()));
    } else {
      TESSERA_RETURN_IF_ERROR(
          Write(g, path, "angles", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {hsize_t(t)}, a.sequence.angles_rad.data()));
    }
    const std::vector<hsize_t> dims = {hsize_t(t), hsize_t(n), hsize_t(a.data.samples)};
    std::vector<float> real(a.data.size()), imag(a.data.size(), 0.0f);
    if (a.data.is_iq()) {
      for (size_t i = 0; i < real.size(); ++i) {
        real[i] = a.data.iq[i].real();
        imag[i] = a.data.iq[i].imag();
      }
    } else {
      real = a.data.rf;
    }
    TESSERA_RETURN_IF_ERROR(Write(data_group.get(), path, "real", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, dims, real.data()));
    TESSERA_RETURN_IF_ERROR(Write(data_group.get(), path, "imag", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, dims, imag.data()));
    if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0) return absl::InternalError(absl::StrCat(path, ": flush failed"));
    return absl::OkStatus();
  });
}

}  // namespace tessera::recon::formats

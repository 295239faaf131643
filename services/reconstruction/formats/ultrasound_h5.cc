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
#include "services/reconstruction/formats/hdf5_reading.h"
#include "services/reconstruction/formats/ultrasound_uff.h"

namespace tessera::recon::formats {
namespace {

namespace us = ::tessera::recon::ultrasound;

using hdf5::DimsString;
using hdf5::Exists;
using hdf5::Handle;
using hdf5::QuietHdf5;
using hdf5::ReadNumeric;

std::string Dataset(const char* name) { return absl::StrCat(kUltrasoundDatasetGroup, "/", name); }

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
    // USTB's .uff layout (a uff.channel_data group) is the other layout read.
    if (IsUffChannelDataFile(f)) return ReadUltrasoundUff(path);
    return absl::InvalidArgumentError(absl::StrCat(path, ": neither a ", kUltrasoundDatasetGroup,
                                                   " group (PICMUS us_dataset layout) nor a group of class "
                                                   "uff.channel_data (USTB .uff layout)"));
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
  if (Exists(f, Dataset("transmit_delays"))) {
    TESSERA_RETURN_IF_ERROR(ReadNumeric(f, path, Dataset("transmit_delays"), &a.sequence.delays_s, &dims));
    if (static_cast<int>(a.sequence.delays_s.size()) != transmits) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", Dataset("transmit_delays"), " is ",
                                                     DimsString(dims), " (expected [", transmits, "])"));
    }
  }

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
    if (!a.sequence.delays_s.empty()) {
      TESSERA_RETURN_IF_ERROR(Write(g, path, "transmit_delays", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {hsize_t(t)},
                                    a.sequence.delays_s.data()));
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

#include "services/reconstruction/formats/ultrasound_uff.h"

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "services/reconstruction/formats/hdf5_reading.h"

namespace tessera::recon::formats {
namespace {

namespace us = ::tessera::recon::ultrasound;
using hdf5::DimsString;
using hdf5::Exists;
using hdf5::Handle;

constexpr char kChannelDataClass[] = "uff.channel_data";
constexpr double kOnArrayTolerance = 1e-6;  // m: a spherical source this close to z = 0 sits on the array

std::optional<std::string> FindChannelData(hid_t f) {
  auto is_channel_data = [&](const std::string& p) {
    return hdf5::IsGroup(f, p) && hdf5::StringAttribute(f, p, "class") == std::string(kChannelDataClass);
  };
  if (is_channel_data("/channel_data")) return std::string("/channel_data");
  for (const std::string& name : hdf5::Children(f, "/")) {
    if (is_channel_data("/" + name)) return "/" + name;
  }
  return std::nullopt;
}

// Reads files of one path with the error prefix "<path>: ".
class UffReader {
 public:
  UffReader(hid_t file, std::string path) : f_(file), path_(std::move(path)) {}

  hid_t file() const { return f_; }

  absl::Status Invalid(const std::string& message) const {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", message));
  }

  absl::StatusOr<double> Value(const std::string& name) const {
    double v = 0;
    TESSERA_RETURN_IF_ERROR(hdf5::ReadOneValue(f_, path_, name, &v));
    return v;
  }
  absl::StatusOr<double> ValueOr(const std::string& name, double fallback) const {
    if (!Exists(f_, name)) return fallback;
    return Value(name);
  }
  absl::Status Vector(const std::string& name, std::vector<double>* values, std::vector<hsize_t>* dims) const {
    return hdf5::ReadNumeric(f_, path_, name, values, dims);
  }

  // A group's class attribute must be one of `classes`.
  absl::Status RequireClass(const std::string& group, std::initializer_list<const char*> classes) const {
    if (!Exists(f_, group)) return Invalid(absl::StrCat(group, " is missing"));
    if (!hdf5::IsGroup(f_, group)) return Invalid(absl::StrCat(group, " is not a group"));
    const std::optional<std::string> cls = hdf5::StringAttribute(f_, group, "class");
    std::string expected;
    for (const char* c : classes) {
      if (cls == std::string(c)) return absl::OkStatus();
      absl::StrAppend(&expected, expected.empty() ? "" : " or ", c);
    }
    return Invalid(absl::StrCat(group, " has class ", cls ? "\"" + *cls + "\"" : "(none)", " (expected ", expected,
                                ")"));
  }

  // The first frame of the channel data at `name`: dims (HDF5 order, frames
  // dropped) and real / imaginary samples (imag empty for real data).
  absl::Status FirstFrame(const std::string& name, std::vector<hsize_t>* dims, std::vector<float>* re,
                          std::vector<float>* im) const;

 private:
  absl::Status ReadFrame(const std::string& name, bool allow_compound, std::vector<hsize_t>* dims,
                         std::vector<float>* re, std::vector<float>* im) const;

  hid_t f_;
  std::string path_;
};

absl::Status UffReader::ReadFrame(const std::string& name, bool allow_compound, std::vector<hsize_t>* dims,
                                  std::vector<float>* re, std::vector<float>* im) const {
  if (!Exists(f_, name)) return Invalid(absl::StrCat(name, " is missing"));
  if (!hdf5::IsDataset(f_, name)) return Invalid(absl::StrCat(name, " is not a dataset"));
  Handle dset(H5Dopen2(f_, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!dset.ok()) return Invalid(absl::StrCat(name, " is not a dataset"));
  Handle type(H5Dget_type(dset.get()), H5Tclose);
  const H5T_class_t cls = H5Tget_class(type.get());
  const bool compound = cls == H5T_COMPOUND;
  if (compound) {
    if (!allow_compound || H5Tget_nmembers(type.get()) != 2) {
      return Invalid(absl::StrCat(name, " is a compound type (only one of two members, real and imag, is read)"));
    }
    for (unsigned m = 0; m < 2; ++m) {
      const H5T_class_t mc = H5Tget_member_class(type.get(), m);
      if (mc != H5T_FLOAT && mc != H5T_INTEGER) return Invalid(absl::StrCat(name, " has a non-numeric member"));
    }
  } else if (cls != H5T_FLOAT && cls != H5T_INTEGER) {
    return Invalid(absl::StrCat(name, " is not numeric"));
  }
  Handle space(H5Dget_space(dset.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) return absl::DataLossError(absl::StrCat(path_, ": ", name, ": unreadable dataspace"));
  std::vector<hsize_t> file_dims(rank, 0);
  H5Sget_simple_extent_dims(space.get(), file_dims.data(), nullptr);
  if (rank < 2 || rank > 4) {
    return Invalid(absl::StrCat(name, " is ", DimsString(file_dims),
                                " (expected [frames][waves][channels][samples], trailing 1s dropped)"));
  }
  // The first frame: a hyperslab with count 1 along frames.
  std::vector<hsize_t> start(rank, 0), count = file_dims;
  if (rank == 4) count[0] = 1;
  hsize_t n = 1;
  for (hsize_t c : count) n *= c;
  if (n == 0) return Invalid(absl::StrCat(name, " is ", DimsString(file_dims), " (empty)"));
  if (n > (hsize_t{1} << 32)) return Invalid(absl::StrCat(name, " is ", DimsString(file_dims), " (too large)"));
  if (H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0) {
    return absl::DataLossError(absl::StrCat(path_, ": ", name, ": cannot select the first frame"));
  }
  Handle memspace(H5Screate_simple(1, &n, nullptr), H5Sclose);
  herr_t read = -1;
  if (compound) {
    // Members matched by name: the file's two member names, read as floats.
    struct Pair {
      float re, im;
    };
    char* name0 = H5Tget_member_name(type.get(), 0);
    char* name1 = H5Tget_member_name(type.get(), 1);
    Handle mem(H5Tcreate(H5T_COMPOUND, sizeof(Pair)), H5Tclose);
    H5Tinsert(mem.get(), name0, HOFFSET(Pair, re), H5T_NATIVE_FLOAT);
    H5Tinsert(mem.get(), name1, HOFFSET(Pair, im), H5T_NATIVE_FLOAT);
    H5free_memory(name0);
    H5free_memory(name1);
    std::vector<Pair> pairs(n);
    read = H5Dread(dset.get(), mem.get(), memspace.get(), space.get(), H5P_DEFAULT, pairs.data());
    re->resize(n);
    im->resize(n);
    for (hsize_t i = 0; i < n; ++i) {
      (*re)[i] = pairs[i].re;
      (*im)[i] = pairs[i].im;
    }
  } else {
    re->resize(n);
    read = H5Dread(dset.get(), H5T_NATIVE_FLOAT, memspace.get(), space.get(), H5P_DEFAULT, re->data());
  }
  if (read < 0) return absl::DataLossError(absl::StrCat(path_, ": cannot read the values of ", name, " (truncated file?)"));
  *dims = file_dims;
  if (rank == 4) dims->erase(dims->begin());
  return absl::OkStatus();
}

absl::Status UffReader::FirstFrame(const std::string& name, std::vector<hsize_t>* dims, std::vector<float>* re,
                                   std::vector<float>* im) const {
  im->clear();
  if (!hdf5::IsGroup(f_, name)) return ReadFrame(name, /*allow_compound=*/true, dims, re, im);
  // MATLAB complex data: a group with real and imag datasets.
  std::vector<hsize_t> imag_dims;
  std::vector<float> unused;
  TESSERA_RETURN_IF_ERROR(ReadFrame(name + "/real", false, dims, re, &unused));
  TESSERA_RETURN_IF_ERROR(ReadFrame(name + "/imag", false, &imag_dims, im, &unused));
  if (imag_dims != *dims) {
    return Invalid(absl::StrCat(name, "/imag is ", DimsString(imag_dims), " but ", name, "/real is ",
                                DimsString(*dims)));
  }
  return absl::OkStatus();
}

// A transmit as acquisition.h describes it.
struct Transmit {
  bool plane = true;
  double angle = 0;  // plane
  int element = 0;   // synthetic aperture
  double delay = 0;  // d_t
};

absl::StatusOr<Transmit> ReadWave(const UffReader& r, const std::string& wave, const us::LinearArray& probe,
                                  double sound_speed) {
  TESSERA_RETURN_IF_ERROR(r.RequireClass(wave, {"uff.wave"}));
  const std::string source = wave + "/source";
  TESSERA_RETURN_IF_ERROR(r.RequireClass(source, {"uff.point"}));
  TESSERA_ASSIGN_OR_RETURN(const double distance, r.Value(source + "/distance"));
  TESSERA_ASSIGN_OR_RETURN(const double azimuth, r.Value(source + "/azimuth"));
  TESSERA_ASSIGN_OR_RETURN(const double elevation, r.Value(source + "/elevation"));
  TESSERA_ASSIGN_OR_RETURN(const double delay, r.ValueOr(wave + "/delay", 0.0));
  TESSERA_ASSIGN_OR_RETURN(const double wave_c, r.ValueOr(wave + "/sound_speed", 1540.0));
  // Both come from one double through single precision in USTB's files.
  if (!(std::abs(wave_c - sound_speed) <= 1e-6 * sound_speed)) {
    return r.Invalid(absl::StrCat(wave, "/sound_speed = ", wave_c, " differs from the channel data's sound_speed ",
                                  sound_speed, " (one sound speed is supported)"));
  }
  if (!std::isfinite(delay)) return r.Invalid(absl::StrCat(wave, "/delay = ", delay, " (must be finite)"));
  if (std::isnan(distance) || !std::isfinite(azimuth) || !std::isfinite(elevation)) {
    return r.Invalid(absl::StrCat(source, " is (distance ", distance, ", azimuth ", azimuth, ", elevation ",
                                  elevation, ") (must be numbers)"));
  }
  int wavefront = std::isinf(distance) ? 0 : 1;  // USTB's reading when the enumeration is absent
  if (Exists(r.file(), wave + "/wavefront")) {
    TESSERA_ASSIGN_OR_RETURN(const double w, r.Value(wave + "/wavefront"));
    if (w != 0 && w != 1 && w != 2) return r.Invalid(absl::StrCat(wave, "/wavefront = ", w, " (0, 1 or 2)"));
    wavefront = static_cast<int>(w);
  }
  if (wavefront == 2) return r.Invalid(absl::StrCat(wave, "/wavefront is photoacoustic (not supported)"));
  if (elevation != 0) {
    return r.Invalid(absl::StrCat(source, "/elevation = ", elevation, " (only 2-D sequences, elevation 0)"));
  }
  Transmit t;
  t.delay = delay;
  if (wavefront == 0) {
    t.plane = true;
    t.angle = azimuth;
    return t;
  }
  if (std::isinf(distance)) {
    return r.Invalid(absl::StrCat(wave, " is a spherical wave with its source at infinite distance"));
  }
  // uff.point: x = d sin(az) cos(el), z = d cos(az) cos(el).
  const double sx = distance * std::sin(azimuth), sz = distance * std::cos(azimuth);
  if (std::abs(sz) > kOnArrayTolerance) {
    return r.Invalid(absl::StrCat(wave, ": a spherical wave from (x ", sx * 1e3, " mm, z ", sz * 1e3, " mm), ",
                                  sz < 0 ? "behind" : "in front of",
                                  " the array (diverging and focused waves are not supported; plane waves and "
                                  "single-element synthetic-aperture transmits are)"));
  }
  const auto& ex = probe.element_x;
  const auto nearest = std::min_element(ex.begin(), ex.end(),
                                        [&](double a, double b) { return std::abs(a - sx) < std::abs(b - sx); });
  const double pitch = probe.pitch() > 0 ? probe.pitch() : 1e-4;
  if (std::abs(*nearest - sx) > 0.01 * pitch) {
    return r.Invalid(absl::StrCat(wave, ": a spherical wave from x = ", sx * 1e3,
                                  " mm on the array but not at an element (synthetic aperture needs one element)"));
  }
  t.plane = false;
  t.element = static_cast<int>(nearest - ex.begin());
  // USTB (das.m): T = (|r - s| + distance) / c - delay for a source not behind the array.
  t.delay = delay - std::abs(distance) / sound_speed;
  return t;
}

}  // namespace

bool IsUffChannelDataFile(hid_t file) { return FindChannelData(file).has_value(); }

absl::StatusOr<us::Acquisition> ReadUltrasoundUff(const std::string& path) {
  hdf5::QuietHdf5 quiet;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  if (H5Fis_hdf5(path.c_str()) <= 0) return absl::InvalidArgumentError(absl::StrCat(path, ": not an HDF5 file"));
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) return absl::DataLossError(absl::StrCat(path, ": HDF5 cannot open it (truncated or damaged)"));
  const hid_t f = file.get();
  const std::optional<std::string> root = FindChannelData(f);
  if (!root) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": no root group of class ", kChannelDataClass, " (USTB .uff channel data)"));
  }
  const std::string& g = *root;
  UffReader r(f, path);
  us::Acquisition a;

  // Sampling.
  TESSERA_ASSIGN_OR_RETURN(a.sampling.sampling_frequency_hz, r.Value(g + "/sampling_frequency"));
  TESSERA_ASSIGN_OR_RETURN(a.sampling.initial_time_s, r.Value(g + "/initial_time"));
  TESSERA_ASSIGN_OR_RETURN(a.sampling.sound_speed, r.ValueOr(g + "/sound_speed", 1540.0));
  TESSERA_ASSIGN_OR_RETURN(const double modulation, r.ValueOr(g + "/modulation_frequency", 0.0));
  if (!std::isfinite(modulation) || modulation < 0) {
    return r.Invalid(absl::StrCat(g, "/modulation_frequency = ", modulation, " (must be >= 0)"));
  }

  // Probe.
  const std::string probe = g + "/probe";
  TESSERA_RETURN_IF_ERROR(r.RequireClass(probe, {"uff.linear_array", "uff.probe"}));
  std::vector<double> values;
  std::vector<hsize_t> dims;
  if (Exists(f, probe + "/geometry")) {
    TESSERA_RETURN_IF_ERROR(r.Vector(probe + "/geometry", &values, &dims));
    if (dims.size() != 2 || dims[0] != 7 || dims[1] < 1) {
      return r.Invalid(absl::StrCat(probe, "/geometry is ", DimsString(dims),
                                    " (expected [7][elements]: x y z theta phi width height)"));
    }
    const int n = static_cast<int>(dims[1]);
    for (int e = 0; e < n; ++e) {
      const double y = values[1 * n + e], z = values[2 * n + e];
      if (y != 0 || z != 0) {
        return r.Invalid(absl::StrCat(probe, "/geometry: element ", e, " has y = ", y, ", z = ", z,
                                      " (only linear arrays along x are supported)"));
      }
      a.probe.element_x.push_back(values[e]);
    }
    a.probe.element_width = std::max(0.0, values[5 * n]);
  } else {
    TESSERA_ASSIGN_OR_RETURN(const double n, r.Value(probe + "/N"));
    TESSERA_ASSIGN_OR_RETURN(const double pitch, r.Value(probe + "/pitch"));
    if (!(n >= 1 && n <= us::kMaxChannels && n == std::floor(n)) || !(pitch > 0 && std::isfinite(pitch))) {
      return r.Invalid(absl::StrCat(probe, ": N = ", n, ", pitch = ", pitch, " (no geometry; need 1 <= N <= ",
                                    us::kMaxChannels, " and pitch > 0)"));
    }
    for (int e = 0; e < static_cast<int>(n); ++e) a.probe.element_x.push_back((e - 0.5 * (n - 1)) * pitch);
    TESSERA_ASSIGN_OR_RETURN(a.probe.element_width, r.ValueOr(probe + "/element_width", pitch));
  }
  const int channels = a.probe.channels();
  TESSERA_ASSIGN_OR_RETURN(a.probe.center_frequency_hz, r.ValueOr(g + "/pulse/center_frequency", 0.0));
  if (!(a.probe.center_frequency_hz > 0)) {
    a.probe.center_frequency_hz = modulation > 0 ? modulation : a.sampling.sampling_frequency_hz / 4;
  }

  // Sequence: an array group of uff.wave, or one uff.wave.
  const std::string sequence = g + "/sequence";
  TESSERA_RETURN_IF_ERROR(r.RequireClass(sequence, {"uff.wave"}));
  std::vector<std::string> waves;
  if (hdf5::IsGroup(f, sequence + "/source")) {
    waves.push_back(sequence);
  } else {
    std::vector<std::string> names = hdf5::Children(f, sequence);
    // sequence_0001 ... sequence_9999, sequence_10000: shorter names first.
    std::stable_sort(names.begin(), names.end(),
                     [](const std::string& a, const std::string& b) { return a.size() < b.size(); });
    for (const std::string& name : names) waves.push_back(sequence + "/" + name);
    if (waves.empty()) return r.Invalid(absl::StrCat(sequence, " holds no waves"));
  }
  std::vector<Transmit> transmits;
  for (const std::string& w : waves) {
    TESSERA_ASSIGN_OR_RETURN(Transmit t, ReadWave(r, w, a.probe, a.sampling.sound_speed));
    if (!transmits.empty() && t.plane != transmits.front().plane) {
      return r.Invalid(absl::StrCat(w, ": plane and spherical waves mixed in one sequence (not supported)"));
    }
    transmits.push_back(t);
  }
  a.sequence.kind = transmits.front().plane ? us::TransmitKind::kPlaneWave : us::TransmitKind::kSyntheticAperture;
  bool any_delay = false;
  for (const Transmit& t : transmits) {
    if (t.plane) {
      a.sequence.angles_rad.push_back(t.angle);
    } else {
      a.sequence.elements.push_back(t.element);
    }
    a.sequence.delays_s.push_back(t.delay);
    any_delay |= t.delay != 0;
  }
  if (!any_delay) a.sequence.delays_s.clear();
  const int nt = a.sequence.transmits();

  // Channel data: [waves][channels][samples] after the frame; MATLAB drops a
  // trailing 1 (one wave: [channels][samples]).
  std::vector<float> re, im;
  TESSERA_RETURN_IF_ERROR(r.FirstFrame(g + "/data", &dims, &re, &im));
  if (dims.size() == 2) dims.insert(dims.begin(), 1);
  if (dims[0] != static_cast<hsize_t>(nt) || dims[1] != static_cast<hsize_t>(channels)) {
    return r.Invalid(absl::StrCat(g, "/data is ", DimsString(dims), " per frame but the probe has ", channels,
                                  " elements and the sequence ", nt,
                                  " waves (expected [waves][channels][samples], MATLAB samples x channels x waves)"));
  }
  a.data.samples = static_cast<int64_t>(dims[2]);
  a.data.channels = channels;
  a.data.transmits = nt;
  bool complex_data = modulation > 0;
  for (float v : im) complex_data |= v != 0;
  if (modulation > 0 && im.empty()) {
    return r.Invalid(absl::StrCat(g, "/data is real but modulation_frequency = ", modulation, " (IQ data)"));
  }
  if (complex_data) {
    a.sampling.demodulation_frequency_hz = modulation;
    a.data.iq.resize(re.size());
    for (size_t i = 0; i < re.size(); ++i) a.data.iq[i] = {re[i], im[i]};
  } else {
    a.data.rf = std::move(re);
  }
  TESSERA_RETURN_IF_ERROR(Annotate(us::ValidateAcquisition(a), path));
  return a;
}

}  // namespace tessera::recon::formats

// Small helpers over the HDF5 C API for the readers of HDF5-based formats
// (ultrasound_h5.cc: PICMUS; ultrasound_uff.cc: USTB .uff): scoped handles,
// quiet error stacks, link walks, numeric datasets converted on reading and
// string attributes of either HDF5 string kind.
#ifndef TESSERA_SERVICES_RECONSTRUCTION_FORMATS_HDF5_READING_H_
#define TESSERA_SERVICES_RECONSTRUCTION_FORMATS_HDF5_READING_H_

#include <hdf5.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tessera::recon::formats::hdf5 {

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

// "[3][128]", or "a scalar" for no dimensions.
std::string DimsString(const std::vector<hsize_t>& dims);

// Whether the absolute link `path` ("/a/b/c") exists (every step checked, as
// H5Lexists needs).
bool Exists(hid_t file, const std::string& path);

// Whether `path` is a group / a dataset.
bool IsGroup(hid_t file, const std::string& path);
bool IsDataset(hid_t file, const std::string& path);

// Reads a numeric dataset (any HDF5 integer or float type) converted to T
// (double or float), with its dimensions (HDF5 order, last fastest).
// INVALID_ARGUMENT "<file_path>: <name> is missing / is not a dataset / is
// not numeric / is ... (too large)"; DATA_LOSS when the values cannot be read.
template <typename T>
absl::Status ReadNumeric(hid_t file, const std::string& file_path, const std::string& name, std::vector<T>* values,
                         std::vector<hsize_t>* dims);

// One value from a numeric dataset of any shape holding exactly one element
// ([1], [1][1] or a scalar), as double.
absl::Status ReadOneValue(hid_t file, const std::string& file_path, const std::string& name, double* value);

// A string attribute of `object_path` (fixed-length, as MATLAB writes, or
// variable-length, as h5py writes; trailing NULs dropped); nullopt when the
// object or the attribute is missing or the attribute is not a string.
std::optional<std::string> StringAttribute(hid_t file, const std::string& object_path, const char* attribute);

// Names of the links directly under group `path`, in name order.
std::vector<std::string> Children(hid_t file, const std::string& path);

}  // namespace tessera::recon::formats::hdf5

#endif  // TESSERA_SERVICES_RECONSTRUCTION_FORMATS_HDF5_READING_H_

#include "services/reconstruction/formats/hdf5_reading.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tessera::recon::formats::hdf5 {

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

namespace {

H5I_type_t ObjectType(hid_t file, const std::string& path) {
  if (!Exists(file, path)) return H5I_BADID;
  Handle object(H5Oopen(file, path.c_str(), H5P_DEFAULT), H5Oclose);
  return object.ok() ? H5Iget_type(object.get()) : H5I_BADID;
}

}  // namespace

bool IsGroup(hid_t file, const std::string& path) { return ObjectType(file, path) == H5I_GROUP; }
bool IsDataset(hid_t file, const std::string& path) { return ObjectType(file, path) == H5I_DATASET; }

template <typename T>
absl::Status ReadNumeric(hid_t file, const std::string& file_path, const std::string& name, std::vector<T>* values,
                         std::vector<hsize_t>* dims) {
  if (!Exists(file, name)) return absl::InvalidArgumentError(absl::StrCat(file_path, ": ", name, " is missing"));
  if (!IsDataset(file, name)) return absl::InvalidArgumentError(absl::StrCat(file_path, ": ", name, " is not a dataset"));
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

template absl::Status ReadNumeric<double>(hid_t, const std::string&, const std::string&, std::vector<double>*,
                                          std::vector<hsize_t>*);
template absl::Status ReadNumeric<float>(hid_t, const std::string&, const std::string&, std::vector<float>*,
                                         std::vector<hsize_t>*);

absl::Status ReadOneValue(hid_t file, const std::string& file_path, const std::string& name, double* value) {
  std::vector<double> v;
  std::vector<hsize_t> dims;
  if (absl::Status s = ReadNumeric(file, file_path, name, &v, &dims); !s.ok()) return s;
  if (v.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_path, ": ", name, " is ", DimsString(dims), " (expected one value)"));
  }
  *value = v[0];
  return absl::OkStatus();
}

std::optional<std::string> StringAttribute(hid_t file, const std::string& object_path, const char* attribute) {
  if (!Exists(file, object_path) || H5Aexists_by_name(file, object_path.c_str(), attribute, H5P_DEFAULT) <= 0) {
    return std::nullopt;
  }
  Handle attr(H5Aopen_by_name(file, object_path.c_str(), attribute, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) return std::nullopt;
  Handle type(H5Aget_type(attr.get()), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_STRING) return std::nullopt;
  Handle space(H5Aget_space(attr.get()), H5Sclose);
  if (H5Sget_simple_extent_npoints(space.get()) != 1) return std::nullopt;
  std::string out;
  if (H5Tis_variable_str(type.get()) > 0) {
    Handle mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem.get(), H5T_VARIABLE);
    H5Tset_cset(mem.get(), H5Tget_cset(type.get()));  // h5py writes UTF-8; HDF5 converts no charsets
    char* s = nullptr;
    if (H5Aread(attr.get(), mem.get(), &s) < 0) return std::nullopt;
    if (s != nullptr) out = s;
    H5free_memory(s);
  } else {
    const size_t size = H5Tget_size(type.get());
    if (size == 0 || size > (1 << 20)) return std::nullopt;
    std::vector<char> buffer(size + 1, '\0');
    Handle mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem.get(), size + 1);
    H5Tset_strpad(mem.get(), H5T_STR_NULLTERM);
    H5Tset_cset(mem.get(), H5Tget_cset(type.get()));
    if (H5Aread(attr.get(), mem.get(), buffer.data()) < 0) return std::nullopt;
    out.assign(buffer.data());
  }
  while (!out.empty() && (out.back() == '\0' || out.back() == ' ')) out.pop_back();
  return out;
}

namespace {

herr_t CollectName(hid_t, const char* name, const H5L_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->push_back(name);
  return 0;
}

}  // namespace

std::vector<std::string> Children(hid_t file, const std::string& path) {
  std::vector<std::string> names;
  if (!IsGroup(file, path)) return names;
  Handle group(H5Gopen2(file, path.c_str(), H5P_DEFAULT), H5Gclose);
  if (!group.ok()) return names;
  hsize_t index = 0;
  H5Literate(group.get(), H5_INDEX_NAME, H5_ITER_INC, &index, CollectName, &names);
  return names;
}

}  // namespace tessera::recon::formats::hdf5

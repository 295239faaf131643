#include "kernels/registration/pipeline/ants_transform_io.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/durable_file.h"
#include "common/nifti_io.h"
#include "common/status.h"
#include "kernels/registration/pipeline/space.h"

namespace tessera::registration {
namespace {

constexpr int kNiftiIntentVector = 1007;
constexpr char kAffineName[] = "AffineTransform_double_3_3";

// MATLAB v4 "type" field: M*1000 + O*100 + P*10 + T, with M = 0 little
// endian / 1 big endian, P = 0 double / 1 float, T = 0 full numeric matrix.
void AppendVariable(std::string& out, const std::string& name, const std::vector<double>& values) {
  const int32_t header[5] = {0, static_cast<int32_t>(values.size()), 1, 0, static_cast<int32_t>(name.size() + 1)};
  out.append(reinterpret_cast<const char*>(header), sizeof(header));
  out.append(name.c_str(), name.size() + 1);
  out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(double));
}

uint32_t ByteSwap32(uint32_t v) { return __builtin_bswap32(v); }
uint64_t ByteSwap64(uint64_t v) { return __builtin_bswap64(v); }

// Parses every numeric variable of a MATLAB v4 file into name -> values.
absl::StatusOr<std::map<std::string, std::vector<double>>> ParseMatV4(const std::string& data,
                                                                      const std::string& path) {
  std::map<std::string, std::vector<double>> vars;
  size_t pos = 0;
  while (pos < data.size()) {
    if (data.size() - pos < 20) return absl::DataLossError(absl::StrCat(path, ": truncated MATLAB v4 header"));
    int32_t h[5];
    std::memcpy(h, data.data() + pos, sizeof(h));
    // The type field is < 5000 in the file's own byte order; that tells us the order.
    bool swap = false;
    if (h[0] < 0 || h[0] > 4999) {
      swap = true;
      for (int32_t& v : h) v = static_cast<int32_t>(ByteSwap32(static_cast<uint32_t>(v)));
    }
    const int type = h[0];
    const int machine = type / 1000, precision = (type / 10) % 10, matrix_type = type % 10;
    if (type < 0 || type > 4999 || (machine != 0 && machine != 1) || matrix_type != 0 || h[3] != 0) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": not a MATLAB v4 numeric matrix (type ", type, ")"));
    }
    if (precision != 0 && precision != 1) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": unsupported MATLAB v4 precision ", precision));
    }
    if (h[1] < 0 || h[2] < 0 || h[4] <= 0 || h[4] > 1024 || int64_t{h[1]} * h[2] > 4096) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": implausible MATLAB v4 variable header"));
    }
    const size_t count = static_cast<size_t>(h[1]) * h[2];
    const size_t elem = precision == 0 ? 8 : 4;
    pos += 20;
    if (data.size() - pos < static_cast<size_t>(h[4]) + count * elem) {
      return absl::DataLossError(absl::StrCat(path, ": truncated MATLAB v4 variable"));
    }
    std::string name(data.data() + pos, strnlen(data.data() + pos, h[4]));
    pos += h[4];
    std::vector<double> values(count);
    for (size_t i = 0; i < count; ++i, pos += elem) {
      if (elem == 8) {
        uint64_t bits;
        std::memcpy(&bits, data.data() + pos, 8);
        if (swap) bits = ByteSwap64(bits);
        std::memcpy(&values[i], &bits, 8);
      } else {
        uint32_t bits;
        std::memcpy(&bits, data.data() + pos, 4);
        if (swap) bits = ByteSwap32(bits);
        float f;
        std::memcpy(&f, &bits, 4);
        values[i] = f;
      }
    }
    vars[name] = std::move(values);
  }
  return vars;
}

}  // namespace

std::string ItkAffineBytes(const Mat4& physical_ras, const std::array<double, 3>& center_ras) {
  const Mat4 lps = RasToLps(physical_ras);
  const double c[3] = {-center_ras[0], -center_ras[1], center_ras[2]};
  // T(p) = M p + offset = M (p - c) + c + t  =>  t = offset - c + M c.
  std::vector<double> params(12);
  for (int r = 0; r < 3; ++r) {
    double mc = 0;
    for (int k = 0; k < 3; ++k) {
      params[r * 3 + k] = lps[r * 4 + k];
      mc += lps[r * 4 + k] * c[k];
    }
    params[9 + r] = lps[r * 4 + 3] - c[r] + mc;
  }
  std::string out;
  AppendVariable(out, kAffineName, params);
  AppendVariable(out, "fixed", {c[0], c[1], c[2]});
  return out;
}

absl::Status WriteItkAffine(const std::string& path, const Mat4& physical_ras, const std::array<double, 3>& center_ras) {
  // Atomic only (no fsync), like the NIfTI outputs beside it.
  const absl::Status written = WriteFileAtomically(path, ItkAffineBytes(physical_ras, center_ras));
  if (!written.ok()) return absl::PermissionDeniedError(written.message());
  return absl::OkStatus();
}

absl::StatusOr<Mat4> ReadItkAffine(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  TESSERA_ASSIGN_OR_RETURN(auto vars, ParseMatV4(data, path));
  const std::vector<double>* params = nullptr;
  for (const auto& [name, values] : vars) {
    if ((absl::StartsWith(name, "AffineTransform_") || absl::StartsWith(name, "MatrixOffsetTransformBase_")) &&
        absl::EndsWith(name, "_3_3")) {
      params = &values;
    }
  }
  if (params == nullptr || params->size() != 12) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no 3-D affine transform (AffineTransform_*_3_3) found"));
  }
  std::vector<double> center = {0, 0, 0};
  if (auto it = vars.find("fixed"); it != vars.end()) {
    if (it->second.size() != 3) return absl::InvalidArgumentError(absl::StrCat(path, ": 'fixed' must have 3 values"));
    center = it->second;
  }
  Mat4 lps{};
  for (int r = 0; r < 3; ++r) {
    double mc = 0;
    for (int k = 0; k < 3; ++k) {
      lps[r * 4 + k] = (*params)[r * 3 + k];
      mc += lps[r * 4 + k] * center[k];
    }
    lps[r * 4 + 3] = (*params)[9 + r] + center[r] - mc;
  }
  lps[15] = 1;
  return LpsToRas(lps);
}

absl::Status WriteAntsWarp(const std::string& path, const NDArray& displacement_ras, const Geometry& fixed_geometry) {
  const Shape& s = displacement_ras.shape();
  if (s.size() != 4 || s[3] != 3 || displacement_ras.dtype() != DType::kFloat32) {
    return absl::InvalidArgumentError(
        absl::StrCat("a warp must be float32 (nx, ny, nz, 3), got ", ShapeToString(s)));
  }
  TESSERA_ASSIGN_OR_RETURN(NDArray lps, displacement_ras.Clone());
  const int64_t n = s[0] * s[1] * s[2];
  float* v = lps.data<float>();
  for (int64_t i = 0; i < 2 * n; ++i) v[i] = -v[i];  // x and y components flip
  Volume volume{lps, fixed_geometry, "tessera displacement (LPS mm)"};
  NiftiWriteOptions options;
  options.intent_code = kNiftiIntentVector;
  return WriteNifti(volume, path, options);
}

absl::StatusOr<Volume> ReadAntsWarp(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(Volume volume, ReadNifti(path));
  const Shape& s = volume.data.shape();
  if (s.size() != 4 || s[3] != 3) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": a warp must be (nx, ny, nz, 1, 3), got ", ShapeToString(s)));
  }
  if (volume.data.dtype() != DType::kFloat32) {
    TESSERA_ASSIGN_OR_RETURN(volume.data, volume.data.AsType(DType::kFloat32));
  }
  const int64_t n = s[0] * s[1] * s[2];
  float* v = volume.data.data<float>();
  for (int64_t i = 0; i < 2 * n; ++i) v[i] = -v[i];
  return volume;
}

}  // namespace tessera::registration

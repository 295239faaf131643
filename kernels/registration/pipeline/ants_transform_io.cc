#include "kernels/registration/pipeline/ants_transform_io.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
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
absl::StatusOr<std::map<std::string, std::vector<double>>> ParseMatV4(absl::string_view data,
                                                                      absl::string_view path) {
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

// ITK's offset from its parameters, T(p) = M (p - c) + c + t: one expression
// for the reader and the writer, so that the writer can pick t to make the
// read-back offset equal the one written (below).
double OffsetFrom(double t, double c, double mc) { return t + c - mc; }

// The parameters of the LPS affine `lps` about centre `c` (LPS): 9 matrix
// entries row-major, then the translation. The translation is nudged by a few
// ulps where that makes OffsetFrom give back the offset bit for bit (the
// algebra alone rounds), so a file we write reads back as the same Mat4.
std::vector<double> AffineParams(const Mat4& lps, const double c[3]) {
  std::vector<double> params(12);
  for (int r = 0; r < 3; ++r) {
    double mc = 0;
    for (int k = 0; k < 3; ++k) {
      params[r * 3 + k] = lps[r * 4 + k];
      mc += lps[r * 4 + k] * c[k];
    }
    const double offset = lps[r * 4 + 3];
    double t = offset - c[r] + mc, best = t;
    double best_error = std::fabs(OffsetFrom(t, c[r], mc) - offset);
    double up = t, down = t;
    for (int step = 0; step < 64 && best_error != 0; ++step) {
      up = std::nextafter(up, HUGE_VAL);
      down = std::nextafter(down, -HUGE_VAL);
      for (double candidate : {up, down}) {
        const double error = std::fabs(OffsetFrom(candidate, c[r], mc) - offset);
        if (error < best_error) {
          best_error = error;
          best = candidate;
        }
      }
    }
    params[9 + r] = best;
  }
  return params;
}

// 4x4 of a 3x3 matrix about centre c with translation t (LPS).
Mat4 MatrixOffset(const double m[9], const double c[3], const double t[3]) {
  Mat4 lps{};
  for (int r = 0; r < 3; ++r) {
    double mc = 0;
    for (int k = 0; k < 3; ++k) {
      lps[r * 4 + k] = m[r * 3 + k];
      mc += lps[r * 4 + k] * c[k];
    }
    lps[r * 4 + 3] = OffsetFrom(t[r], c[r], mc);
  }
  lps[15] = 1;
  return lps;
}

// ITK's Versor::GetMatrix (unit quaternion with vector part v, w >= 0).
absl::Status VersorMatrix(const double v[3], double m[9], absl::string_view where) {
  const double x = v[0], y = v[1], z = v[2];
  const double norm2 = x * x + y * y + z * z;
  if (!(norm2 <= 1.0 + 1e-12)) return absl::InvalidArgumentError(absl::StrCat(where, ": versor norm above 1"));
  const double w = std::sqrt(std::max(0.0, 1.0 - norm2));
  const double mm[9] = {1 - 2 * (y * y + z * z), 2 * (x * y - z * w),     2 * (x * z + y * w),
                        2 * (x * y + z * w),     1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
                        2 * (x * z - y * w),     2 * (y * z + x * w),     1 - 2 * (x * x + y * y)};
  std::copy(mm, mm + 9, m);
  return absl::OkStatus();
}

void Multiply3(const double a[9], const double b[9], double out[9]) {
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      out[i * 3 + j] = a[i * 3] * b[j] + a[i * 3 + 1] * b[3 + j] + a[i * 3 + 2] * b[6 + j];
    }
  }
}

// One ITK transform (3-D) from its class name, parameters and fixed
// parameters, as an LPS 4x4.
absl::StatusOr<Mat4> LpsFromItk(absl::string_view type, const std::vector<double>& params,
                                const std::vector<double>& fixed, absl::string_view where) {
  auto count_error = [&](size_t want) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", type, " needs ", want, " Parameters, got ",
                                                   params.size()));
  };
  const size_t cut = type.find('_');
  const absl::string_view base = type.substr(0, cut);
  if (cut == absl::string_view::npos || !absl::EndsWith(type, "_3_3")) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": '", type, "' is not a 3-D ITK transform (<Name>_double_3_3)"));
  }
  if (fixed.size() < 3 && base != "TranslationTransform" && !fixed.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": FixedParameters (the centre) must have 3 values, got ",
                                                   fixed.size()));
  }
  double c[3] = {0, 0, 0};
  if (fixed.size() >= 3) std::copy(fixed.begin(), fixed.begin() + 3, c);
  double m[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  double t[3] = {0, 0, 0};
  if (base == "AffineTransform" || base == "MatrixOffsetTransformBase" || base == "Rigid3DTransform") {
    if (params.size() != 12) return count_error(12);
    std::copy(params.begin(), params.begin() + 9, m);
    std::copy(params.begin() + 9, params.end(), t);
  } else if (base == "TranslationTransform") {
    if (params.size() != 3) return count_error(3);
    std::copy(params.begin(), params.end(), t);
    std::fill(c, c + 3, 0.0);
  } else if (base == "Euler3DTransform") {
    if (params.size() != 6) return count_error(6);
    const double cx = std::cos(params[0]), sx = std::sin(params[0]);
    const double cy = std::cos(params[1]), sy = std::sin(params[1]);
    const double cz = std::cos(params[2]), sz = std::sin(params[2]);
    const double rx[9] = {1, 0, 0, 0, cx, -sx, 0, sx, cx};
    const double ry[9] = {cy, 0, sy, 0, 1, 0, -sy, 0, cy};
    const double rz[9] = {cz, -sz, 0, sz, cz, 0, 0, 0, 1};
    const bool zyx = fixed.size() >= 4 && fixed[3] != 0;  // ITK's ComputeZYX
    double tmp[9];
    Multiply3(rz, zyx ? ry : rx, tmp);
    Multiply3(tmp, zyx ? rx : ry, m);
    std::copy(params.begin() + 3, params.end(), t);
  } else if (base == "VersorRigid3DTransform" || base == "Similarity3DTransform") {
    const size_t want = base == "Similarity3DTransform" ? 7 : 6;
    if (params.size() != want) return count_error(want);
    TESSERA_RETURN_IF_ERROR(VersorMatrix(params.data(), m, where));
    if (want == 7) {
      for (double& e : m) e *= params[6];
    }
    std::copy(params.begin() + 3, params.begin() + 6, t);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": unsupported transform '", type,
                     "' (affine, matrix-offset, rigid, Euler, versor, similarity or translation)"));
  }
  for (double e : m) {
    if (!std::isfinite(e)) return absl::InvalidArgumentError(absl::StrCat(where, ": non-finite Parameters"));
  }
  for (int d = 0; d < 3; ++d) {
    if (!std::isfinite(t[d]) || !std::isfinite(c[d])) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": non-finite Parameters or FixedParameters"));
    }
  }
  return MatrixOffset(m, c, t);
}

absl::StatusOr<Mat4> ParseMatlab(absl::string_view data, absl::string_view name) {
  TESSERA_ASSIGN_OR_RETURN(auto vars, ParseMatV4(data, name));
  const std::string* type = nullptr;
  for (const auto& [var, values] : vars) {
    if (var != "fixed") type = &var;
  }
  if (type == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": no transform variable (e.g. AffineTransform_double_3_3)"));
  }
  std::vector<double> center;
  if (auto it = vars.find("fixed"); it != vars.end()) {
    if (it->second.size() != 3) return absl::InvalidArgumentError(absl::StrCat(name, ": 'fixed' must have 3 values"));
    center = it->second;
  }
  return LpsFromItk(*type, vars.at(*type), center, absl::StrCat(name, ": variable '", *type, "'"));
}

// "Key: v1 v2 ..." -> the numbers, naming the line on error.
absl::StatusOr<std::vector<double>> ParseNumbers(absl::string_view text, absl::string_view where) {
  std::vector<double> values;
  for (absl::string_view token : absl::StrSplit(text, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
    double v;
    if (!absl::SimpleAtod(token, &v) || !std::isfinite(v)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": '", token, "' is not a finite number"));
    }
    values.push_back(v);
  }
  return values;
}

absl::StatusOr<Mat4> ParseText(absl::string_view data, absl::string_view name) {
  struct Entry {
    std::string type, where;
    std::vector<double> params, fixed;
    bool has_params = false;
  };
  std::vector<Entry> entries;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(data, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    const size_t colon = line.find(':');
    const std::string where = absl::StrCat(name, " line ", line_number);
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": expected 'Key: value', got '", line, "'"));
    }
    const absl::string_view key = absl::StripAsciiWhitespace(line.substr(0, colon));
    const absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (key == "Transform") {
      entries.push_back({std::string(value), where, {}, {}, false});
    } else if (key == "Parameters" || key == "FixedParameters") {
      if (entries.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", key, " before any Transform"));
      TESSERA_ASSIGN_OR_RETURN(std::vector<double> values, ParseNumbers(value, where));
      if (key == "Parameters") {
        entries.back().params = std::move(values);
        entries.back().has_params = true;
      } else {
        entries.back().fixed = std::move(values);
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat(where, ": unknown key '", key, "'"));
    }
  }
  // A composite's own entry carries no parameters; its members follow it.
  if (!entries.empty() && absl::StartsWith(entries.front().type, "CompositeTransform")) entries.erase(entries.begin());
  if (entries.empty()) return absl::InvalidArgumentError(absl::StrCat(name, ": no Transform in the ITK text file"));
  Mat4 composed{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  for (const Entry& e : entries) {
    if (!e.has_params) return absl::InvalidArgumentError(absl::StrCat(e.where, ": Transform without Parameters"));
    TESSERA_ASSIGN_OR_RETURN(Mat4 lps, LpsFromItk(e.type, e.params, e.fixed, e.where));
    // ITK's composite applies the last transform first: T1(T2(...(p))).
    composed = entries.size() == 1 ? lps : Multiply(composed, lps);
  }
  return composed;
}

std::string FormatDouble(double v) { return absl::StrFormat("%.17g", v); }

}  // namespace

std::string ItkAffineBytes(const Mat4& physical_ras, const std::array<double, 3>& center_ras) {
  const Mat4 lps = RasToLps(physical_ras);
  const double c[3] = {-center_ras[0], -center_ras[1], center_ras[2]};
  std::string out;
  AppendVariable(out, kAffineName, AffineParams(lps, c));
  AppendVariable(out, "fixed", {c[0], c[1], c[2]});
  return out;
}

std::string ItkAffineText(const Mat4& physical_ras, const std::array<double, 3>& center_ras) {
  const Mat4 lps = RasToLps(physical_ras);
  const double c[3] = {-center_ras[0], -center_ras[1], center_ras[2]};
  std::vector<std::string> params, fixed;
  for (double v : AffineParams(lps, c)) params.push_back(FormatDouble(v));
  for (double v : c) fixed.push_back(FormatDouble(v));
  return absl::StrCat("#Insight Transform File V1.0\n#Transform 0\nTransform: ", kAffineName,
                      "\nParameters: ", absl::StrJoin(params, " "), "\nFixedParameters: ", absl::StrJoin(fixed, " "),
                      "\n");
}

absl::Status WriteItkAffine(const std::string& path, const Mat4& physical_ras, const std::array<double, 3>& center_ras) {
  const bool text = absl::EndsWith(path, ".txt") || absl::EndsWith(path, ".tfm");
  // Atomic only (no fsync), like the NIfTI outputs beside it.
  const absl::Status written = WriteFileAtomically(
      path, text ? ItkAffineText(physical_ras, center_ras) : ItkAffineBytes(physical_ras, center_ras));
  if (!written.ok()) return absl::PermissionDeniedError(written.message());
  return absl::OkStatus();
}

absl::StatusOr<Mat4> ParseItkAffine(absl::string_view bytes, absl::string_view name_for_errors) {
  TESSERA_ASSIGN_OR_RETURN(Mat4 lps, absl::StartsWith(bytes, "#Insight Transform File")
                                         ? ParseText(bytes, name_for_errors)
                                         : ParseMatlab(bytes, name_for_errors));
  return LpsToRas(lps);
}

absl::StatusOr<Mat4> ReadItkAffine(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return ParseItkAffine(data, path);
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

#include "services/reconstruction/formats/cfl.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/match.h"

namespace tessera::recon::formats {
namespace {

std::string Base(const std::string& path) {
  absl::string_view base = path;
  if (!absl::ConsumeSuffix(&base, ".cfl")) absl::ConsumeSuffix(&base, ".hdr");
  return std::string(base);
}

absl::Status OpenError(const std::string& path) {
  const int err = errno;
  const std::string msg = absl::StrCat(path, ": cannot open (", std::strerror(err), ")");
  return err == ENOENT ? absl::NotFoundError(msg) : absl::InvalidArgumentError(msg);
}

absl::StatusOr<int64_t> CheckedProduct(const std::array<int64_t, kCflDims>& dims, const std::string& what) {
  int64_t product = 1;
  for (int d = 0; d < kCflDims; ++d) {
    if (dims[d] < 1) return absl::InvalidArgumentError(absl::StrCat(what, ": dimension ", d, " is ", dims[d], " < 1"));
    if (product > kMaxCflElements / dims[d]) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": dimensions ", absl::StrJoin(dims, " x "), " exceed ", kMaxCflElements, " elements"));
    }
    product *= dims[d];
  }
  return product;
}

}  // namespace

int64_t CflArray::elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

absl::StatusOr<CflArray> MakeCfl(const std::vector<int64_t>& dims) {
  if (dims.size() > kCflDims) {
    return absl::InvalidArgumentError(absl::StrCat("cfl: ", dims.size(), " dimensions (at most 16)"));
  }
  CflArray array;
  for (size_t d = 0; d < dims.size(); ++d) array.dims[d] = dims[d];
  auto n = CheckedProduct(array.dims, "cfl");
  if (!n.ok()) return n.status();
  array.data.assign(*n, std::complex<float>(0, 0));
  return array;
}

absl::StatusOr<std::array<int64_t, kCflDims>> ParseCflHeader(const std::string& text, const std::string& path) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    if (absl::StripAsciiWhitespace(lines[i]) != "# Dimensions") continue;
    if (i + 1 >= lines.size()) break;
    std::array<int64_t, kCflDims> dims;
    dims.fill(1);
    int count = 0;
    for (absl::string_view token : absl::StrSplit(lines[i + 1], absl::ByAnyChar(" \t\r"), absl::SkipEmpty())) {
      int64_t value = 0;
      if (!absl::SimpleAtoi(token, &value)) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": dimension '", token.substr(0, 32), "' is not an integer"));
      }
      if (count == kCflDims) {
        if (value == 1) continue;  // tolerate trailing singleton dims
        return absl::InvalidArgumentError(absl::StrCat(path, ": more than ", kCflDims, " dimensions"));
      }
      dims[count++] = value;
    }
    if (count == 0) return absl::InvalidArgumentError(absl::StrCat(path, ": the '# Dimensions' line is empty"));
    auto n = CheckedProduct(dims, path);
    if (!n.ok()) return n.status();
    return dims;
  }
  return absl::InvalidArgumentError(absl::StrCat(path, ": no '# Dimensions' section (not a BART header)"));
}

std::string FormatCflHeader(const std::array<int64_t, kCflDims>& dims) {
  return absl::StrCat("# Dimensions\n", absl::StrJoin(dims, " "), " \n# Creator\ntessera\n");
}

absl::StatusOr<CflArray> ReadCflHeader(const std::string& path) {
  const std::string base = Base(path), hdr_path = base + ".hdr", cfl_path = base + ".cfl";
  std::ifstream hdr(hdr_path);
  if (!hdr) return OpenError(hdr_path);
  std::stringstream text;
  text << hdr.rdbuf();
  auto dims = ParseCflHeader(text.str(), hdr_path);
  if (!dims.ok()) return dims.status();
  CflArray array;
  array.dims = *dims;
  const int64_t n = array.elements();
  std::ifstream cfl(cfl_path, std::ios::binary | std::ios::ate);
  if (!cfl) return OpenError(cfl_path);
  const int64_t bytes = static_cast<int64_t>(cfl.tellg());
  const int64_t expected = n * static_cast<int64_t>(sizeof(std::complex<float>));
  if (bytes != expected) {
    return absl::DataLossError(absl::StrCat(cfl_path, ": ", bytes, " bytes, but ", hdr_path, " says ",
                                            absl::StrJoin(array.dims, " x "), " complex floats = ", expected,
                                            bytes < expected ? " (truncated)" : " (trailing data)"));
  }
  return array;
}

absl::StatusOr<CflArray> ReadCfl(const std::string& path) {
  absl::StatusOr<CflArray> header = ReadCflHeader(path);
  if (!header.ok()) return header.status();
  CflArray array = *std::move(header);
  const std::string cfl_path = Base(path) + ".cfl";
  const int64_t n = array.elements();
  std::ifstream cfl(cfl_path, std::ios::binary);
  if (!cfl) return OpenError(cfl_path);
  array.data.resize(n);
  if (!cfl.read(reinterpret_cast<char*>(array.data.data()), n * static_cast<int64_t>(sizeof(std::complex<float>)))) {
    return absl::DataLossError(absl::StrCat(cfl_path, ": read error"));
  }
  return array;
}

absl::Status WriteCfl(const std::string& path, const CflArray& array) {
  auto n = CheckedProduct(array.dims, path);
  if (!n.ok()) return n.status();
  if (static_cast<int64_t>(array.data.size()) != *n) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", array.data.size(), " values for dimensions ",
                                                   absl::StrJoin(array.dims, " x ")));
  }
  const std::string base = Base(path);
  {
    std::ofstream cfl(base + ".cfl", std::ios::binary | std::ios::trunc);
    if (!cfl) return OpenError(base + ".cfl");
    cfl.write(reinterpret_cast<const char*>(array.data.data()), *n * sizeof(std::complex<float>));
    if (!cfl) return absl::DataLossError(absl::StrCat(base, ".cfl: write error"));
  }
  std::ofstream hdr(base + ".hdr", std::ios::trunc);
  if (!hdr) return OpenError(base + ".hdr");
  hdr << FormatCflHeader(array.dims);
  if (!hdr) return absl::DataLossError(absl::StrCat(base, ".hdr: write error"));
  return absl::OkStatus();
}

absl::StatusOr<mri::Trajectory2D> TrajectoryFromCfl(const CflArray& array) {
  if (array.dim(0) != 3) {
    return absl::InvalidArgumentError(absl::StrCat("trajectory: dimension 0 is ", array.dim(0), ", expected 3 (kx, ky, kz)"));
  }
  for (int d = 3; d < kCflDims; ++d) {
    if (array.dim(d) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("trajectory: dimension ", d, " is ", array.dim(d), "; expected 3 x samples x spokes"));
    }
  }
  mri::Trajectory2D t;
  t.samples = array.dim(1);
  t.spokes = array.dim(2);
  const int64_t m = t.size();
  t.kx.resize(m);
  t.ky.resize(m);
  for (int64_t j = 0; j < m; ++j) {
    const std::complex<float>* p = &array.data[3 * j];
    for (int a = 0; a < 3; ++a) {
      if (!std::isfinite(p[a].real()) || p[a].imag() != 0) {
        return absl::InvalidArgumentError(absl::StrCat("trajectory: point ", j, " axis ", a, " is (", p[a].real(), ", ",
                                                       p[a].imag(), "); expected a finite real coordinate"));
      }
    }
    if (p[2].real() != 0) {
      return absl::InvalidArgumentError(absl::StrCat("trajectory: point ", j, " has kz = ", p[2].real(),
                                                     "; a 3-D trajectory needs 3-D coil maps (dimension 2 = nz > 1)"));
    }
    t.kx[j] = p[0].real();
    t.ky[j] = p[1].real();
  }
  return t;
}

absl::StatusOr<mri::Trajectory3D> Trajectory3DFromCfl(const CflArray& array) {
  CflArray flat = array;  // TrajectoryFromCfl's checks, kz set aside
  for (int64_t j = 0; j < array.dim(1) * array.dim(2) && array.dim(0) == 3; ++j) flat.data[3 * j + 2] = 0;
  absl::StatusOr<mri::Trajectory2D> t2 = TrajectoryFromCfl(flat);
  if (!t2.ok()) return t2.status();
  mri::Trajectory3D t;
  t.samples = t2->samples;
  t.spokes = t2->spokes;
  t.kx = std::move(t2->kx);
  t.ky = std::move(t2->ky);
  t.kz.resize(t.size());
  for (int64_t j = 0; j < t.size(); ++j) {
    const std::complex<float> z = array.data[3 * j + 2];
    if (!std::isfinite(z.real()) || z.imag() != 0) {
      return absl::InvalidArgumentError(absl::StrCat("trajectory: point ", j, " axis 2 is (", z.real(), ", ", z.imag(),
                                                     "); expected a finite real coordinate"));
    }
    t.kz[j] = z.real();
  }
  return t;
}

CflArray TrajectoryToCfl(const mri::Trajectory2D& trajectory) {
  CflArray array;
  array.dims[0] = 3;
  array.dims[1] = trajectory.samples;
  array.dims[2] = trajectory.spokes;
  array.data.assign(3 * trajectory.size(), std::complex<float>(0, 0));
  for (int64_t j = 0; j < trajectory.size(); ++j) {
    array.data[3 * j] = trajectory.kx[j];
    array.data[3 * j + 1] = trajectory.ky[j];
  }
  return array;
}

absl::StatusOr<NonCartesianDims> CheckNonCartesianCfl(const CflArray& kspace, const CflArray& trajectory,
                                                      const CflArray& maps) {
  NonCartesianDims d;
  d.samples = trajectory.dim(1);
  d.spokes = trajectory.dim(2);
  d.nx = maps.dim(0);
  d.ny = maps.dim(1);
  d.coils = static_cast<int>(maps.dim(kCoilDim));
  if (trajectory.dim(0) != 3) {
    return absl::InvalidArgumentError(absl::StrCat("trajectory: dimension 0 is ", trajectory.dim(0), ", expected 3"));
  }
  for (int dim = 3; dim < kCflDims; ++dim) {
    if (trajectory.dim(dim) != 1) {
      return absl::InvalidArgumentError(absl::StrCat("trajectory: dimension ", dim, " is ", trajectory.dim(dim),
                                                     "; one trajectory (3 x samples x spokes) serves every frame and slice"));
    }
  }
  if (kspace.dim(0) != 1 || kspace.dim(1) != d.samples || kspace.dim(2) != d.spokes) {
    return absl::InvalidArgumentError(absl::StrCat("kspace: dimensions ", kspace.dim(0), " x ", kspace.dim(1), " x ",
                                                   kspace.dim(2), " do not match the trajectory's 1 x ", d.samples,
                                                   " x ", d.spokes));
  }
  if (kspace.dim(kCoilDim) != d.coils) {
    return absl::InvalidArgumentError(absl::StrCat("kspace: ", kspace.dim(kCoilDim), " coils (dimension 3) but the maps have ",
                                                   d.coils));
  }
  d.nz = maps.dim(2);
  const absl::StatusOr<std::array<int64_t, 2>> stack = StackDims(kspace, {0, 1, 2, kCoilDim});
  if (!stack.ok()) return stack.status();
  d.frames = (*stack)[0];
  d.slices = (*stack)[1];
  if (d.nz > 1 && (d.frames > 1 || d.slices > 1 || maps.dim(kSliceDim) > 1)) {
    return absl::InvalidArgumentError(absl::StrCat("kspace: ", d.frames, " frames (dimension 10) x ", d.slices,
                                                   " slices (dimension 13) with 3-D maps (dimension 2 = ", d.nz,
                                                   "); a 3-D volume does not stack: reconstruct each one alone"));
  }
  for (int dim = 4; dim < kCflDims; ++dim) {
    if (dim == kSliceDim || maps.dim(dim) == 1) continue;
    return absl::InvalidArgumentError(absl::StrCat("maps: dimension ", dim, " is ", maps.dim(dim),
                                                   "; maps may only have a slice dimension (13): one set per slice"));
  }
  if (maps.dim(kSliceDim) != 1 && maps.dim(kSliceDim) != d.slices) {
    return absl::InvalidArgumentError(absl::StrCat("maps: ", maps.dim(kSliceDim),
                                                   " slices (dimension 13) but the kspace has ", d.slices,
                                                   "; give one map set per slice or one for all"));
  }
  d.maps_per_slice = maps.dim(kSliceDim) > 1;
  return d;
}

absl::StatusOr<std::array<int64_t, 2>> StackDims(const CflArray& kspace, std::initializer_list<int> own) {
  for (int dim = 0; dim < kCflDims; ++dim) {
    if (dim == kTimeDim || dim == kSliceDim || kspace.dim(dim) == 1) continue;
    if (std::find(own.begin(), own.end(), dim) != own.end()) continue;
    return absl::InvalidArgumentError(absl::StrCat("kspace: dimension ", dim, " is ", kspace.dim(dim),
                                                   "; only frames (dimension 10) and slices (13) may be stacked"));
  }
  return std::array<int64_t, 2>{kspace.dim(kTimeDim), kspace.dim(kSliceDim)};
}

}  // namespace tessera::recon::formats

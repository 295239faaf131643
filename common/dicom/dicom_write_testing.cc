#include "common/dicom/dicom_write_testing.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace tessera::dicom::testing {

std::string TmpDir(const std::string& name) {
  const char* t = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(t ? t : "/tmp", "/", name);
  if (std::system(absl::StrCat("rm -rf '", dir, "' && mkdir -p '", dir, "'").c_str()) != 0) return dir;
  return dir;
}

bool Have(const char* tool) { return std::system(absl::StrCat("command -v ", tool, " >/dev/null 2>&1").c_str()) == 0; }

std::string Dciodvfy(const std::string& file) {
  if (!Have("dciodvfy")) {
    std::printf("dciodvfy not on PATH: check skipped\n");
    return "";
  }
  const std::string log = file + ".dciodvfy";
  if (std::system(absl::StrCat("dciodvfy '", file, "' > '", log, "' 2>&1").c_str()) == -1) return "Error: cannot run";
  return ReadBytes(log);
}

double AffineDiff(const Geometry& a, const Geometry& b) {
  const Mat4 ma = a.IndexToWorld(), mb = b.IndexToWorld();
  double d = 0;
  for (int q = 0; q < 12; ++q) d = std::max(d, std::abs(ma[q] - mb[q]));
  return d;
}

std::array<double, 9> ObliqueDirection(double a, double b, bool negative) {
  const double rz[9] = {std::cos(a), -std::sin(a), 0, std::sin(a), std::cos(a), 0, 0, 0, 1};
  const double rx[9] = {1, 0, 0, 0, std::cos(b), -std::sin(b), 0, std::sin(b), std::cos(b)};
  std::array<double, 9> d{};
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) {
      double s = 0;
      for (int q = 0; q < 3; ++q) s += rz[r * 3 + q] * rx[q * 3 + c];
      d[r * 3 + c] = s;
    }
  if (negative) {
    for (int r = 0; r < 3; ++r) d[r * 3] = -d[r * 3];
  }
  return d;
}

Volume ReverseK(const Volume& v) {
  Volume out;
  out.data = NDArray::Allocate(v.data.shape(), v.data.dtype()).value();
  const int64_t nx = v.data.shape()[0], ny = v.data.shape()[1], nz = v.data.shape()[2];
  const size_t plane = static_cast<size_t>(nx * ny) * SizeOf(v.data.dtype());
  for (int64_t k = 0; k < nz; ++k) {
    std::memcpy(static_cast<char*>(out.data.raw_data()) + plane * k,
                static_cast<const char*>(v.data.raw_data()) + plane * (nz - 1 - k), plane);
  }
  out.geometry = v.geometry;
  for (int q = 0; q < 3; ++q) {
    out.geometry.origin[q] += (nz - 1) * v.geometry.spacing[2] * v.geometry.direction[q * 3 + 2];
    out.geometry.direction[q * 3 + 2] = -v.geometry.direction[q * 3 + 2];
  }
  return out;
}

double Det(const Geometry& g) {
  const auto& d = g.direction;
  return d[0] * (d[4] * d[8] - d[5] * d[7]) - d[1] * (d[3] * d[8] - d[5] * d[6]) + d[2] * (d[3] * d[7] - d[4] * d[6]);
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace tessera::dicom::testing

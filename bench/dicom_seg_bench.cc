// WriteDicomSeg / ReadDicomSeg speed (common/dicom/dicom_seg.h), CPU:
//  1. a 181x217x181 (MNI 1 mm) parcellation of 100 labels (5x5x4 blocks inside
//     an ellipsoid "brain": each label on ~40 slices, frames only there);
//  2. the frame-count stress case: 256 labels on every one of 512 slices of
//     128x128 (131,072 frames), with the process's peak memory.
// Usage: dicom_seg_bench [--repeats=N] [--out_dir=DIR]
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "bench/bench_util.h"
#include "common/dicom/dicom_seg.h"

namespace tessera::bench {
namespace {

Volume Parcellation() {
  const int nx = 181, ny = 217, nz = 181;
  Volume v;
  v.data = NDArray::Allocate({nx, ny, nz}, DType::kInt16).value();
  int16_t* p = v.data.data<int16_t>();
  for (int k = 0; k < nz; ++k)
    for (int j = 0; j < ny; ++j)
      for (int i = 0; i < nx; ++i) {
        const double x = (i - 90.0) / 72, y = (j - 108.0) / 90, z = (k - 90.0) / 75;
        int16_t label = 0;
        if (x * x + y * y + z * z <= 1) label = static_cast<int16_t>(1 + (i * 5 / nx) + 5 * (j * 5 / ny) + 25 * (k * 4 / nz));
        p[i + nx * (j + ny * k)] = label;
      }
  v.geometry.origin = {-90, -126, -72};
  v.geometry.direction = {-1, 0, 0, 0, 1, 0, 0, 0, 1};  // LAS, as a DICOM series reads
  return v;
}

Volume Stress() {
  const int nx = 128, ny = 128, nz = 512;
  Volume v;
  v.data = NDArray::Allocate({nx, ny, nz}, DType::kInt16).value();
  int16_t* p = v.data.data<int16_t>();
  for (int k = 0; k < nz; ++k)
    for (int j = 0; j < ny; ++j)
      for (int i = 0; i < nx; ++i) p[i + nx * (j + ny * k)] = static_cast<int16_t>(1 + (i / 8) + 16 * (j / 8));
  v.geometry.direction = {-1, 0, 0, 0, 1, 0, 0, 0, 1};
  return v;
}

double PeakRssMiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;
}

long long FileBytes(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return -1;
  std::fseek(f, 0, SEEK_END);
  const long long n = std::ftell(f);
  std::fclose(f);
  return n;
}

int Run(const char* name, const Volume& v, const std::string& path, int repeats) {
  std::vector<double> write_s, read_s;
  dicom::DicomSegWriteOptions options;
  options.series_description = "dicom_seg_bench";
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    auto written = dicom::WriteDicomSeg(v, path, options);
    write_s.push_back(SecondsSince(t0));
    if (!written.ok()) {
      std::fprintf(stderr, "%s: %s\n", name, written.status().ToString().c_str());
      return 1;
    }
    const auto t1 = Clock::now();
    auto back = dicom::ReadDicomSeg(path);
    read_s.push_back(SecondsSince(t1));
    if (!back.ok() || back->labels.data.shape() != v.data.shape()) {
      std::fprintf(stderr, "%s: read back failed: %s\n", name, back.status().ToString().c_str());
      return 1;
    }
  }
  std::printf("%-44s write median %.3f s (min %.3f), read median %.3f s, file %.1f MB, peak RSS %.0f MiB\n", name,
              Median(write_s), *std::min_element(write_s.begin(), write_s.end()), Median(read_s),
              FileBytes(path) / 1e6, PeakRssMiB());
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  int repeats = 5;
  std::string out_dir = "/tmp";
  for (int i = 1; i < argc; ++i) {
    if (const char* v = tessera::bench::FlagValue(argv[i], "--repeats")) repeats = std::max(1, std::atoi(v));
    if (const char* v = tessera::bench::FlagValue(argv[i], "--out_dir")) out_dir = v;
  }
  int rc = tessera::bench::Run("181x217x181, 100 labels (parcellation)", tessera::bench::Parcellation(),
                               out_dir + "/dicom_seg_bench_parcellation.dcm", repeats);
  rc |= tessera::bench::Run("128x128x512, 256 labels on every slice", tessera::bench::Stress(),
                            out_dir + "/dicom_seg_bench_stress.dcm", std::min(repeats, 2));
  return rc;
}

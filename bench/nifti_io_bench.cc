// NIfTI gzip IO: the zlib path (one stream, one thread; the writer before
// libdeflate) vs the libdeflate path (parallel independent members, per-output
// level) on a 1 mm brain-size float image and a displacement field (x3), side
// by side in one run. Prints a markdown table: seconds, MB/s of uncompressed
// data, file size, compressed/raw and the speed-up over zlib.
//
//   bazel run -c opt //bench:nifti_io_bench -- --nx=181 --ny=217 --nz=181 --repeats=3
//
// Threads: TESSERA_CPU_THREADS (default: all cores).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <sys/stat.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "common/nifti_io.h"
#include "common/parallel.h"

ABSL_FLAG(int64_t, nx, 181, "volume x size");
ABSL_FLAG(int64_t, ny, 217, "volume y size");
ABSL_FLAG(int64_t, nz, 181, "volume z size");
ABSL_FLAG(int, repeats, 3, "timed repetitions per row (best is reported)");
ABSL_FLAG(std::string, dir, "/tmp", "where the files are written");

namespace tessera {
namespace {

// Brain-like: smooth intensities with noise (as after bias correction).
Volume Image(int64_t nx, int64_t ny, int64_t nz) {
  Volume v;
  v.data = *NDArray::Allocate({nx, ny, nz}, DType::kFloat32);
  std::mt19937 rng(1);
  std::normal_distribution<float> noise(0, 3);
  float* p = v.data.data<float>();
  for (int64_t k = 0; k < nz; ++k) {
    for (int64_t j = 0; j < ny; ++j) {
      for (int64_t i = 0; i < nx; ++i) {
        const double x = (i - nx / 2.0) / nx, y = (j - ny / 2.0) / ny, z = (k - nz / 2.0) / nz;
        const double r = std::sqrt(x * x + y * y + z * z);
        const double head = r < 0.42 ? 60 + 40 * std::sin(40 * x) * std::cos(30 * y + 10 * z) : 0;
        p[i + nx * (j + ny * k)] = head > 0 ? static_cast<float>(head + noise(rng)) : 0.0f;
      }
    }
  }
  return v;
}

// A smooth displacement field in mm, full float precision (what registration writes).
Volume Field(int64_t nx, int64_t ny, int64_t nz) {
  Volume v;
  v.data = *NDArray::Allocate({nx, ny, nz, 3}, DType::kFloat32);
  float* p = v.data.data<float>();
  const int64_t n = nx * ny * nz;
  for (int c = 0; c < 3; ++c) {
    for (int64_t k = 0; k < nz; ++k) {
      for (int64_t j = 0; j < ny; ++j) {
        for (int64_t i = 0; i < nx; ++i) {
          p[c * n + i + nx * (j + ny * k)] =
              static_cast<float>(2.5 * std::sin(0.07 * i + c) * std::cos(0.05 * j - 0.3 * c) * std::sin(0.06 * k + 1));
        }
      }
    }
  }
  return v;
}

double BestSeconds(int repeats, const std::function<void()>& fn) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, bench::SecondsSince(t0));
  }
  return best;
}

int64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

struct Row {
  std::string what, path;
  NiftiWriteOptions options;
};

int Main() {
  const int64_t nx = absl::GetFlag(FLAGS_nx), ny = absl::GetFlag(FLAGS_ny), nz = absl::GetFlag(FLAGS_nz);
  const int repeats = std::max(1, absl::GetFlag(FLAGS_repeats));
  const std::string dir = absl::GetFlag(FLAGS_dir);
  const Volume image = Image(nx, ny, nz), field = Field(nx, ny, nz);
  std::printf("# NIfTI gzip IO, %lldx%lldx%lld float32 image and x3 field, %d threads, best of %d\n\n",
              static_cast<long long>(nx), static_cast<long long>(ny), static_cast<long long>(nz), CpuThreads(),
              repeats);

  for (const Volume* volume : {&image, &field}) {
    const bool is_field = volume == &field;
    const double mb = volume->data.nbytes() / 1e6;
    std::printf("## %s (%.1f MB raw)\n\n", is_field ? "displacement field (intent VECTOR)" : "image", mb);
    std::printf("| write path | level | write s | write MB/s | file MB | size/raw | write speed-up | read s (zlib) | "
                "read s (libdeflate) | read speed-up |\n|---|---|---|---|---|---|---|---|---|---|\n");
    std::vector<std::pair<const char*, int>> paths = {{"zlib (old)", 6}, {"libdeflate", 6}};
    if (is_field) {
      paths.push_back({"libdeflate", 1});
      paths.push_back({"libdeflate", 2});
      paths.push_back({"libdeflate", 4});
    }
    double zlib_write = 0;
    for (const auto& [name, level] : paths) {
      NiftiWriteOptions options;
      options.intent_code = is_field ? 1007 : 0;
      options.gzip_level = level;
      options.gzip_writer = std::string(name) == "zlib (old)" ? NiftiGzipWriter::kZlib : NiftiGzipWriter::kLibdeflate;
      const std::string path = absl::StrCat(dir, "/nifti_io_bench_", is_field ? "field" : "image", "_",
                                            options.gzip_writer == NiftiGzipWriter::kZlib ? "zlib" : "deflate", level,
                                            ".nii.gz");
      absl::Status status;
      const double w = BestSeconds(repeats, [&] { status = WriteNifti(*volume, path, options); });
      if (!status.ok()) {
        std::fprintf(stderr, "%s\n", status.ToString().c_str());
        return 1;
      }
      if (zlib_write == 0) zlib_write = w;
      NiftiReadOptions slow, fast;
      slow.libdeflate = false;
      const double r_slow = BestSeconds(repeats, [&] { status.Update(ReadNifti(path, slow).status()); });
      const double r_fast = BestSeconds(repeats, [&] { status.Update(ReadNifti(path, fast).status()); });
      if (!status.ok()) {
        std::fprintf(stderr, "%s\n", status.ToString().c_str());
        return 1;
      }
      const double file_mb = FileSize(path) / 1e6;
      std::printf("| %s | %d | %.3f | %.0f | %.2f | %.3f | %.2fx | %.3f | %.3f | %.2fx |\n", name, level, w, mb / w,
                  file_mb, file_mb / mb, zlib_write / w, r_slow, r_fast, r_slow / r_fast);
      if (!std::getenv("NIFTI_BENCH_KEEP")) std::remove(path.c_str());
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tessera::Main();
}

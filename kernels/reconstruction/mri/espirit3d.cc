#include "kernels/reconstruction/mri/espirit3d.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/parallel.h"
#include "common/status.h"
#include "kernels/reconstruction/mri/espirit_calibration.h"
#include "kernels/reconstruction/mri/espirit_pixels.h"
#include "kernels/reconstruction/mri/espirit_volume.h"
#include "kernels/reconstruction/nufft/fftw_util.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

using Complex = std::complex<float>;
using Complex64 = std::complex<double>;
using Dims = std::array<int64_t, 3>;
using Kernel = std::array<int, 3>;

std::vector<std::pair<int, int>> CoilPairs(int coils) {  // c1 <= c2, row by row (espirit_pixels.h's packing)
  std::vector<std::pair<int, int>> pairs;
  for (int c1 = 0; c1 < coils; ++c1) {
    for (int c2 = c1; c2 < coils; ++c2) pairs.emplace_back(c1, c2);
  }
  return pairs;
}

// Sums of `window` consecutive values starting at 0 .. count - 1 of a line
// (stride apart), running: out[i * out_stride].
void SlidingSums(const Complex64* in, int64_t stride, int64_t window, int64_t count, Complex64* out,
                 int64_t out_stride) {
  Complex64 s = 0;
  for (int64_t x = 0; x < window; ++x) s += in[x * stride];
  out[0] = s;
  for (int64_t i = 1; i < count; ++i) {
    s += in[(i + window - 1) * stride] - in[(i - 1) * stride];
    out[i * out_stride] = s;
  }
}

// The upper triangle of the calibration Gram matrix M = A^H A (column-major
// n x n, n = kx ky kz coils, column j = px + kx (py + ky (pz + kz c))): for
// each coil pair and offset d = p - p', the products y_c(r) conj(y_c'(r - d))
// summed over every window r in p + [0, q) by separable sliding sums.
std::vector<Complex64> CalibrationGram(const std::vector<Complex>& calibration, Dims region, Kernel kernel, int coils) {
  const Dims q = {region[0] - kernel[0] + 1, region[1] - kernel[1] + 1, region[2] - kernel[2] + 1};
  const int kvol = kernel[0] * kernel[1] * kernel[2], n = kvol * coils;
  const int sx = 2 * kernel[0] - 1, sy = 2 * kernel[1] - 1, sz = 2 * kernel[2] - 1;
  const int64_t offsets = int64_t{sx} * sy * sz, points = region[0] * region[1] * region[2];
  const auto pairs = CoilPairs(coils);
  std::vector<Complex64> m(static_cast<size_t>(n) * n, 0);
  ParallelForDynamic(static_cast<int64_t>(pairs.size()) * offsets, 16, [&](int64_t begin, int64_t end, int) {
    std::vector<Complex64> f, a, b;
    for (int64_t task = begin; task < end; ++task) {
      const auto [c1, c2] = pairs[task / offsets];
      const int64_t o = task % offsets;
      const int d[3] = {static_cast<int>(o % sx) - (kernel[0] - 1), static_cast<int>((o / sx) % sy) - (kernel[1] - 1),
                        static_cast<int>(o / (int64_t{sx} * sy)) - (kernel[2] - 1)};
      // Per axis: p in [lo, lo + count) keeps p - d inside the kernel; the windows cover [lo, lo + span).
      int64_t lo[3], count[3], span[3];
      for (int ax = 0; ax < 3; ++ax) {
        lo[ax] = std::max(0, d[ax]);
        count[ax] = kernel[ax] - std::abs(d[ax]);
        span[ax] = count[ax] + q[ax] - 1;
      }
      const Complex* y1 = calibration.data() + c1 * points;
      const Complex* y2 = calibration.data() + c2 * points;
      f.resize(static_cast<size_t>(span[0] * span[1] * span[2]));
      for (int64_t z = 0; z < span[2]; ++z) {
        for (int64_t y = 0; y < span[1]; ++y) {
          const int64_t r = ((lo[2] + z) * region[1] + lo[1] + y) * region[0] + lo[0];
          const int64_t s = r - (d[2] * region[1] + d[1]) * region[0] - d[0];
          Complex64* out = f.data() + span[0] * (y + span[1] * z);
          for (int64_t x = 0; x < span[0]; ++x) out[x] = Complex64(y1[r + x]) * std::conj(Complex64(y2[s + x]));
        }
      }
      a.resize(static_cast<size_t>(count[0] * span[1] * span[2]));  // windows along x
      for (int64_t yz = 0; yz < span[1] * span[2]; ++yz) {
        SlidingSums(f.data() + span[0] * yz, 1, q[0], count[0], a.data() + count[0] * yz, 1);
      }
      b.resize(static_cast<size_t>(count[0] * count[1] * span[2]));  // then y
      for (int64_t z = 0; z < span[2]; ++z) {
        for (int64_t i = 0; i < count[0]; ++i) {
          SlidingSums(a.data() + i + count[0] * span[1] * z, count[0], q[1], count[1],
                      b.data() + i + count[0] * count[1] * z, count[0]);
        }
      }
      const int64_t plane = count[0] * count[1];
      for (int64_t j = 0; j < count[1]; ++j) {  // then z, into M
        for (int64_t i = 0; i < count[0]; ++i) {
          Complex64 s = 0;
          for (int64_t z = 0; z < q[2]; ++z) s += b[i + count[0] * j + plane * z];
          for (int64_t k = 0; k < count[2]; ++k) {
            if (k > 0) s += b[i + count[0] * j + plane * (k + q[2] - 1)] - b[i + count[0] * j + plane * (k - 1)];
            const int64_t p1[3] = {lo[0] + i, lo[1] + j, lo[2] + k};
            const int64_t j1 = p1[0] + kernel[0] * (p1[1] + kernel[1] * (p1[2] + kernel[2] * int64_t{c1}));
            const int64_t j2 = (p1[0] - d[0]) + kernel[0] * ((p1[1] - d[1]) + kernel[1] * ((p1[2] - d[2]) +
                                                                                           kernel[2] * int64_t{c2}));
            if (j1 <= j2) m[j1 + j2 * n] = s;
          }
        }
      }
    }
  });
  return m;
}

// A lower bound of M's top eigenvalue: the Rayleigh quotient after power
// iterations (M from its upper triangle), to bound zheevr's range.
double TopEigenvalueLowerBound(int n, const std::vector<Complex64>& m, int iterations) {
  std::vector<Complex64> x(n, Complex64(1.0 / std::sqrt(static_cast<double>(n)))), y(n);
  double rayleigh = 0;
  for (int it = 0; it < iterations; ++it) {
    std::fill(y.begin(), y.end(), Complex64(0));
    for (int j = 0; j < n; ++j) {
      const Complex64* col = m.data() + static_cast<size_t>(j) * n;
      Complex64 sj = col[j].real() * x[j];
      const Complex64 xj = x[j];
      for (int i = 0; i < j; ++i) {
        y[i] += col[i] * xj;
        sj += std::conj(col[i]) * x[i];
      }
      y[j] += sj;
    }
    double norm = 0;
    rayleigh = 0;
    for (int i = 0; i < n; ++i) norm += std::norm(y[i]), rayleigh += (std::conj(x[i]) * y[i]).real();
    norm = std::sqrt(norm);
    if (!(norm > 0)) return 0;
    for (int i = 0; i < n; ++i) x[i] = y[i] / norm;
  }
  return rayleigh;
}

// K_l(d) = sum_t sum_{p - p' = d} v_t(p, c1) conj(v_t(p', c2)) on the (2k - 1)^3
// offsets (x fastest, d + k - 1), by correlation of the zero-padded vectors'
// FFTs on a (2k - 1)^3 grid (no wrap-around: |d| <= k - 1).
absl::StatusOr<std::vector<Complex64>> SubspaceKernels(const Complex64* vectors, int kept, Kernel kernel, int coils) {
  const Dims grid = {2 * kernel[0] - 1, 2 * kernel[1] - 1, 2 * kernel[2] - 1};
  const int64_t points = grid[0] * grid[1] * grid[2];
  const int kvol = kernel[0] * kernel[1] * kernel[2], n = kvol * coils;
  TESSERA_ASSIGN_OR_RETURN(auto forward, nufft::FftwPlan<double>::Create(grid, -1));
  TESSERA_ASSIGN_OR_RETURN(auto inverse, nufft::FftwPlan<double>::Create(grid, +1));
  const nufft::FftwGrid& layout = forward->grid();
  const auto pairs = CoilPairs(coils);
  const int npairs = static_cast<int>(pairs.size());
  std::vector<Complex64> accumulated(static_cast<size_t>(npairs) * points, 0);
  constexpr int kBlock = 32;  // vectors transformed at a time (bounded memory)
  std::vector<Complex64> spectra(static_cast<size_t>(kBlock) * coils * points);
  std::atomic<bool> out_of_memory{false};
  for (int t0 = 0; t0 < kept; t0 += kBlock) {
    const int block = std::min(kBlock, kept - t0);
    ParallelForDynamic(int64_t{block} * coils, 4, [&](int64_t begin, int64_t end, int) {
      auto work = nufft::AllocFftwArray<double>(layout.elements());
      if (work == nullptr) {
        out_of_memory = true;
        return;
      }
      for (int64_t item = begin; item < end; ++item) {
        const int t = static_cast<int>(item / coils), c = static_cast<int>(item % coils);
        const Complex64* v = vectors + static_cast<size_t>(t0 + t) * n + static_cast<size_t>(kvol) * c;
        std::fill(work.get(), work.get() + layout.elements(), Complex64(0));
        for (int pz = 0; pz < kernel[2]; ++pz) {
          for (int py = 0; py < kernel[1]; ++py) {
            for (int px = 0; px < kernel[0]; ++px) {
              work[layout.Index(px, py, pz)] = v[px + kernel[0] * (py + kernel[1] * pz)];
            }
          }
        }
        forward->Execute(work.get());
        Complex64* out = spectra.data() + item * points;
        for (int64_t z = 0; z < grid[2]; ++z) {
          for (int64_t y = 0; y < grid[1]; ++y) {
            for (int64_t x = 0; x < grid[0]; ++x) out[x + grid[0] * (y + grid[1] * z)] = work[layout.Index(x, y, z)];
          }
        }
      }
    });
    if (out_of_memory) return absl::ResourceExhaustedError("espirit kernels: out of memory");
    ParallelForDynamic(npairs, 1, [&](int64_t begin, int64_t end, int) {
      for (int64_t l = begin; l < end; ++l) {
        Complex64* acc = accumulated.data() + l * points;
        for (int t = 0; t < block; ++t) {
          const Complex64* s1 = spectra.data() + (static_cast<int64_t>(t) * coils + pairs[l].first) * points;
          const Complex64* s2 = spectra.data() + (static_cast<int64_t>(t) * coils + pairs[l].second) * points;
          for (int64_t f = 0; f < points; ++f) acc[f] += s1[f] * std::conj(s2[f]);
        }
      }
    });
  }
  std::vector<Complex64> kernels(accumulated.size());
  ParallelForDynamic(npairs, 1, [&](int64_t begin, int64_t end, int) {
    auto work = nufft::AllocFftwArray<double>(layout.elements());
    if (work == nullptr) {
      out_of_memory = true;
      return;
    }
    for (int64_t l = begin; l < end; ++l) {
      const Complex64* acc = accumulated.data() + l * points;
      for (int64_t z = 0; z < grid[2]; ++z) {
        for (int64_t y = 0; y < grid[1]; ++y) {
          for (int64_t x = 0; x < grid[0]; ++x) work[layout.Index(x, y, z)] = acc[x + grid[0] * (y + grid[1] * z)];
        }
      }
      inverse->Execute(work.get());
      // Offset d sits at d mod grid; stored at d + k - 1.
      Complex64* out = kernels.data() + l * points;
      for (int64_t z = 0; z < grid[2]; ++z) {
        for (int64_t y = 0; y < grid[1]; ++y) {
          for (int64_t x = 0; x < grid[0]; ++x) {
            const int64_t gx = (x - (kernel[0] - 1) + grid[0]) % grid[0];
            const int64_t gy = (y - (kernel[1] - 1) + grid[1]) % grid[1];
            const int64_t gz = (z - (kernel[2] - 1) + grid[2]) % grid[2];
            out[x + grid[0] * (y + grid[1] * z)] = work[layout.Index(gx, gy, gz)] / static_cast<double>(points);
          }
        }
      }
    }
  });
  if (out_of_memory) return absl::ResourceExhaustedError("espirit kernels: out of memory");
  return kernels;
}

}  // namespace

std::vector<Complex> ExtractCentre3d(const Complex* kspace, Dims dims, int coils, Dims region) {
  std::vector<Complex> out(static_cast<size_t>(region[0] * region[1] * region[2] * coils));
  const int64_t u0 = dims[0] / 2 - region[0] / 2, v0 = dims[1] / 2 - region[1] / 2, w0 = dims[2] / 2 - region[2] / 2;
  for (int c = 0; c < coils; ++c) {
    for (int64_t w = 0; w < region[2]; ++w) {
      for (int64_t v = 0; v < region[1]; ++v) {
        const Complex* row = kspace + ((c * dims[2] + w0 + w) * dims[1] + v0 + v) * dims[0] + u0;
        std::copy(row, row + region[0], out.begin() + ((c * region[2] + w) * region[1] + v) * region[0]);
      }
    }
  }
  return out;
}

absl::StatusOr<EspiritMaps> Espirit3dFromCalibration(const std::vector<Complex>& calibration, Dims region, int coils,
                                                     Dims image, const EspiritOptions& options) {
  return Espirit3dFromCalibration(Stream::Cpu(), calibration, region, coils, image, options);
}

absl::StatusOr<EspiritMaps> Espirit3dFromCalibration(const Stream& stream, const std::vector<Complex>& calibration,
                                                     Dims region, int coils, Dims image, const EspiritOptions& options) {
  TESSERA_RETURN_IF_ERROR(espirit_internal::CheckOptions(options));
  if (coils < 1) return absl::InvalidArgumentError(absl::StrCat("espirit: ", coils, " coils"));
  const char* axis_name[3] = {"x", "y", "z"};
  Kernel kernel;
  for (int ax = 0; ax < 3; ++ax) {
    if (region[ax] < 1 || image[ax] < region[ax]) {
      return absl::InvalidArgumentError(absl::StrCat("espirit: calibration region ", region[0], " x ", region[1], " x ",
                                                     region[2], " does not fit the image ", image[0], " x ", image[1],
                                                     " x ", image[2], " along ", axis_name[ax]));
    }
    kernel[ax] = region[ax] == 1 ? 1 : options.kernel_size;  // BART: no kernel extent along a flat axis
    if (region[ax] < kernel[ax]) {
      return absl::InvalidArgumentError(absl::StrCat("espirit: calibration region ", region[0], " x ", region[1], " x ",
                                                     region[2], " is smaller than the ", options.kernel_size,
                                                     "-point kernel along ", axis_name[ax]));
    }
  }
  const int64_t points = region[0] * region[1] * region[2];
  if (calibration.size() != static_cast<size_t>(points * coils)) {
    return absl::InvalidArgumentError(absl::StrCat("espirit: calibration data has ", calibration.size(),
                                                   " values, expected ", region[0], " x ", region[1], " x ", region[2],
                                                   " x ", coils));
  }

  // 1. Gram matrix of the calibration matrix and its signal subspace.
  const int kvol = kernel[0] * kernel[1] * kernel[2], n = kvol * coils;
  std::vector<Complex64> m = CalibrationGram(calibration, region, kernel, coils);
  const double bound = TopEigenvalueLowerBound(n, m, 30);
  if (!(bound > 0)) return absl::InvalidArgumentError("espirit: the calibration region holds no signal");
  std::vector<double> values;
  std::vector<Complex64> vectors;
  TESSERA_RETURN_IF_ERROR(
      espirit_internal::HermitianEigenAbove(n, &m, 0.5 * options.threshold * bound, &values, &vectors));
  if (values.empty() || !(values.back() > 0)) {
    return absl::InvalidArgumentError("espirit: the calibration region holds no signal");
  }
  const double top = values.back();
  const int found = static_cast<int>(values.size());
  int kept = 0;
  while (kept < found && values[found - 1 - kept] / top > options.threshold) ++kept;

  // 2-3. Kernels of the subspace projector, then the Gram volumes (scaled 1 / kvol) on the stream.
  TESSERA_ASSIGN_OR_RETURN(
      std::vector<Complex64> kernels,
      SubspaceKernels(vectors.data() + static_cast<size_t>(found - kept) * n, kept, kernel, coils));
  for (auto& k : kernels) k /= static_cast<double>(kvol);
  const int pairs = coils * (coils + 1) / 2;
  const int64_t voxels = image[0] * image[1] * image[2];
  const Kernel half = {kernel[0] - 1, kernel[1] - 1, kernel[2] - 1};
  TESSERA_ASSIGN_OR_RETURN(std::vector<Complex64> reference,
                           espirit_internal::PrincipalCoilVector(calibration, points, coils));

  EspiritMaps out;
  out.nx = image[0];
  out.ny = image[1];
  out.nz = image[2];
  out.coils = coils;
  out.kernels = kept;
  out.calibration_x = region[0];
  out.calibration_y = region[1];
  out.calibration_z = region[2];
  out.maps.assign(static_cast<size_t>(coils) * voxels, Complex(0, 0));
  out.eigenvalues.assign(voxels, 0.f);
  if (stream.backend() == Backend::kCpu) {
    std::vector<Complex> gram(static_cast<size_t>(pairs) * voxels);
    TESSERA_RETURN_IF_ERROR(EspiritGramVolumes(stream, image, half, pairs, kernels, gram.data()));
    TESSERA_RETURN_IF_ERROR(EspiritPixelMaps(stream, coils, voxels, gram.data(), reference.data(),
                                             options.power_iterations, options.crop, out.maps.data(),
                                             out.eigenvalues.data()));
    return out;
  }
  const size_t gram_bytes = static_cast<size_t>(pairs) * voxels * sizeof(Complex);
  const size_t maps_bytes = out.maps.size() * sizeof(Complex), ev_bytes = out.eigenvalues.size() * sizeof(float);
  TESSERA_ASSIGN_OR_RETURN(auto d_gram, Buffer::Allocate(MemoryKind::kDevice, gram_bytes, stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(auto d_ref, UploadVector(reference, stream));
  TESSERA_ASSIGN_OR_RETURN(auto d_maps, Buffer::Allocate(MemoryKind::kDevice, maps_bytes, stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(auto d_ev, Buffer::Allocate(MemoryKind::kDevice, ev_bytes, stream.ordinal()));
  TESSERA_RETURN_IF_ERROR(
      EspiritGramVolumes(stream, image, half, pairs, kernels, static_cast<Complex*>(d_gram->data())));
  TESSERA_RETURN_IF_ERROR(EspiritPixelMaps(stream, coils, voxels, static_cast<const Complex*>(d_gram->data()),
                                           static_cast<const Complex64*>(d_ref->data()), options.power_iterations,
                                           options.crop, static_cast<Complex*>(d_maps->data()),
                                           static_cast<float*>(d_ev->data())));
  TESSERA_RETURN_IF_ERROR(
      CopyBytes(out.maps.data(), MemoryKind::kHost, d_maps->data(), MemoryKind::kDevice, maps_bytes, stream));
  TESSERA_RETURN_IF_ERROR(
      CopyBytes(out.eigenvalues.data(), MemoryKind::kHost, d_ev->data(), MemoryKind::kDevice, ev_bytes, stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return out;
}

absl::StatusOr<EspiritMaps> Espirit3dCartesian(const Complex* kspace, Dims dims, int coils,
                                               const EspiritOptions& options) {
  return Espirit3dCartesian(Stream::Cpu(), kspace, dims, coils, options);
}

absl::StatusOr<EspiritMaps> Espirit3dCartesian(const Stream& stream, const Complex* kspace, Dims dims, int coils,
                                               const EspiritOptions& options) {
  TESSERA_RETURN_IF_ERROR(espirit_internal::CheckOptions(options));
  if (dims[0] < 1 || dims[1] < 1 || dims[2] < 1 || coils < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("espirit: k-space ", dims[0], " x ", dims[1], " x ", dims[2], " x ", coils));
  }
  if (options.calibration_size < options.kernel_size) {
    return absl::InvalidArgumentError(absl::StrCat("espirit: calibration size ", options.calibration_size,
                                                   " is smaller than the kernel (", options.kernel_size, ")"));
  }
  const int64_t volume = dims[0] * dims[1] * dims[2];
  auto box_sampled = [&](const Dims& box) {
    const int64_t u0 = dims[0] / 2 - box[0] / 2, v0 = dims[1] / 2 - box[1] / 2, w0 = dims[2] / 2 - box[2] / 2;
    for (int64_t w = w0; w < w0 + box[2]; ++w) {
      for (int64_t v = v0; v < v0 + box[1]; ++v) {
        for (int64_t u = u0; u < u0 + box[0]; ++u) {
          const int64_t at = (w * dims[1] + v) * dims[0] + u;
          bool sampled = false;
          for (int c = 0; c < coils && !sampled; ++c) sampled = kspace[c * volume + at] != Complex(0, 0);
          if (!sampled) return false;
        }
      }
    }
    return true;
  };
  // Largest centred box <= calibration_size per axis: first along the centre lines, then shrunk together
  // (axes of extent 1 stay 1, with a 1-point kernel).
  Dims box, least;
  for (int ax = 0; ax < 3; ++ax) {
    box[ax] = std::min<int64_t>(options.calibration_size, dims[ax]);
    least[ax] = dims[ax] == 1 ? 1 : options.kernel_size;
  }
  auto fits = [&] { return box[0] >= least[0] && box[1] >= least[1] && box[2] >= least[2]; };
  for (int ax = 0; ax < 3; ++ax) {
    Dims line = {1, 1, 1};
    line[ax] = box[ax];
    while (box[ax] >= least[ax] && !box_sampled(line)) line[ax] = --box[ax];
  }
  while (fits() && !box_sampled(box)) {
    for (int ax = 0; ax < 3; ++ax) {
      if (dims[ax] > 1) --box[ax];
    }
  }
  if (!fits()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "espirit: the fully sampled k-space centre (", std::max<int64_t>(box[0], 0), " x ",
        std::max<int64_t>(box[1], 0), " x ", std::max<int64_t>(box[2], 0), ") is smaller than the ", least[0], " x ",
        least[1], " x ", least[2], " kernel"));
  }
  return Espirit3dFromCalibration(stream, ExtractCentre3d(kspace, dims, coils, box), box, coils, dims, options);
}

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#include "kernels/reconstruction/mri/espirit.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/parallel.h"
#include "common/status.h"
#include "kernels/reconstruction/mri/cartesian_sense.h"
#include "kernels/reconstruction/mri/espirit_calibration.h"
#include "kernels/reconstruction/mri/espirit_pixels.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

using Complex = std::complex<float>;
using Complex64 = std::complex<double>;

using espirit_internal::CheckOptions;
using espirit_internal::HermitianEigen;
using espirit_internal::PrincipalCoilVector;

}  // namespace

std::vector<Complex> ExtractCentre(const Complex* kspace, int64_t nx, int64_t ny, int coils, int64_t cx, int64_t cy) {
  std::vector<Complex> out(static_cast<size_t>(cx * cy * coils));
  const int64_t u0 = nx / 2 - cx / 2, v0 = ny / 2 - cy / 2;
  for (int c = 0; c < coils; ++c) {
    for (int64_t v = 0; v < cy; ++v) {
      const Complex* row = kspace + (c * ny + v0 + v) * nx + u0;
      std::copy(row, row + cx, out.begin() + (c * cy + v) * cx);
    }
  }
  return out;
}

absl::StatusOr<EspiritMaps> EspiritFromCalibration(const std::vector<Complex>& calibration, int64_t cx, int64_t cy,
                                                   int coils, int64_t nx, int64_t ny, const EspiritOptions& options) {
  return EspiritFromCalibration(Stream::Cpu(), calibration, cx, cy, coils, nx, ny, options);
}

absl::StatusOr<EspiritMaps> EspiritFromCalibration(const Stream& stream, const std::vector<Complex>& calibration,
                                                   int64_t cx, int64_t cy, int coils, int64_t nx, int64_t ny,
                                                   const EspiritOptions& options) {
  TESSERA_RETURN_IF_ERROR(CheckOptions(options));
  const int k = options.kernel_size;
  if (coils < 1) return absl::InvalidArgumentError(absl::StrCat("espirit: ", coils, " coils"));
  if (cx < k || cy < k) {
    return absl::InvalidArgumentError(
        absl::StrCat("espirit: calibration region ", cx, " x ", cy, " is smaller than the ", k, " x ", k, " kernel"));
  }
  if (nx < cx || ny < cy) {
    return absl::InvalidArgumentError(
        absl::StrCat("espirit: image ", nx, " x ", ny, " is smaller than the calibration region ", cx, " x ", cy));
  }
  if (calibration.size() != static_cast<size_t>(cx * cy * coils)) {
    return absl::InvalidArgumentError(absl::StrCat("espirit: calibration data has ", calibration.size(),
                                                   " values, expected ", cx, " x ", cy, " x ", coils));
  }

  // 1. Calibration matrix A (rows: patch positions q; columns j = px + k (py + k c)), column-major.
  const int64_t qx = cx - k + 1, qy = cy - k + 1, rows = qx * qy;
  const int n = k * k * coils;
  std::vector<Complex64> a(static_cast<size_t>(rows) * n);
  for (int c = 0; c < coils; ++c) {
    for (int py = 0; py < k; ++py) {
      for (int px = 0; px < k; ++px) {
        Complex64* col = a.data() + static_cast<size_t>(px + k * (py + k * c)) * rows;
        for (int64_t y = 0; y < qy; ++y) {
          for (int64_t x = 0; x < qx; ++x) col[x + qx * y] = calibration[(c * cy + y + py) * cx + x + px];
        }
      }
    }
  }
  // M[j, j'] = sum_q A[q, j] conj(A[q, j']) (upper triangle, j <= j').
  std::vector<Complex64> m(static_cast<size_t>(n) * n, 0);
  ParallelForDynamic(n, 4, [&](int64_t begin, int64_t end, int) {
    for (int64_t j2 = begin; j2 < end; ++j2) {
      const Complex64* b = a.data() + j2 * rows;
      for (int64_t j1 = 0; j1 <= j2; ++j1) {
        const Complex64* col = a.data() + j1 * rows;
        Complex64 s = 0;
        for (int64_t q = 0; q < rows; ++q) s += col[q] * std::conj(b[q]);
        m[j1 + j2 * n] = s;
      }
    }
  });
  std::vector<double> values;
  TESSERA_RETURN_IF_ERROR(HermitianEigen(n, &m, &values));
  const double top = values[n - 1];
  if (!(top > 0)) return absl::InvalidArgumentError("espirit: the calibration region holds no signal");
  int kept = 0;
  while (kept < n && values[n - 1 - kept] / top > options.threshold) ++kept;

  // 2. P = V V^H (V: the kept eigenvectors, the last columns of m), then
  //    K_cc'(d) = sum_{p - p' = d} P[(p,c),(p',c')] for c <= c' on (2k - 1)^2 offsets.
  const Complex64* vecs = m.data() + static_cast<size_t>(n - kept) * n;
  std::vector<Complex64> proj(static_cast<size_t>(n) * n, 0);  // row-major
  ParallelForDynamic(n, 8, [&](int64_t begin, int64_t end, int) {
    for (int64_t j1 = begin; j1 < end; ++j1) {
      Complex64* row = proj.data() + j1 * n;
      for (int t = 0; t < kept; ++t) {
        const Complex64* v = vecs + static_cast<size_t>(t) * n;
        const Complex64 vj1 = v[j1];
        for (int j2 = 0; j2 < n; ++j2) row[j2] += vj1 * std::conj(v[j2]);
      }
    }
  });
  const int span = 2 * k - 1, kk = k * k;
  const int pairs = coils * (coils + 1) / 2;
  std::vector<Complex64> kern(static_cast<size_t>(pairs) * span * span, 0);
  for (int c1 = 0, l = 0; c1 < coils; ++c1) {
    for (int c2 = c1; c2 < coils; ++c2, ++l) {
      Complex64* kl = kern.data() + static_cast<size_t>(l) * span * span;
      for (int p1 = 0; p1 < kk; ++p1) {
        const Complex64* row = proj.data() + static_cast<size_t>(p1 + kk * c1) * n + kk * c2;
        for (int p2 = 0; p2 < kk; ++p2) {
          const int dx = p1 % k - p2 % k + k - 1, dy = p1 / k - p2 / k + k - 1;
          kl[dx + span * dy] += row[p2];
        }
      }
    }
  }

  // 3. The Gram images G_cc'(r) (scaled 1/k^2) by centred inverse FFTs at the image size.
  const int64_t pixels = nx * ny;
  std::vector<Complex> gram(static_cast<size_t>(pairs) * pixels, Complex(0, 0));
  const double inv_k2 = 1.0 / kk;
  for (int l = 0; l < pairs; ++l) {
    for (int dy = -(k - 1); dy <= k - 1; ++dy) {
      for (int dx = -(k - 1); dx <= k - 1; ++dx) {
        const int64_t u = ((dx + nx / 2) % nx + nx) % nx, v = ((dy + ny / 2) % ny + ny) % ny;
        gram[l * pixels + v * nx + u] +=
            Complex(kern[static_cast<size_t>(l) * span * span + (dx + k - 1) + span * (dy + k - 1)] * inv_k2);
      }
    }
  }
  TESSERA_RETURN_IF_ERROR(CenteredInverseFft2d(nx, ny, pairs, gram.data()));

  // 4. Per pixel: the top eigenpair, cropped and phased (on the stream).
  TESSERA_ASSIGN_OR_RETURN(std::vector<Complex64> reference, PrincipalCoilVector(calibration, cx * cy, coils));
  EspiritMaps out;
  out.nx = nx;
  out.ny = ny;
  out.coils = coils;
  out.kernels = kept;
  out.calibration_x = cx;
  out.calibration_y = cy;
  out.maps.assign(static_cast<size_t>(coils) * pixels, Complex(0, 0));
  out.eigenvalues.assign(pixels, 0.f);
  if (stream.backend() == Backend::kCpu) {
    TESSERA_RETURN_IF_ERROR(EspiritPixelMaps(stream, coils, pixels, gram.data(), reference.data(),
                                             options.power_iterations, options.crop, out.maps.data(),
                                             out.eigenvalues.data()));
    return out;
  }
  const size_t gram_bytes = gram.size() * sizeof(Complex), ref_bytes = reference.size() * sizeof(Complex64);
  const size_t maps_bytes = out.maps.size() * sizeof(Complex), ev_bytes = out.eigenvalues.size() * sizeof(float);
  TESSERA_ASSIGN_OR_RETURN(auto d_gram, Buffer::Allocate(MemoryKind::kDevice, gram_bytes, stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(auto d_ref, Buffer::Allocate(MemoryKind::kDevice, ref_bytes, stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(auto d_maps, Buffer::Allocate(MemoryKind::kDevice, maps_bytes, stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(auto d_ev, Buffer::Allocate(MemoryKind::kDevice, ev_bytes, stream.ordinal()));
  TESSERA_RETURN_IF_ERROR(CopyBytes(d_gram->data(), MemoryKind::kDevice, gram.data(), MemoryKind::kHost, gram_bytes, stream));
  TESSERA_RETURN_IF_ERROR(
      CopyBytes(d_ref->data(), MemoryKind::kDevice, reference.data(), MemoryKind::kHost, ref_bytes, stream));
  TESSERA_RETURN_IF_ERROR(EspiritPixelMaps(stream, coils, pixels, static_cast<const Complex*>(d_gram->data()),
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

absl::StatusOr<EspiritMaps> EspiritCartesian(const Complex* kspace, int64_t nx, int64_t ny, int coils,
                                             const EspiritOptions& options) {
  return EspiritCartesian(Stream::Cpu(), kspace, nx, ny, coils, options);
}

absl::StatusOr<EspiritMaps> EspiritCartesian(const Stream& stream, const Complex* kspace, int64_t nx, int64_t ny,
                                             int coils, const EspiritOptions& options) {
  TESSERA_RETURN_IF_ERROR(CheckOptions(options));
  if (nx < 1 || ny < 1 || coils < 1) {
    return absl::InvalidArgumentError(absl::StrCat("espirit: k-space ", nx, " x ", ny, " x ", coils));
  }
  if (options.calibration_size < options.kernel_size) {
    return absl::InvalidArgumentError(absl::StrCat("espirit: calibration size ", options.calibration_size,
                                                   " is smaller than the kernel (", options.kernel_size, ")"));
  }
  const int64_t pixels = nx * ny;
  auto sampled = [&](int64_t u, int64_t v) {
    for (int c = 0; c < coils; ++c) {
      if (kspace[c * pixels + v * nx + u] != Complex(0, 0)) return true;
    }
    return false;
  };
  auto box_sampled = [&](int64_t bx, int64_t by) {
    const int64_t u0 = nx / 2 - bx / 2, v0 = ny / 2 - by / 2;
    for (int64_t v = v0; v < v0 + by; ++v) {
      for (int64_t u = u0; u < u0 + bx; ++u) {
        if (!sampled(u, v)) return false;
      }
    }
    return true;
  };
  // Largest centred box <= calibration_size per axis: first along the centre lines, then shrunk together.
  int64_t bx = std::min<int64_t>(options.calibration_size, nx), by = std::min<int64_t>(options.calibration_size, ny);
  while (bx >= options.kernel_size && !box_sampled(bx, 1)) --bx;
  while (by >= options.kernel_size && !box_sampled(1, by)) --by;
  while (bx >= options.kernel_size && by >= options.kernel_size && !box_sampled(bx, by)) {
    --bx;
    --by;
  }
  if (bx < options.kernel_size || by < options.kernel_size) {
    return absl::InvalidArgumentError(absl::StrCat("espirit: the fully sampled k-space centre (", std::max<int64_t>(bx, 0),
                                                   " x ", std::max<int64_t>(by, 0), ") is smaller than the ",
                                                   options.kernel_size, " x ", options.kernel_size, " kernel"));
  }
  return EspiritFromCalibration(stream, ExtractCentre(kspace, nx, ny, coils, bx, by), bx, by, coils, nx, ny, options);
}

}  // namespace mri
}  // namespace recon
}  // namespace tessera

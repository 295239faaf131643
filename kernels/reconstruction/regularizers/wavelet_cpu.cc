// CPU reference of the wavelet passes: lines in parallel, each filtered
// through a local copy so the in-place update reads the old values.
#include <cmath>
#include <vector>

#include "common/parallel.h"
#include "kernels/reconstruction/regularizers/wavelet_passes.h"

namespace tessera {
namespace recon {
namespace regularizers {
namespace cpu {
namespace {

using Complex = std::complex<float>;

int64_t Wrap(int64_t i, int64_t n) { return i >= n ? i - n : i; }

}  // namespace

void ShiftCopy(const Dims3& dims, const int64_t shift[3], bool unshift, const Complex* src, Complex* dst) {
  const int64_t nx = dims.n[0], ny = dims.n[1], nz = dims.n[2];
  ParallelFor(ny * nz, [&](int64_t begin, int64_t end, int) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t y = row % ny, z = row / ny;
      const int64_t ys = Wrap(y + shift[1], ny), zs = Wrap(z + shift[2], nz);
      const int64_t shifted_row = (ys + ny * zs) * nx;
      for (int64_t x = 0; x < nx; ++x) {
        const int64_t i = row * nx + x, j = shifted_row + Wrap(x + shift[0], nx);
        if (unshift) {
          dst[j] = src[i];
        } else {
          dst[i] = src[j];
        }
      }
    }
  }, 16);
}

void FilterAxis(const Dims3& dims, const Dims3& block, int axis, const WaveletTaps& taps, bool inverse,
                Complex* data) {
  const int64_t stride[3] = {1, dims.n[0], dims.n[0] * dims.n[1]};
  const int b = axis == 0 ? 1 : 0, c = axis == 2 ? 1 : 2;  // the other two axes
  const int64_t m = block.n[axis], half = m / 2;
  ParallelFor(block.n[b] * block.n[c], [&](int64_t begin, int64_t end, int) {
    std::vector<Complex> line(m);
    for (int64_t q = begin; q < end; ++q) {
      const int64_t base = (q % block.n[b]) * stride[b] + (q / block.n[b]) * stride[c];
      Complex* p = data + base;
      const int64_t s = stride[axis];
      for (int64_t i = 0; i < m; ++i) line[i] = p[i * s];
      if (!inverse) {
        for (int64_t k = 0; k < half; ++k) {
          Complex lo = 0, hi = 0;
          for (int j = 0; j < taps.taps; ++j) {
            const Complex v = line[(2 * k + j) % m];
            lo += taps.h[j] * v;
            hi += taps.g[j] * v;
          }
          p[k * s] = lo;
          p[(half + k) * s] = hi;
        }
      } else {
        // x[i] = sum_k a[k] h[i - 2k] + d[k] g[i - 2k] (indices mod m): the
        // taps j = i - 2k (mod m) of the same parity as i.
        for (int64_t i = 0; i < m; ++i) {
          Complex sum = 0;
          for (int j = static_cast<int>(i % 2); j < taps.taps; j += 2) {
            const int64_t k = ((i - j) % m + m) % m / 2;
            sum += taps.h[j] * line[k] + taps.g[j] * line[half + k];
          }
          p[i * s] = sum;
        }
      }
    }
  }, 8);
}

void SoftThresholdOutside(const Dims3& dims, const Dims3& coarse, float threshold, Complex* data) {
  const int64_t nx = dims.n[0], ny = dims.n[1], nz = dims.n[2];
  ParallelFor(ny * nz, [&](int64_t begin, int64_t end, int) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t y = row % ny, z = row / ny;
      const bool row_coarse = y < coarse.n[1] && z < coarse.n[2];
      for (int64_t x = 0; x < nx; ++x) {
        if (row_coarse && x < coarse.n[0]) continue;
        Complex& v = data[row * nx + x];
        const float mag = std::abs(v);
        v = mag > threshold ? v * ((mag - threshold) / mag) : Complex(0, 0);
      }
    }
  }, 16);
}

}  // namespace cpu
}  // namespace regularizers
}  // namespace recon
}  // namespace tessera

// CPU reference of the fused LNCC loss and gradient (lncc.h): five box-sum
// volumes from separable running sums (double accumulators), the per-voxel
// algebra, then three more box filters for the gradient, reusing the volumes.
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/registration/lncc.h"
#include "kernels/registration/lncc_math.h"
#include "kernels/registration/parallel.h"
#include "kernels/registration/storage16.h"

namespace tessera {
namespace registration {
namespace cpu {
namespace {

// Running window sums down the rows of a [len][width] block `src` (width
// fastest): row l of the result is the sum of rows [l - r, l + r] (rows
// outside [0, len) are zero), handed to write_row(l, sums).
template <typename WriteRow>
void SweepRows(const std::vector<double>& src, int64_t len, int64_t width, int r, std::vector<double>& sums,
               WriteRow write_row) {
  sums.assign(width, 0.0);
  for (int64_t l = 0; l <= r && l < len; ++l) {
    for (int64_t i = 0; i < width; ++i) sums[i] += src[l * width + i];
  }
  for (int64_t l = 0; l < len; ++l) {
    write_row(l, sums);
    const int64_t add = l + r + 1, sub = l - r;
    if (add < len) {
      for (int64_t i = 0; i < width; ++i) sums[i] += src[add * width + i];
    }
    if (sub >= 0) {
      for (int64_t i = 0; i < width; ++i) sums[i] -= src[sub * width + i];
    }
  }
}

// In-place box sum with a (2r+1)^3 window and zero padding: one running-sum
// pass per axis.
template <typename T>
void BoxSumInPlace(T* vol, const Dims3& d, int r) {
  const int64_t nx = d.nx, ny = d.ny, nz = d.nz;
  // x: each row is a [nx][1] block.
  ParallelFor(nz, [&](int64_t k0, int64_t k1, int) {
    std::vector<double> line(nx), sums;
    for (int64_t k = k0; k < k1; ++k) {
      for (int64_t j = 0; j < ny; ++j) {
        T* row = vol + d.index(0, j, k);
        for (int64_t i = 0; i < nx; ++i) line[i] = row[i];
        SweepRows(line, nx, 1, r, sums, [&](int64_t i, const std::vector<double>& s) { row[i] = static_cast<T>(s[0]); });
      }
    }
  });
  // y: each z-slice is a [ny][nx] block.
  ParallelFor(nz, [&](int64_t k0, int64_t k1, int) {
    std::vector<double> plane(nx * ny), sums;
    for (int64_t k = k0; k < k1; ++k) {
      T* slice = vol + d.index(0, 0, k);
      for (int64_t v = 0; v < nx * ny; ++v) plane[v] = slice[v];
      SweepRows(plane, ny, nx, r, sums, [&](int64_t j, const std::vector<double>& s) {
        for (int64_t i = 0; i < nx; ++i) slice[j * nx + i] = static_cast<T>(s[i]);
      });
    }
  });
  // z: each y-row plane (fixed j) is a [nz][nx] block.
  ParallelFor(ny, [&](int64_t j0, int64_t j1, int) {
    std::vector<double> plane(nx * nz), sums;
    for (int64_t j = j0; j < j1; ++j) {
      for (int64_t k = 0; k < nz; ++k) {
        const T* row = vol + d.index(0, j, k);
        for (int64_t i = 0; i < nx; ++i) plane[k * nx + i] = row[i];
      }
      SweepRows(plane, nz, nx, r, sums, [&](int64_t k, const std::vector<double>& s) {
        T* row = vol + d.index(0, j, k);
        for (int64_t i = 0; i < nx; ++i) row[i] = static_cast<T>(s[i]);
      });
    }
  });
}

// A coefficient as the CUDA kernel stores it: unchanged, or rounded through
// float to CoefT (the mixed-precision stage's bf16 volumes).
template <typename CoefT>
double StoredCoefficient(double v) {
  if constexpr (std::is_same<CoefT, float>::value || std::is_same<CoefT, double>::value) {
    return v;
  } else {
    return ToFloat(FromFloat<CoefT>(static_cast<float>(v)));
  }
}

template <typename T, typename CoefT>
double LnccImpl(const T* fixed, const T* warped, Dims3 dims, const LnccOptions& options, T* grad_warped) {
  const int64_t n_vox = dims.size();
  const int r = options.window / 2;
  const double inv_n = 1.0 / (static_cast<double>(options.window) * options.window * options.window);
  // The five intermediate volumes: box sums of F, W, F^2, W^2, F*W.
  std::vector<T> s_f(fixed, fixed + n_vox), s_w(warped, warped + n_vox), s_ff(n_vox), s_ww(n_vox), s_fw(n_vox);
  ParallelFor(n_vox, [&](int64_t v0, int64_t v1, int) {
    for (int64_t v = v0; v < v1; ++v) {
      s_ff[v] = fixed[v] * fixed[v];
      s_ww[v] = warped[v] * warped[v];
      s_fw[v] = fixed[v] * warped[v];
    }
  });
  for (std::vector<T>* vol : {&s_f, &s_w, &s_ff, &s_ww, &s_fw}) BoxSumInPlace(vol->data(), dims, r);

  // Per voxel: cc for the loss and, for the gradient, a -> s_fw, b -> s_ww,
  // c -> s_w (each voxel's sums are read before they are overwritten).
  std::vector<double> partial(ParallelChunks(n_vox), 0.0);
  ParallelFor(n_vox, [&](int64_t v0, int64_t v1, int chunk) {
    double sum = 0.0;
    for (int64_t v = v0; v < v1; ++v) {
      const LnccTerms t = ComputeLnccTerms(s_f[v], s_w[v], s_ff[v], s_ww[v], s_fw[v], inv_n, options.eps);
      sum += t.cc;
      s_fw[v] = static_cast<T>(StoredCoefficient<CoefT>(t.a));
      s_ww[v] = static_cast<T>(StoredCoefficient<CoefT>(t.b));
      s_w[v] = static_cast<T>(StoredCoefficient<CoefT>(t.c));
    }
    partial[chunk] = sum;
  });
  double total = 0.0;
  for (double p : partial) total += p;
  const double loss = -total / static_cast<double>(n_vox);

  if (grad_warped != nullptr) {
    for (std::vector<T>* vol : {&s_fw, &s_ww, &s_w}) BoxSumInPlace(vol->data(), dims, r);
    const double scale = -1.0 / static_cast<double>(n_vox);
    ParallelFor(n_vox, [&](int64_t v0, int64_t v1, int) {
      for (int64_t v = v0; v < v1; ++v) {
        const double g = static_cast<double>(fixed[v]) * s_fw[v] + 2.0 * static_cast<double>(warped[v]) * s_ww[v] +
                         static_cast<double>(s_w[v]);
        grad_warped[v] = static_cast<T>(scale * g);
      }
    });
  }
  return loss;
}

}  // namespace

template <typename T>
double Lncc(const T* fixed, const T* warped, Dims3 dims, const LnccOptions& options, T* grad_warped) {
  return LnccImpl<T, T>(fixed, warped, dims, options, grad_warped);
}

double LnccHalfFixed(const Half* fixed, const float* warped, Dims3 dims, const LnccOptions& options,
                     float* grad_warped) {
  std::vector<float> f(static_cast<size_t>(dims.size()));
  ParallelFor(dims.size(), [&](int64_t b, int64_t e, int) {
    for (int64_t v = b; v < e; ++v) f[v] = ToFloat(fixed[v]);
  });
  return LnccImpl<float, BFloat16>(f.data(), warped, dims, options, grad_warped);
}

template double Lncc<float>(const float*, const float*, Dims3, const LnccOptions&, float*);
template double Lncc<double>(const double*, const double*, Dims3, const LnccOptions&, double*);

}  // namespace cpu
}  // namespace registration
}  // namespace tessera

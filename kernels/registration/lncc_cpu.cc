// CPU reference of the fused LNCC loss and gradient (lncc.h): five box-sum
// volumes from separable window sums (double accumulators), the per-voxel
// algebra, then three more box filters for the gradient, reusing the volumes.
//
// Fixed blocking (issue 39): every value depends only on the voxels it sums,
// never on where the array starts, so a z-slab of a volume (the sharded
// LNCC, kernels/parallel/sharded_lncc.cc) computes the same bits on its own
// slices as the whole volume does. x and y use running sums along whole rows
// (every slab holds whole rows); z sums each window directly in ascending z
// (a running sum along z would depend on the slice it started from). The
// loss is one sum of cc per z-slice (voxels in index order), then the slices'
// sums in slice order (LnccSlab hands out the per-slice sums).
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "common/status.h"

#include "kernels/registration/cpu_clones.h"
#include "kernels/registration/lncc.h"
#include "kernels/registration/lncc_math.h"
#include "kernels/registration/parallel.h"
#include "kernels/registration/slice_sums.h"
#include "kernels/registration/storage16.h"
#include "kernels/registration/workspace.h"

namespace tessera {
namespace registration {
namespace cpu {
namespace {

// The box sum's row loops are cloned per ISA level (AVX-512, AVX2, baseline)
// and the clone is picked at load time (issue 38: the baseline build ran
// them two doubles per instruction; LNCC was half of the macaque case's CPU
// time). Every clone does the same double operations per element in the same
// order (element-wise, no FMA: -ffp-contract=off), so all give the same bits.

// One row's running sum along x from its copy `line` (add the entering
// value, subtract the leaving one, in that order).
template <typename T>
__attribute__((always_inline)) inline void BoxXRow(T* row, const double* line, int64_t nx, int r) {
  double sum = 0.0;
  for (int64_t l = 0; l <= r && l < nx; ++l) sum += line[l];
  for (int64_t l = 0; l < nx; ++l) {
    row[l] = static_cast<T>(sum);
    const int64_t add = l + r + 1, sub = l - r;
    if (add < nx) sum += line[add];
    if (sub >= 0) sum -= line[sub];
  }
}

// x on one slice, four rows at a time (`line`: 4 nx doubles): each row's sum
// is one chain of dependent adds, so four independent chains in one loop
// keep the adder busy (issue 38: the one-row loop waited on its chain, 10.7 %
// of the macaque run). Every row gets BoxXRow's operations in its order.
template <typename T>
__attribute__((always_inline)) inline void BoxXSliceBody(T* slice, int64_t nx, int64_t ny, int r, double* line) {
  int64_t j = 0;
  for (; j + 4 <= ny; j += 4) {
    T* row0 = slice + j * nx;
    T *row1 = row0 + nx, *row2 = row1 + nx, *row3 = row2 + nx;
    double *l0 = line, *l1 = line + nx, *l2 = line + 2 * nx, *l3 = line + 3 * nx;
    for (int64_t i = 0; i < 4 * nx; ++i) line[i] = row0[i];
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    for (int64_t l = 0; l <= r && l < nx; ++l) {
      s0 += l0[l];
      s1 += l1[l];
      s2 += l2[l];
      s3 += l3[l];
    }
    for (int64_t l = 0; l < nx; ++l) {
      row0[l] = static_cast<T>(s0);
      row1[l] = static_cast<T>(s1);
      row2[l] = static_cast<T>(s2);
      row3[l] = static_cast<T>(s3);
      const int64_t add = l + r + 1, sub = l - r;
      if (add < nx) {
        s0 += l0[add];
        s1 += l1[add];
        s2 += l2[add];
        s3 += l3[add];
      }
      if (sub >= 0) {
        s0 -= l0[sub];
        s1 -= l1[sub];
        s2 -= l2[sub];
        s3 -= l3[sub];
      }
    }
  }
  for (; j < ny; ++j) {
    T* row = slice + j * nx;
    for (int64_t i = 0; i < nx; ++i) line[i] = row[i];
    BoxXRow(row, line, nx, r);
  }
}

// y on one slice: running sums down the slice's rows, all columns at once
// (the same add-then-subtract order per column).
template <typename T>
__attribute__((always_inline)) inline void BoxYSliceBody(T* slice, int64_t nx, int64_t ny, int r, double* plane,
                                                         double* sums) {
  for (int64_t v = 0; v < nx * ny; ++v) plane[v] = slice[v];
  for (int64_t i = 0; i < nx; ++i) sums[i] = 0.0;
  for (int64_t l = 0; l <= r && l < ny; ++l) {
    for (int64_t i = 0; i < nx; ++i) sums[i] += plane[l * nx + i];
  }
  for (int64_t l = 0; l < ny; ++l) {
    for (int64_t i = 0; i < nx; ++i) slice[l * nx + i] = static_cast<T>(sums[i]);
    const int64_t add = l + r + 1, sub = l - r;
    if (add < ny) {
      for (int64_t i = 0; i < nx; ++i) sums[i] += plane[add * nx + i];
    }
    if (sub >= 0) {
      for (int64_t i = 0; i < nx; ++i) sums[i] -= plane[sub * nx + i];
    }
  }
}

// z on one y-row plane (fixed j): slices [in_lo, in_hi) copied to `plane`,
// then output slice k's window summed directly, slices ascending.
template <typename T>
__attribute__((always_inline)) inline void BoxZPlaneBody(T* vol, int64_t nx, int64_t slice, int64_t nz, int r,
                                                         int64_t in_lo, int64_t in_hi, int64_t z_lo, int64_t z_hi,
                                                         double* plane, double* sums) {
  for (int64_t k = in_lo; k < in_hi; ++k) {
    const T* row = vol + k * slice;
    double* dst = plane + (k - in_lo) * nx;
    for (int64_t i = 0; i < nx; ++i) dst[i] = row[i];
  }
  for (int64_t k = z_lo; k < z_hi; ++k) {
    for (int64_t i = 0; i < nx; ++i) sums[i] = 0.0;
    for (int64_t l = std::max<int64_t>(0, k - r); l <= std::min<int64_t>(nz - 1, k + r); ++l) {
      const double* src = plane + (l - in_lo) * nx;
      for (int64_t i = 0; i < nx; ++i) sums[i] += src[i];
    }
    T* row = vol + k * slice;
    for (int64_t i = 0; i < nx; ++i) row[i] = static_cast<T>(sums[i]);
  }
}

#define TESSERA_LNCC_BOX_PASSES(T)                                                                                \
  TESSERA_REGISTRATION_CLONES void BoxXSlice(T* slice, int64_t nx, int64_t ny, int r, double* line) {             \
    BoxXSliceBody(slice, nx, ny, r, line);                                                                        \
  }                                                                                                               \
  TESSERA_REGISTRATION_CLONES void BoxYSlice(T* slice, int64_t nx, int64_t ny, int r, double* plane,              \
                                             double* sums) {                                                      \
    BoxYSliceBody(slice, nx, ny, r, plane, sums);                                                                 \
  }                                                                                                               \
  TESSERA_REGISTRATION_CLONES void BoxZPlane(T* vol, int64_t nx, int64_t slice, int64_t nz, int r, int64_t in_lo, \
                                             int64_t in_hi, int64_t z_lo, int64_t z_hi, double* plane,            \
                                             double* sums) {                                                      \
    BoxZPlaneBody(vol, nx, slice, nz, r, in_lo, in_hi, z_lo, z_hi, plane, sums);                                  \
  }
TESSERA_LNCC_BOX_PASSES(float)
TESSERA_LNCC_BOX_PASSES(double)
#undef TESSERA_LNCC_BOX_PASSES

// In-place box sum with a (2r+1)^3 window and zero padding outside the
// array. x and y (running sums) on the slices [xy_lo, xy_hi); z on the
// output slices [z_lo, z_hi), each the direct sum of its window's slices in
// ascending order (reading slices within r of them, which must be among the
// x/y-filtered ones to be meaningful); other slices keep their values.
template <typename T>
void BoxSumInPlace(T* vol, const Dims3& d, int r, int64_t xy_lo, int64_t xy_hi, int64_t z_lo, int64_t z_hi) {
  const int64_t nx = d.nx, ny = d.ny, nz = d.nz;
  ParallelFor(xy_hi - xy_lo, [&](int64_t k0, int64_t k1, int) {
    std::vector<double> line(4 * nx);
    for (int64_t k = xy_lo + k0; k < xy_lo + k1; ++k) BoxXSlice(vol + d.index(0, 0, k), nx, ny, r, line.data());
  });
  ParallelFor(xy_hi - xy_lo, [&](int64_t k0, int64_t k1, int) {
    std::vector<double> plane(nx * ny), sums(nx);
    for (int64_t k = xy_lo + k0; k < xy_lo + k1; ++k) {
      BoxYSlice(vol + d.index(0, 0, k), nx, ny, r, plane.data(), sums.data());
    }
  });
  if (z_hi <= z_lo) return;
  const int64_t in_lo = std::max<int64_t>(0, z_lo - r), in_hi = std::min<int64_t>(nz, z_hi + r);
  ParallelFor(ny, [&](int64_t j0, int64_t j1, int) {
    std::vector<double> plane(nx * (in_hi - in_lo)), sums(nx);
    for (int64_t j = j0; j < j1; ++j) {
      BoxZPlane(vol + d.index(0, j, 0), nx, nx * ny, nz, r, in_lo, in_hi, z_lo, z_hi, plane.data(), sums.data());
    }
  });
}

// A coefficient as the CUDA kernel stores it: unchanged, or rounded through
// float to CoefT (the mixed-precision stage's bf16 volumes; FromFloat is a
// select, so LnccTermsRun's loop vectorises with it).
template <typename CoefT>
__attribute__((always_inline)) inline double StoredCoefficient(double v) {
  if constexpr (std::is_same<CoefT, float>::value || std::is_same<CoefT, double>::value) {
    return v;
  } else {
    return ToFloat(FromFloat<CoefT>(static_cast<float>(v)));
  }
}

// The terms of n consecutive voxels without a mask: cc into `cc`, and a, b,
// c (as stored: StoredCoefficient) over fw, ww, w. Cloned per ISA level and
// vectorised (issue 38: the per-voxel loop with the slice's running sum in
// it was scalar, 8.9 % of the macaque run); each voxel gets
// ComputeLnccTerms' double operations in its order (no FMA), so the same
// bits. The caller sums cc in voxel order.
template <typename T, typename CoefT>
__attribute__((always_inline)) inline void LnccTermsRunBody(const T* __restrict__ f, T* __restrict__ w,
                                                            const T* __restrict__ ff, T* __restrict__ ww,
                                                            T* __restrict__ fw, int64_t n, double inv_n, double eps,
                                                            double* __restrict__ cc) {
  for (int64_t i = 0; i < n; ++i) {
    const LnccTerms t = ComputeLnccTerms(f[i], w[i], ff[i], ww[i], fw[i], inv_n, eps);
    cc[i] = t.cc;
    fw[i] = static_cast<T>(StoredCoefficient<CoefT>(t.a));
    ww[i] = static_cast<T>(StoredCoefficient<CoefT>(t.b));
    w[i] = static_cast<T>(StoredCoefficient<CoefT>(t.c));
  }
}

#define TESSERA_LNCC_TERMS_RUN(T, CoefT)                                                                       \
  TESSERA_REGISTRATION_CLONES void LnccTermsRun(const T* f, T* w, const T* ff, T* ww, T* fw, int64_t n,          \
                                                double inv_n, double eps, double* cc, const CoefT*) {            \
    LnccTermsRunBody<T, CoefT>(f, w, ff, ww, fw, n, inv_n, eps, cc);                                             \
  }
TESSERA_LNCC_TERMS_RUN(float, float)
TESSERA_LNCC_TERMS_RUN(float, BFloat16)
TESSERA_LNCC_TERMS_RUN(double, double)
#undef TESSERA_LNCC_TERMS_RUN

// The fixed image's value as T (Half: its exact float, as LnccHalfFixed's
// float copy of it held).
inline float FixedValue(float v) { return v; }
inline double FixedValue(double v) { return v; }
inline float FixedValue(Half v) { return ToFloat(v); }

// The five intermediate volumes: box sums of F, W, F^2, W^2, F*W (a, b, c
// later overwrite fw, ww, w).
template <typename T>
struct BoxVolumes {
  T *f, *w, *ff, *ww, *fw;
};

// The slab form (lncc.h LnccSlab); the whole volume is own_lo = 0, own_hi =
// nz. fixed_sums_ready (whole volume only): s.f and s.ff already hold this
// fixed image's box sums (LnccScratch), which nothing below overwrites.
template <typename FT, typename T, typename CoefT>
void LnccSlabImpl(const FT* fixed, const T* warped, Dims3 dims, int64_t own_lo, int64_t own_hi,
                  const LnccOptions& options, int64_t total_voxels, double* slice_cc, T* grad_warped, VoxelMask mask,
                  BoxVolumes<T> s, bool fixed_sums_ready) {
  const int64_t n_vox = dims.size(), slice = dims.nx * dims.ny, nz = dims.nz;
  const int r = options.window / 2;
  const double inv_n = 1.0 / (static_cast<double>(options.window) * options.window * options.window);
  // Slices whose terms are needed (own, and with the gradient the own ones'
  // windows), and the slices their box sums read.
  const int64_t term_lo = grad_warped != nullptr ? std::max<int64_t>(0, own_lo - r) : own_lo;
  const int64_t term_hi = grad_warped != nullptr ? std::min<int64_t>(nz, own_hi + r) : own_hi;
  const int64_t sum_lo = std::max<int64_t>(0, term_lo - r), sum_hi = std::min<int64_t>(nz, term_hi + r);
  // Every voxel of every volume is written here before it is read (the
  // scratch may hold anything).
  ParallelFor(n_vox, [&](int64_t v0, int64_t v1, int) {
    for (int64_t v = v0; v < v1; ++v) {
      const T f = FixedValue(fixed[v]), w = warped[v];
      if (!fixed_sums_ready) {
        s.f[v] = f;
        s.ff[v] = f * f;
      }
      s.w[v] = w;
      s.ww[v] = w * w;
      s.fw[v] = f * w;
    }
  });
  for (T* vol : {s.f, s.w, s.ff, s.ww, s.fw}) {
    if (fixed_sums_ready && (vol == s.f || vol == s.ff)) continue;
    BoxSumInPlace(vol, dims, r, sum_lo, sum_hi, term_lo, term_hi);
  }

  // Per voxel: cc for the loss and, for the gradient, a -> fw, b -> ww,
  // c -> w (each voxel's sums are read before they are overwritten).
  ParallelFor(term_hi - term_lo, [&](int64_t k0, int64_t k1, int) {
    std::vector<double> cc(mask.mask == nullptr ? slice : 0);
    for (int64_t k = term_lo + k0; k < term_lo + k1; ++k) {
      double sum = 0.0;
      if (mask.mask == nullptr) {
        const int64_t v0 = k * slice;
        LnccTermsRun(s.f + v0, s.w + v0, s.ff + v0, s.ww + v0, s.fw + v0, slice, inv_n, options.eps, cc.data(),
                     static_cast<const CoefT*>(nullptr));
        for (int64_t i = 0; i < slice; ++i) sum += cc[i];
        if (k >= own_lo && k < own_hi) slice_cc[k - own_lo] = sum;
        continue;
      }
      for (int64_t v = k * slice; v < (k + 1) * slice; ++v) {
        if (!mask.has(v)) {  // a centre outside the mask: no term (issue 34)
          s.fw[v] = s.ww[v] = s.w[v] = T(0);
          continue;
        }
        const LnccTerms t = ComputeLnccTerms(s.f[v], s.w[v], s.ff[v], s.ww[v], s.fw[v], inv_n, options.eps);
        sum += t.cc;
        s.fw[v] = static_cast<T>(StoredCoefficient<CoefT>(t.a));
        s.ww[v] = static_cast<T>(StoredCoefficient<CoefT>(t.b));
        s.w[v] = static_cast<T>(StoredCoefficient<CoefT>(t.c));
      }
      if (k >= own_lo && k < own_hi) slice_cc[k - own_lo] = sum;
    }
  });
  if (grad_warped == nullptr) return;

  for (T* vol : {s.fw, s.ww, s.w}) BoxSumInPlace(vol, dims, r, term_lo, term_hi, own_lo, own_hi);
  const double scale = -1.0 / static_cast<double>(total_voxels);
  ParallelFor(own_hi - own_lo, [&](int64_t k0, int64_t k1, int) {
    for (int64_t v = (own_lo + k0) * slice; v < (own_lo + k1) * slice; ++v) {
      const double g = static_cast<double>(FixedValue(fixed[v])) * s.fw[v] +
                       2.0 * static_cast<double>(warped[v]) * s.ww[v] + static_cast<double>(s.w[v]);
      grad_warped[v] = static_cast<T>(scale * g);
    }
  });
}

// Five fresh volumes for one call.
template <typename T>
struct OwnedVolumes {
  explicit OwnedVolumes(int64_t n) : data(static_cast<size_t>(5 * n)) {}
  BoxVolumes<T> volumes(int64_t n) {
    T* p = data.data();
    return {p, p + n, p + 2 * n, p + 3 * n, p + 4 * n};
  }
  std::vector<T> data;
};

template <typename FT, typename T, typename CoefT>
double LnccImpl(const FT* fixed, const T* warped, Dims3 dims, const LnccOptions& options, T* grad_warped,
                VoxelMask mask, BoxVolumes<T> volumes, bool fixed_sums_ready) {
  const int64_t n = mask.mask != nullptr ? mask.count : dims.size();
  std::vector<double> slice_cc(dims.nz, 0.0);
  LnccSlabImpl<FT, T, CoefT>(fixed, warped, dims, 0, dims.nz, options, n, slice_cc.data(), grad_warped, mask, volumes,
                             fixed_sums_ready);
  return -SumOfSlices(slice_cc.data(), dims.nz) / static_cast<double>(n);
}

// LnccScratch's memory as the five volumes (each 256-byte aligned: Bytes).
BoxVolumes<float> CarveVolumes(void* base, int64_t n) {
  ScratchCarver carve(base);
  BoxVolumes<float> v;
  for (float** p : {&v.f, &v.w, &v.ff, &v.ww, &v.fw}) *p = carve.Take<float>(static_cast<size_t>(n));
  return v;
}

}  // namespace

template <typename T>
double Lncc(const T* fixed, const T* warped, Dims3 dims, const LnccOptions& options, T* grad_warped,
            VoxelMask mask) {
  OwnedVolumes<T> s(dims.size());
  return LnccImpl<T, T, T>(fixed, warped, dims, options, grad_warped, mask, s.volumes(dims.size()), false);
}

void LnccSlab(const float* fixed, const float* warped, Dims3 dims, int64_t own_lo, int64_t own_hi,
              const LnccOptions& options, int64_t total_voxels, double* slice_cc, float* grad_warped) {
  OwnedVolumes<float> s(dims.size());
  LnccSlabImpl<float, float, float>(fixed, warped, dims, own_lo, own_hi, options, total_voxels, slice_cc,
                                    grad_warped, {}, s.volumes(dims.size()), false);
}

double LnccHalfFixed(const Half* fixed, const float* warped, Dims3 dims, const LnccOptions& options,
                     float* grad_warped, VoxelMask mask) {
  OwnedVolumes<float> s(dims.size());
  return LnccImpl<Half, float, BFloat16>(fixed, warped, dims, options, grad_warped, mask, s.volumes(dims.size()),
                                         false);
}

int64_t LnccScratch::Bytes(Dims3 dims) {
  return 5 * static_cast<int64_t>(ScratchCarver::Align(static_cast<size_t>(dims.size()) * sizeof(float)));
}

absl::StatusOr<void*> LnccScratch::Prepare(const void* fixed, const float* warped, Dims3 dims,
                                           const LnccOptions& options, VoxelMask mask) {
  TESSERA_RETURN_IF_ERROR(ValidateLnccArgs(static_cast<const float*>(fixed), warped, dims, options));
  if (mask.mask != nullptr && mask.count <= 0) return absl::InvalidArgumentError("lncc: the mask holds no voxel");
  const size_t before = memory_.capacity();
  TESSERA_ASSIGN_OR_RETURN(void* base, memory_.Reserve(Stream::Cpu(), static_cast<size_t>(Bytes(dims))));
  // The kept sums belong to one fixed image, size and window, in this
  // memory (a Reserve that grows allocates anew).
  if (memory_.capacity() != before || fixed != fixed_ || dims != dims_ || options.window != window_) {
    fixed_ready_ = false;
  }
  return base;
}

void LnccScratch::Kept(const void* fixed, Dims3 dims, const LnccOptions& options) {
  fixed_ = fixed;
  dims_ = dims;
  window_ = options.window;
  fixed_ready_ = true;
}

template <typename FixedT, typename CoefT>
absl::StatusOr<double> LnccScratch::Run(const FixedT* fixed, const float* warped, Dims3 dims,
                                        const LnccOptions& options, float* grad_warped, VoxelMask mask) {
  TESSERA_ASSIGN_OR_RETURN(void* base, Prepare(fixed, warped, dims, options, mask));
  const BoxVolumes<float> v = CarveVolumes(base, dims.size());
  const double loss =
      LnccImpl<FixedT, float, CoefT>(fixed, warped, dims, options, grad_warped, mask, v, fixed_ready_);
  Kept(fixed, dims, options);
  return loss;
}

absl::StatusOr<double> LnccScratch::Lncc(const float* fixed, const float* warped, Dims3 dims,
                                         const LnccOptions& options, float* grad_warped, VoxelMask mask) {
  return Run<float, float>(fixed, warped, dims, options, grad_warped, mask);
}

absl::StatusOr<double> LnccScratch::LnccHalfFixed(const Half* fixed, const float* warped, Dims3 dims,
                                                  const LnccOptions& options, float* grad_warped, VoxelMask mask) {
  return Run<Half, BFloat16>(fixed, warped, dims, options, grad_warped, mask);
}

void LnccScratch::Release() {
  memory_.Release();
  fixed_ready_ = false;
}

template double Lncc<float>(const float*, const float*, Dims3, const LnccOptions&, float*, VoxelMask);
template double Lncc<double>(const double*, const double*, Dims3, const LnccOptions&, double*, VoxelMask);

}  // namespace cpu
}  // namespace registration
}  // namespace tessera

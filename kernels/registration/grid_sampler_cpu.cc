// CPU reference of the composite grid sampler: one output voxel at a time,
// threaded over z-slabs of the output grid.
#include <array>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/registration/grid_sampler.h"
#include "kernels/registration/grid_sampler_cpu_path.h"
#include "kernels/registration/grid_sampler_cpu_rows.h"
#include "kernels/registration/voxel_jitter.h"
#include "kernels/registration/parallel.h"
#include "kernels/registration/sampler_math.h"
#include "kernels/registration/storage16.h"

namespace tessera {
namespace registration {
namespace cpu {
namespace {

// Continuous input position after padding: clamped for border padding, with
// d(position)/d(ix) per axis (1, or 0 where the clamp is active).
template <typename T>
struct PaddedPosition {
  T ix[3];
  T dclamp[3];
  bool outside;  // zeros padding and no corner inside: value and gradient are 0
};

template <typename T>
__attribute__((always_inline)) inline PaddedPosition<T> ApplyPadding(const SamplerGeometry<T>& g, const T ix[3]) {
  PaddedPosition<T> pos;
  const int64_t m[3] = {g.in_dims.nx, g.in_dims.ny, g.in_dims.nz};
  pos.outside = false;
  for (int c = 0; c < 3; ++c) {
    if (g.padding == Padding::kBorder) {
      pos.ix[c] = ClampCoord(ix[c], m[c], &pos.dclamp[c]);
    } else {
      pos.ix[c] = ix[c];
      pos.dclamp[c] = T(1);
      // Also catches NaN; beyond (-1, m) all eight corners are padding.
      if (!(ix[c] > T(-1) && ix[c] < static_cast<T>(m[c]))) pos.outside = true;
    }
  }
  return pos;
}

// The eight corners of the interpolation cell and their weights.
template <typename T>
struct Cell {
  int64_t i0[3];   // lower corner index per axis
  T frac[3];       // ix - floor(ix)
};

template <typename T>
Cell<T> MakeCell(const T ix[3]) {
  Cell<T> cell;
  for (int c = 0; c < 3; ++c) {
    const T f = FloorT(ix[c]);
    cell.i0[c] = static_cast<int64_t>(f);
    cell.frac[c] = ix[c] - f;
  }
  return cell;
}

// Image values as T: plain, or an fp16-stored image (mixed precision).
template <typename T>
T LoadAs(T v) {
  return v;
}
template <typename T>
T LoadAs(Half v) {
  return static_cast<T>(ToFloat(v));
}

template <typename T, typename Img>
T Fetch(const Img* image, const Dims3& d, int64_t i, int64_t j, int64_t k) {
  if (i < 0 || j < 0 || k < 0 || i >= d.nx || j >= d.ny || k >= d.nz) return T(0);
  return LoadAs<T>(image[d.index(i, j, k)]);
}

// Trilinear value at the cell and, if dv != null, d(value)/d(ix) per axis.
template <typename T, typename Img>
T Interpolate(const Img* image, const Dims3& d, const Cell<T>& cell, T dv[3]) {
  T v[2][2][2];
  const int64_t i0 = cell.i0[0], j0 = cell.i0[1], k0 = cell.i0[2];
  if (i0 >= 0 && j0 >= 0 && k0 >= 0 && i0 + 1 < d.nx && j0 + 1 < d.ny && k0 + 1 < d.nz) {
    // Interior cell (nearly every voxel, issue 38): the eight corners at
    // fixed strides, without Fetch's per-corner bounds checks. Same values.
    const Img* p = image + d.index(i0, j0, k0);
    const int64_t sy = d.nx, sz = d.nx * d.ny;
    for (int c = 0; c < 2; ++c) {
      for (int b = 0; b < 2; ++b) {
        for (int a = 0; a < 2; ++a) v[c][b][a] = LoadAs<T>(p[c * sz + b * sy + a]);
      }
    }
  } else {
    for (int c = 0; c < 2; ++c) {
      for (int b = 0; b < 2; ++b) {
        for (int a = 0; a < 2; ++a) {
          v[c][b][a] = Fetch<T>(image, d, i0 + a, j0 + b, k0 + c);
        }
      }
    }
  }
  const T wx[2] = {T(1) - cell.frac[0], cell.frac[0]};
  const T wy[2] = {T(1) - cell.frac[1], cell.frac[1]};
  const T wz[2] = {T(1) - cell.frac[2], cell.frac[2]};
  T value = 0;
  for (int c = 0; c < 2; ++c) {
    for (int b = 0; b < 2; ++b) {
      for (int a = 0; a < 2; ++a) value += wx[a] * wy[b] * wz[c] * v[c][b][a];
    }
  }
  if (dv != nullptr) {
    dv[0] = dv[1] = dv[2] = 0;
    for (int c = 0; c < 2; ++c) {
      for (int b = 0; b < 2; ++b) {
        dv[0] += wy[b] * wz[c] * (v[c][b][1] - v[c][b][0]);
      }
    }
    for (int c = 0; c < 2; ++c) {
      for (int a = 0; a < 2; ++a) {
        dv[1] += wx[a] * wz[c] * (v[c][1][a] - v[c][0][a]);
      }
    }
    for (int b = 0; b < 2; ++b) {
      for (int a = 0; a < 2; ++a) {
        dv[2] += wx[a] * wy[b] * (v[1][b][a] - v[0][b][a]);
      }
    }
  }
  return value;
}

// Sampling position of output voxel (i, j, k); x receives its normalized
// output coordinate. Always inlined into the voxel loops (issue 38: as a call
// it was 16 % of a 1 mm registration's CPU time; -ffp-contract=off keeps the
// arithmetic, and so the result, the same).
// x: the output coordinate of voxel (i, j, k), jittered when the call asks.
template <typename T>
__attribute__((always_inline)) inline void JitteredCoord(const SamplerGeometry<T>& g, const GridSampleArgsT<T>& args,
                                                         int64_t i, int64_t j, int64_t k, T x[3]) {
  OutputCoord(g, i, j, k, x);
  if (args.voxel_jitter_key != 0) {
    const int64_t v = g.out_dims.index(i, j, k);
    for (int c = 0; c < 3; ++c) {
      x[c] = RnAdd(x[c], RnMul(g.out_step[c], VoxelJitter<T>(args.voxel_jitter_key, v + g.v_offset, c)));
    }
  }
}

template <typename T>
__attribute__((always_inline)) inline void PositionOf(const SamplerGeometry<T>& g, const GridSampleArgsT<T>& args, int64_t i, int64_t j, int64_t k,
                T x[3], T ix[3]) {
  JitteredCoord(g, args, i, j, k, x);
  const int64_t n = g.out_dims.size();
  const int64_t v = g.out_dims.index(i, j, k);
  T u[3];
  const T* up = nullptr;
  if (args.disp != nullptr) {
    for (int c = 0; c < 3; ++c) u[c] = args.disp[v + c * n];
    up = u;
  }
  SamplePosition(g, args.affine, x, up, ix);
}

// dL/du as stored: unchanged in T, else rounded from float (mixed precision).
template <typename S, typename T>
S StoreAs(T v) {
  if constexpr (std::is_same<S, T>::value) {
    return v;
  } else {
    return FromFloat<S>(static_cast<float>(v));
  }
}

// The forward pass on an image of storage type Img (T or Half).
template <typename T, typename Img>
void ForwardImpl(const GridSampleArgsT<T>& args, const Img* image, T* out) {
  const SamplerGeometry<T> g =
      MakeSamplerGeometry<T>(args.out_dims, args.image_dims, args.grid_lo, args.grid_hi, args.padding,
                             args.grid_nz, args.out_z0);
  const Dims3 od = args.out_dims;
  ParallelFor(od.nz, [&](int64_t k_begin, int64_t k_end, int) {
    for (int64_t k = k_begin; k < k_end; ++k) {
      for (int64_t j = 0; j < od.ny; ++j) {
        for (int64_t i = 0; i < od.nx; ++i) {
          T x[3], ix[3];
          PositionOf(g, args, i, j, k, x, ix);
          const PaddedPosition<T> pos = ApplyPadding(g, ix);
          out[od.index(i, j, k)] =
              pos.outside ? T(0) : Interpolate<T>(image, args.image_dims, MakeCell(pos.ix), nullptr);
        }
      }
    }
  });
}

// One voxel's dL/dp (gp) times its grid coordinate x added to dL/d[A|t]'s
// double sums (both backward paths: the same operations, so the same bits).
template <typename G, typename X>
void AccumulateAffineGrad(const G gp[3], const X x[3], std::array<double, kAffineParams>& acc) {
  for (int c = 0; c < 3; ++c) {
    const double gpc = static_cast<double>(gp[c]);
    for (int d = 0; d < 3; ++d) acc[4 * c + d] += gpc * static_cast<double>(x[d]);
    acc[4 * c + 3] += gpc;
  }
}

// dL/d[A|t]: the chunks' sums in chunk order. Without an affine the identity
// was used; its gradient is still the derivative with respect to [A | t]
// evaluated at the identity.
template <typename T>
void StoreAffineGrad(const std::vector<std::array<double, kAffineParams>>& partial, T* grad_affine) {
  for (int p = 0; p < kAffineParams; ++p) {
    double sum = 0;
    for (const auto& part : partial) sum += part[p];
    grad_affine[p] = static_cast<T>(sum);
  }
}

// The backward pass on an image of storage type Img, dL/du stored as GradT
// (grads.grad_disp is ignored; grad_disp is used).
template <typename T, typename Img, typename GradT>
void BackwardImpl(const GridSampleArgsT<T>& args, const Img* image, const T* grad_out, const GridSampleGradsT<T>& grads,
                  GradT* grad_disp) {
  const SamplerGeometry<T> g =
      MakeSamplerGeometry<T>(args.out_dims, args.image_dims, args.grid_lo, args.grid_hi, args.padding,
                             args.grid_nz, args.out_z0);
  const Dims3 od = args.out_dims;
  const Dims3 id = args.image_dims;
  const int64_t n = od.size();
  if (grads.grad_image != nullptr) {
    for (int64_t v = 0; v < id.size(); ++v) grads.grad_image[v] = T(0);
  }
  // The image gradient is a scatter: run it on one thread to avoid races.
  const int64_t parallel_range = grads.grad_image != nullptr ? 1 : od.nz;
  std::vector<std::array<double, kAffineParams>> partial(ParallelChunks(parallel_range));
  ParallelFor(parallel_range, [&](int64_t begin, int64_t end, int chunk) {
    if (grads.grad_image != nullptr) {
      begin = 0;
      end = od.nz;
    }
    std::array<double, kAffineParams> acc{};
    for (int64_t k = begin; k < end; ++k) {
      for (int64_t j = 0; j < od.ny; ++j) {
        for (int64_t i = 0; i < od.nx; ++i) {
          const int64_t v = od.index(i, j, k);
          T x[3], ix[3];
          PositionOf(g, args, i, j, k, x, ix);
          const PaddedPosition<T> pos = ApplyPadding(g, ix);
          T gp[3] = {0, 0, 0};  // dL/dp for this voxel
          if (!pos.outside) {
            const Cell<T> cell = MakeCell(pos.ix);
            T dv[3];
            Interpolate(image, id, cell, dv);
            for (int c = 0; c < 3; ++c) gp[c] = grad_out[v] * dv[c] * pos.dclamp[c] * g.in_half[c];
            if (grads.grad_image != nullptr) {
              for (int c = 0; c < 2; ++c) {
                for (int b = 0; b < 2; ++b) {
                  for (int a = 0; a < 2; ++a) {
                    const int64_t ii = cell.i0[0] + a, jj = cell.i0[1] + b, kk = cell.i0[2] + c;
                    if (ii < 0 || jj < 0 || kk < 0 || ii >= id.nx || jj >= id.ny || kk >= id.nz) continue;
                    const T w = (a ? cell.frac[0] : T(1) - cell.frac[0]) * (b ? cell.frac[1] : T(1) - cell.frac[1]) *
                                (c ? cell.frac[2] : T(1) - cell.frac[2]);
                    grads.grad_image[id.index(ii, jj, kk)] += grad_out[v] * w;
                  }
                }
              }
            }
          }
          if (grad_disp != nullptr) {
            for (int c = 0; c < 3; ++c) grad_disp[v + c * n] = StoreAs<GradT>(gp[c]);
          }
          if (grads.grad_affine != nullptr) AccumulateAffineGrad(gp, x, acc);
        }
      }
    }
    partial[chunk] = acc;
  });
  if (grads.grad_affine != nullptr) StoreAffineGrad(partial, grads.grad_affine);
}

// The vector paths (grid_sampler_cpu_path.h): a float or fp16 image, offsets
// that fit int32; the backward with zeros padding and no dL/dI. A row's
// positions and interior cells come from the row kernels; the cells they flag
// (border, outside, the row's tail) are computed here exactly as
// ForwardImpl/BackwardImpl compute them.
bool VectorPathApplies(SamplerCpuPath path, const GridSampleArgs& args, bool has_image) {
  return path != SamplerCpuPath::kScalar && has_image && args.image_dims.size() < (int64_t{1} << 31) &&
         args.out_dims.nx < (int64_t{1} << 31);
}

// Border padding's clamp (ClampCoord's value; NaN -> 0) on a row's positions.
// Clamping twice gives the same value, so the scalar code may clamp again.
void ClampRow(float* ix, int64_t nx, int64_t m) {
  const float hi = static_cast<float>(m - 1);
  for (int64_t i = 0; i < nx; ++i) {
    float v = ix[i] >= 0.0f ? ix[i] : 0.0f;
    ix[i] = v > hi ? hi : v;
  }
}

cpu_rows::RowGeometry RowGeometryOf(const SamplerGeometry<float>& g, const GridSampleArgs& args) {
  cpu_rows::RowGeometry rg;
  for (int c = 0; c < 3; ++c) {
    rg.out_lo[c] = g.out_lo[c];
    rg.out_step[c] = g.out_step[c];
    rg.in_half[c] = g.in_half[c];
  }
  rg.affine = args.affine;
  rg.jitter_key = args.voxel_jitter_key;
  rg.v_offset = g.v_offset;
  rg.k_offset = g.k_offset;
  return rg;
}

cpu_rows::RowImage RowImageOf(const GridSampleArgs& args, const float* image) {
  return {image, static_cast<int32_t>(args.image_dims.nx), static_cast<int32_t>(args.image_dims.ny),
          static_cast<int32_t>(args.image_dims.nz)};
}
cpu_rows::RowImageHalf RowImageOf(const GridSampleArgs& args, const Half* image) {
  return {&image->bits, static_cast<int32_t>(args.image_dims.nx), static_cast<int32_t>(args.image_dims.ny),
          static_cast<int32_t>(args.image_dims.nz)};
}

template <typename Img>
void ForwardVector(SamplerCpuPath path, const GridSampleArgs& args, const Img* image, float* out) {
  const SamplerGeometry<float> g =
      MakeSamplerGeometry<float>(args.out_dims, args.image_dims, args.grid_lo, args.grid_hi, args.padding,
                                 args.grid_nz, args.out_z0);
  const cpu_rows::RowGeometry rg = RowGeometryOf(g, args);
  const auto im = RowImageOf(args, image);
  const Dims3 od = args.out_dims;
  const int64_t n = od.size();
  ParallelFor(od.nz, [&](int64_t k_begin, int64_t k_end, int) {
    std::vector<float> ix(3 * od.nx);
    std::vector<int32_t> inside(od.nx);
    float* ix0 = ix.data();
    float* ix1 = ix0 + od.nx;
    float* ix2 = ix1 + od.nx;
    for (int64_t k = k_begin; k < k_end; ++k) {
      for (int64_t j = 0; j < od.ny; ++j) {
        const int64_t v0 = od.index(0, j, k);
        cpu_rows::RowPositions(path, rg, od.nx, j, k, v0, args.disp, n, ix0, ix1, ix2);
        if (args.padding == Padding::kBorder) {
          ClampRow(ix0, od.nx, args.image_dims.nx);
          ClampRow(ix1, od.nx, args.image_dims.ny);
          ClampRow(ix2, od.nx, args.image_dims.nz);
        }
        float* row = out + v0;
        cpu_rows::RowForward(path, im, od.nx, ix0, ix1, ix2, row, inside.data());
        for (int64_t i = 0; i < od.nx; ++i) {
          if (inside[i]) continue;
          const float p[3] = {ix0[i], ix1[i], ix2[i]};
          const PaddedPosition<float> pos = ApplyPadding(g, p);
          row[i] = pos.outside ? 0.0f : Interpolate<float>(image, args.image_dims, MakeCell(pos.ix), nullptr);
        }
      }
    }
  });
}

// dL/du (stored as GradT, when grad_disp is not null) and dL/d[A|t] (when
// grad_affine is not null) with zeros padding. dL/d[A|t]: BackwardImpl's
// double sums, each chunk's voxels in index order and the same chunks, so the
// same bits.
template <typename Img, typename GradT>
void BackwardVector(SamplerCpuPath path, const GridSampleArgs& args, const Img* image, const float* grad_out,
                    GradT* grad_disp, float* grad_affine) {
  const SamplerGeometry<float> g =
      MakeSamplerGeometry<float>(args.out_dims, args.image_dims, args.grid_lo, args.grid_hi, args.padding,
                                 args.grid_nz, args.out_z0);
  const cpu_rows::RowGeometry rg = RowGeometryOf(g, args);
  const auto im = RowImageOf(args, image);
  const Dims3 od = args.out_dims;
  const int64_t n = od.size();
  constexpr bool kFloatGrad = std::is_same<GradT, float>::value;
  std::vector<std::array<double, kAffineParams>> partial(ParallelChunks(od.nz));
  ParallelFor(od.nz, [&](int64_t k_begin, int64_t k_end, int chunk) {
    std::vector<float> ix(3 * od.nx), rows(3 * od.nx);
    std::vector<int32_t> inside(od.nx);
    float* ix0 = ix.data();
    float* ix1 = ix0 + od.nx;
    float* ix2 = ix1 + od.nx;
    std::array<double, kAffineParams> acc{};
    for (int64_t k = k_begin; k < k_end; ++k) {
      for (int64_t j = 0; j < od.ny; ++j) {
        const int64_t v0 = od.index(0, j, k);
        cpu_rows::RowPositions(path, rg, od.nx, j, k, v0, args.disp, n, ix0, ix1, ix2);
        // dL/du's row: straight into a float grad_disp, else a row buffer.
        float* gd[3];
        for (int c = 0; c < 3; ++c) {
          gd[c] = kFloatGrad && grad_disp != nullptr ? reinterpret_cast<float*>(grad_disp) + c * n + v0
                                                     : rows.data() + c * od.nx;
        }
        const float* go = grad_out + v0;
        cpu_rows::RowBackward(path, im, g.in_half, od.nx, ix0, ix1, ix2, go, gd[0], gd[1], gd[2], inside.data());
        for (int64_t i = 0; i < od.nx; ++i) {
          if (inside[i]) continue;
          const float p[3] = {ix0[i], ix1[i], ix2[i]};
          const PaddedPosition<float> pos = ApplyPadding(g, p);
          float gp[3] = {0.0f, 0.0f, 0.0f};
          if (!pos.outside) {
            float dv[3];
            Interpolate(image, args.image_dims, MakeCell(pos.ix), dv);
            for (int c = 0; c < 3; ++c) gp[c] = go[i] * dv[c] * pos.dclamp[c] * g.in_half[c];
          }
          for (int c = 0; c < 3; ++c) gd[c][i] = gp[c];
        }
        if (!kFloatGrad && grad_disp != nullptr) {
          for (int c = 0; c < 3; ++c) {
            for (int64_t i = 0; i < od.nx; ++i) grad_disp[c * n + v0 + i] = StoreAs<GradT>(gd[c][i]);
          }
        }
        if (grad_affine != nullptr) {
          for (int64_t i = 0; i < od.nx; ++i) {
            float x[3];
            JitteredCoord(g, args, i, j, k, x);
            const float gp[3] = {gd[0][i], gd[1][i], gd[2][i]};
            AccumulateAffineGrad(gp, x, acc);
          }
        }
      }
    }
    partial[chunk] = acc;
  });
  if (grad_affine != nullptr) StoreAffineGrad(partial, grad_affine);
}

// The forward pass of a float or fp16 image on `path`.
template <typename Img>
void ForwardOnPath(SamplerCpuPath path, const GridSampleArgs& args, const Img* image, float* out) {
  path = ResolveSamplerCpuPath(path);
  if (VectorPathApplies(path, args, image != nullptr)) {
    ForwardVector(path, args, image, out);
  } else {
    ForwardImpl(args, image, out);
  }
}

}  // namespace

void GridSampleForwardOnPath(SamplerCpuPath path, const GridSampleArgs& args, float* out) {
  ForwardOnPath(path, args, args.image, out);
}

void GridSampleBackwardOnPath(SamplerCpuPath path, const GridSampleArgs& args, const float* grad_out,
                              const GridSampleGrads& grads) {
  path = ResolveSamplerCpuPath(path);
  if (VectorPathApplies(path, args, args.image != nullptr) && args.padding == Padding::kZeros &&
      grads.grad_image == nullptr && (grads.grad_disp != nullptr || grads.grad_affine != nullptr)) {
    BackwardVector(path, args, args.image, grad_out, grads.grad_disp, grads.grad_affine);
  } else {
    BackwardImpl(args, args.image, grad_out, grads, grads.grad_disp);
  }
}

void GridSampleForwardHalfImageOnPath(SamplerCpuPath path, const GridSampleArgs& args, const Half* image,
                                      float* out) {
  ForwardOnPath(path, args, image, out);
}

void GridSampleBackwardHalfImageOnPath(SamplerCpuPath path, const GridSampleArgs& args, const Half* image,
                                       const float* grad_out, BFloat16* grad_disp) {
  path = ResolveSamplerCpuPath(path);
  if (VectorPathApplies(path, args, image != nullptr) && args.padding == Padding::kZeros) {
    BackwardVector(path, args, image, grad_out, grad_disp, static_cast<float*>(nullptr));
  } else {
    BackwardImpl(args, image, grad_out, GridSampleGrads{}, grad_disp);
  }
}

template <typename T>
void GridSampleForward(const GridSampleArgsT<T>& args, T* out) {
  if constexpr (std::is_same<T, float>::value) {
    GridSampleForwardOnPath(SamplerCpuPath::kAuto, args, out);
  } else {
    ForwardImpl(args, args.image, out);
  }
}

template <typename T>
void GridSampleBackward(const GridSampleArgsT<T>& args, const T* grad_out, const GridSampleGradsT<T>& grads) {
  if constexpr (std::is_same<T, float>::value) {
    GridSampleBackwardOnPath(SamplerCpuPath::kAuto, args, grad_out, grads);
  } else {
    BackwardImpl(args, args.image, grad_out, grads, grads.grad_disp);
  }
}

void GridSampleForwardHalfImage(const GridSampleArgs& args, const Half* image, float* out) {
  GridSampleForwardHalfImageOnPath(SamplerCpuPath::kAuto, args, image, out);
}

void GridSampleBackwardHalfImage(const GridSampleArgs& args, const Half* image, const float* grad_out,
                                 BFloat16* grad_disp) {
  GridSampleBackwardHalfImageOnPath(SamplerCpuPath::kAuto, args, image, grad_out, grad_disp);
}

void GridSampleNearest(const int32_t* labels, const GridSampleArgs& args, int32_t* out) {
  const SamplerGeometry<float> g =
      MakeSamplerGeometry<float>(args.out_dims, args.image_dims, args.grid_lo, args.grid_hi, args.padding,
                             args.grid_nz, args.out_z0);
  const Dims3 od = args.out_dims;
  const Dims3 id = args.image_dims;
  ParallelFor(od.nz, [&](int64_t k_begin, int64_t k_end, int) {
    for (int64_t k = k_begin; k < k_end; ++k) {
      for (int64_t j = 0; j < od.ny; ++j) {
        for (int64_t i = 0; i < od.nx; ++i) {
          float x[3], ix[3];
          PositionOf(g, args, i, j, k, x, ix);
          const PaddedPosition<float> pos = ApplyPadding(g, ix);
          int64_t idx[3];
          bool inside = true;
          const int64_t m[3] = {id.nx, id.ny, id.nz};
          for (int c = 0; c < 3; ++c) {
            const float r = RoundEvenT(pos.ix[c]);
            // Compare as float first so huge or NaN positions never become integers.
            if (!(r >= 0.0f && r <= static_cast<float>(m[c] - 1))) {
              inside = false;
              break;
            }
            idx[c] = static_cast<int64_t>(r);
          }
          out[od.index(i, j, k)] = inside ? labels[id.index(idx[0], idx[1], idx[2])] : 0;
        }
      }
    }
  });
}

template void GridSampleForward<float>(const GridSampleArgsT<float>&, float*);
template void GridSampleForward<double>(const GridSampleArgsT<double>&, double*);
template void GridSampleBackward<float>(const GridSampleArgsT<float>&, const float*, const GridSampleGradsT<float>&);
template void GridSampleBackward<double>(const GridSampleArgsT<double>&, const double*,
                                         const GridSampleGradsT<double>&);

}  // namespace cpu
}  // namespace registration
}  // namespace tessera

// CUDA backend of the NUFFT.
//
// SetPoints folds every coordinate in double (cell + fraction, as the CPU),
// radix-sorts points by bin (stable: ties keep the caller's order), and cuts
// each bin into subproblems of at most kMaxSubproblem points so dense
// regions (the centre of radial k-space) spread on many blocks.
// Type 1: each block spreads one subproblem into a shared-memory tile (bin +
// kernel halo) with shared atomics, then adds the tile to the fine grid
// (global atomics only at tile granularity). kDeterministic instead gathers:
// one block per bin owns the bin's cells and sums, for each cell, the points
// of the neighbouring bins in sorted order: no atomics, bit-identical runs.
// Type 2: one thread per sorted point interpolates from the fine grid
// (neighbours share cache lines). FFTs are cuFFT C2C batched over transforms;
// deconvolution and the centred <-> FFT-order shift are one kernel.
// Kernel values are separable: w exponentials per axis and point.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/reconstruction/nufft/cufft_plan.h"
#include "kernels/reconstruction/nufft/nufft_backend.h"

namespace tessera {
namespace recon {
namespace nufft {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxSubproblem = 1024;        // points per spreading block
constexpr size_t kMaxTileBytes = 96 << 10;  // dynamic shared memory per spreading block
constexpr int kGatherCellsPerThread = 8;    // deterministic gather: bin cells <= 8 x kThreads
constexpr size_t kMaxBatchGridBytes = size_t{2} << 30;

cudaStream_t Native(const Stream& s) { return static_cast<cudaStream_t>(s.native()); }

// What every kernel needs about the grid, bins and ES kernel (by value).
template <typename T>
struct Geo {
  int dim;
  int w;
  int pad;  // ceil(w / 2): tile halo per side
  int nf[3];
  int bs[3];  // bin size (cells)
  int nb[3];  // bins per axis
  T beta;
  T c;
};

template <typename T>
__device__ __forceinline__ T EsWeight(T z, T beta, T c) {
  const T s = T(1) - c * z * z;
  return s > T(0) ? exp(beta * (sqrt(s) - T(1))) : T(0);
}

__device__ __forceinline__ int Wrap(int i, int n) {
  i %= n;
  return i < 0 ? i + n : i;
}

template <typename T>
__device__ __forceinline__ int FirstOffsetDev(T frac, int w) {
  return static_cast<int>(ceil(frac - static_cast<T>(w) * T(0.5)));
}

// Same arithmetic as FoldToGrid (nufft_setup.h).
__device__ __forceinline__ void FoldDev(double x, int n, int* cell, double* frac) {
  const double dn = static_cast<double>(n);
  double t = x * (dn / (2.0 * M_PI));
  t -= floor(t / dn) * dn;
  double c = floor(t);
  double f = t - c;
  if (c >= dn) c -= dn;
  if (c < 0) c = 0, f = 0;
  *cell = static_cast<int>(c);
  *frac = f;
}

// The fraction in T, kept below 1 so a point never leaves its cell's tile.
template <typename T>
__device__ __forceinline__ T FracAsTDev(double f) {
  T r = static_cast<T>(f);
  const T below_one = T(1) - std::numeric_limits<T>::epsilon() / 2;
  return r < T(1) ? r : below_one;
}

template <typename T>
__global__ void FoldKeysKernel(int m, const T* __restrict__ x, const T* __restrict__ y, const T* __restrict__ z,
                               Geo<T> g, unsigned* __restrict__ keys, int* __restrict__ vals,
                               unsigned long long* __restrict__ first_bad) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= m) return;
  const T* coords[3] = {x, y, z};
  unsigned key = 0, stride = 1;
  for (int a = 0; a < g.dim; ++a) {
    const double v = static_cast<double>(coords[a][j]);
    int cell = 0;
    double frac = 0;
    if (isfinite(v)) {
      FoldDev(v, g.nf[a], &cell, &frac);
    } else {
      atomicMin(first_bad, static_cast<unsigned long long>(j));
    }
    key += stride * static_cast<unsigned>(cell / g.bs[a]);
    stride *= static_cast<unsigned>(g.nb[a]);
  }
  keys[j] = key;
  vals[j] = j;
}

template <typename T>
__global__ void GatherPointsKernel(int m, const T* __restrict__ x, const T* __restrict__ y, const T* __restrict__ z,
                                   Geo<T> g, const int* __restrict__ perm, int* __restrict__ cx,
                                   int* __restrict__ cy, int* __restrict__ cz, T* __restrict__ fx,
                                   T* __restrict__ fy, T* __restrict__ fz) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= m) return;
  const int j = perm[i];
  const T* coords[3] = {x, y, z};
  int* cells[3] = {cx, cy, cz};
  T* fracs[3] = {fx, fy, fz};
  for (int a = 0; a < g.dim; ++a) {
    int cell;
    double frac;
    FoldDev(static_cast<double>(coords[a][j]), g.nf[a], &cell, &frac);
    cells[a][i] = cell;
    fracs[a][i] = FracAsTDev<T>(frac);
  }
}

// start[b] = first sorted index with key >= b, for b in [0, nbins].
__global__ void BinStartsKernel(int m, const unsigned* __restrict__ keys, int nbins, int* __restrict__ start) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i > m) return;
  const int prev = i == 0 ? -1 : static_cast<int>(keys[i - 1]);
  const int cur = i == m ? nbins : static_cast<int>(keys[i]);
  for (int b = prev + 1; b <= cur; ++b) start[b] = i;
}

__global__ void SubproblemCountKernel(int nbins, const int* __restrict__ start, int* __restrict__ nsub) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= nbins) return;
  nsub[b] = (start[b + 1] - start[b] + kMaxSubproblem - 1) / kMaxSubproblem;
}

__global__ void SubproblemFillKernel(int nbins, const int* __restrict__ start, const int* __restrict__ nsub,
                                     const int* __restrict__ inclusive, int* __restrict__ sub_bin,
                                     int* __restrict__ sub_begin, int* __restrict__ sub_end) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= nbins) return;
  const int first = inclusive[b] - nsub[b];
  for (int s = 0; s < nsub[b]; ++s) {
    sub_bin[first + s] = b;
    sub_begin[first + s] = start[b] + s * kMaxSubproblem;
    sub_end[first + s] = min(start[b + 1], start[b] + (s + 1) * kMaxSubproblem);
  }
}

// Sorted point arrays, by value.
template <typename T>
struct Points {
  int m;
  const int* cell[3];
  const T* frac[3];
  const int* perm;
};

template <typename T>
__device__ __forceinline__ void AtomicAddC(typename Vec2<T>::type* p, T re, T im) {
  atomicAdd(&p->x, re);
  atomicAdd(&p->y, im);
}

// One block per (subproblem, transform): shared-memory tile spreading.
template <typename T, int kDim>
__global__ void __launch_bounds__(kThreads) SpreadTileKernel(Geo<T> g, Points<T> p, const int* __restrict__ sub_bin,
                                                             const int* __restrict__ sub_begin,
                                                             const int* __restrict__ sub_end,
                                                             const typename Vec2<T>::type* __restrict__ c,
                                                             typename Vec2<T>::type* __restrict__ grid,
                                                             long long grid_size) {
  using C = typename Vec2<T>::type;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  C* tile = reinterpret_cast<C*>(smem_raw);
  const int sub = blockIdx.x, t = blockIdx.y;
  const int bin = sub_bin[sub];
  const int b0 = bin % g.nb[0], b1 = (bin / g.nb[0]) % g.nb[1], b2 = bin / (g.nb[0] * g.nb[1]);
  const int o0 = b0 * g.bs[0] - g.pad, o1 = b1 * g.bs[1] - g.pad, o2 = kDim == 3 ? b2 * g.bs[2] - g.pad : 0;
  const int t0 = g.bs[0] + 2 * g.pad, t1 = g.bs[1] + 2 * g.pad, t2 = kDim == 3 ? g.bs[2] + 2 * g.pad : 1;
  const int cells = t0 * t1 * t2;
  for (int q = threadIdx.x; q < cells; q += blockDim.x) tile[q] = C{T(0), T(0)};
  __syncthreads();
  const C* ct = c + static_cast<long long>(t) * p.m;
  const int w = g.w;
  for (int i = sub_begin[sub] + threadIdx.x; i < sub_end[sub]; i += blockDim.x) {
    const C v = ct[p.perm[i]];
    const T f0 = p.frac[0][i], f1 = p.frac[1][i];
    const int ox = FirstOffsetDev(f0, w), oy = FirstOffsetDev(f1, w);
    T wx[kMaxKernelWidth];
#pragma unroll
    for (int k = 0; k < kMaxKernelWidth; ++k) wx[k] = k < w ? EsWeight(static_cast<T>(ox + k) - f0, g.beta, g.c) : T(0);
    const int lx = p.cell[0][i] + ox - o0, ly = p.cell[1][i] + oy - o1;
    int lz = 0, oz = 0;
    T f2 = 0;
    int nz = 1;
    if (kDim == 3) {
      f2 = p.frac[2][i];
      oz = FirstOffsetDev(f2, w);
      lz = p.cell[2][i] + oz - o2;
      nz = w;
    }
    for (int dz = 0; dz < nz; ++dz) {
      const T wz = kDim == 3 ? EsWeight(static_cast<T>(oz + dz) - f2, g.beta, g.c) : T(1);
      for (int dy = 0; dy < w; ++dy) {
        const T wyz = wz * EsWeight(static_cast<T>(oy + dy) - f1, g.beta, g.c);
        const T vr = v.x * wyz, vi = v.y * wyz;
        C* row = tile + ((lz + dz) * t1 + ly + dy) * t0 + lx;
#pragma unroll
        for (int k = 0; k < kMaxKernelWidth; ++k) {
          if (k < w) AtomicAddC<T>(row + k, vr * wx[k], vi * wx[k]);
        }
      }
    }
  }
  __syncthreads();
  C* gt = grid + static_cast<long long>(t) * grid_size;
  for (int q = threadIdx.x; q < cells; q += blockDim.x) {
    const C v = tile[q];
    if (v.x == T(0) && v.y == T(0)) continue;
    const int i0 = q % t0, i1 = (q / t0) % t1, i2 = q / (t0 * t1);
    const int gx = Wrap(o0 + i0, g.nf[0]), gy = Wrap(o1 + i1, g.nf[1]);
    const int gz = kDim == 3 ? Wrap(o2 + i2, g.nf[2]) : 0;
    AtomicAddC<T>(gt + (static_cast<long long>(gz) * g.nf[1] + gy) * g.nf[0] + gx, v.x, v.y);
  }
}

// Fallback when a tile would not fit in shared memory (wide 3-D double
// kernels): one thread per sorted point, global atomics.
template <typename T, int kDim>
__global__ void SpreadGlobalKernel(Geo<T> g, Points<T> p, const typename Vec2<T>::type* __restrict__ c,
                                   typename Vec2<T>::type* __restrict__ grid, long long grid_size) {
  using C = typename Vec2<T>::type;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.m) return;
  const int t = blockIdx.y, w = g.w;
  const C v = c[static_cast<long long>(t) * p.m + p.perm[i]];
  C* gt = grid + static_cast<long long>(t) * grid_size;
  const T f0 = p.frac[0][i], f1 = p.frac[1][i];
  const int ox = FirstOffsetDev(f0, w), oy = FirstOffsetDev(f1, w);
  T wx[kMaxKernelWidth];
  int ix[kMaxKernelWidth];
#pragma unroll
  for (int k = 0; k < kMaxKernelWidth; ++k) {
    wx[k] = k < w ? EsWeight(static_cast<T>(ox + k) - f0, g.beta, g.c) : T(0);
    ix[k] = Wrap(p.cell[0][i] + ox + k, g.nf[0]);
  }
  const int nz = kDim == 3 ? w : 1;
  const T f2 = kDim == 3 ? p.frac[2][i] : T(0);
  const int oz = kDim == 3 ? FirstOffsetDev(f2, w) : 0;
  for (int dz = 0; dz < nz; ++dz) {
    const T wz = kDim == 3 ? EsWeight(static_cast<T>(oz + dz) - f2, g.beta, g.c) : T(1);
    const int gz = kDim == 3 ? Wrap(p.cell[2][i] + oz + dz, g.nf[2]) : 0;
    for (int dy = 0; dy < w; ++dy) {
      const T wyz = wz * EsWeight(static_cast<T>(oy + dy) - f1, g.beta, g.c);
      const int gy = Wrap(p.cell[1][i] + oy + dy, g.nf[1]);
      C* row = gt + (static_cast<long long>(gz) * g.nf[1] + gy) * g.nf[0];
#pragma unroll
      for (int k = 0; k < kMaxKernelWidth; ++k) {
        if (k < w) AtomicAddC<T>(row + ix[k], v.x * wyz * wx[k], v.y * wyz * wx[k]);
      }
    }
  }
}

// Deterministic type 1: one block per (bin, transform); each thread owns up
// to kGatherCellsPerThread cells of the bin and sums the kernel-weighted
// values of every point of the neighbouring bins (fixed bin order, sorted
// point order) into registers; the grid is written, not accumulated.
template <typename T, int kDim>
__global__ void __launch_bounds__(kThreads) GatherSpreadKernel(Geo<T> g, Points<T> p, const int* __restrict__ start,
                                                               const typename Vec2<T>::type* __restrict__ c,
                                                               typename Vec2<T>::type* __restrict__ grid,
                                                               long long grid_size) {
  using C = typename Vec2<T>::type;
  constexpr int kChunk = sizeof(T) == 4 ? 64 : 32;
  __shared__ T s_w[kChunk][kDim][kMaxKernelWidth];
  __shared__ int s_l0[kChunk][kDim];
  __shared__ C s_v[kChunk];
  const int bin = blockIdx.x, t = blockIdx.y, w = g.w;
  const int bb[3] = {bin % g.nb[0], (bin / g.nb[0]) % g.nb[1], kDim == 3 ? bin / (g.nb[0] * g.nb[1]) : 0};
  const int bin_cells = g.bs[0] * g.bs[1] * (kDim == 3 ? g.bs[2] : 1);
  int cell[kGatherCellsPerThread][3];
  bool valid[kGatherCellsPerThread];
  T acc_r[kGatherCellsPerThread], acc_i[kGatherCellsPerThread];
#pragma unroll
  for (int k = 0; k < kGatherCellsPerThread; ++k) {
    const int q = threadIdx.x + k * kThreads;
    cell[k][0] = bb[0] * g.bs[0] + q % g.bs[0];
    cell[k][1] = bb[1] * g.bs[1] + (q / g.bs[0]) % g.bs[1];
    cell[k][2] = kDim == 3 ? bb[2] * g.bs[2] + q / (g.bs[0] * g.bs[1]) : 0;
    valid[k] = q < bin_cells && cell[k][0] < g.nf[0] && cell[k][1] < g.nf[1] && (kDim == 2 || cell[k][2] < g.nf[2]);
    acc_r[k] = acc_i[k] = T(0);
  }
  const C* ct = c + static_cast<long long>(t) * p.m;
  // Neighbouring bins per axis: radius ceil(pad / bs), each bin once.
  int lo[3], cnt[3];
  for (int a = 0; a < 3; ++a) {
    if (a >= kDim) {
      lo[a] = 0, cnt[a] = 1;
      continue;
    }
    // When the last bin is partial (nf not a multiple of bs), a point of the
    // bin r + 1 bins away across the periodic wrap can still reach this
    // bin's cells: one more bin then (seen on an H200, 3-D double at 1e-12:
    // kernel-tail contributions of ~1e-10 were missed).
    const int r = (g.pad + g.bs[a] - 1) / g.bs[a] + (g.nf[a] % g.bs[a] != 0 ? 1 : 0);
    if (2 * r + 1 >= g.nb[a]) {
      lo[a] = 0, cnt[a] = g.nb[a];
    } else {
      lo[a] = bb[a] - r, cnt[a] = 2 * r + 1;
    }
  }
  for (int nz = 0; nz < cnt[2]; ++nz) {
    for (int ny = 0; ny < cnt[1]; ++ny) {
      for (int nx = 0; nx < cnt[0]; ++nx) {
        const int nbin = Wrap(lo[0] + nx, g.nb[0]) +
                         g.nb[0] * (Wrap(lo[1] + ny, g.nb[1]) + g.nb[1] * (kDim == 3 ? Wrap(lo[2] + nz, g.nb[2]) : 0));
        const int first = start[nbin], last = start[nbin + 1];
        for (int i0 = first; i0 < last; i0 += kChunk) {
          const int n = min(kChunk, last - i0);
          __syncthreads();
          if (threadIdx.x < n) {
            const int i = i0 + threadIdx.x;
            s_v[threadIdx.x] = ct[p.perm[i]];
            for (int a = 0; a < kDim; ++a) {
              const T f = p.frac[a][i];
              const int o = FirstOffsetDev(f, w);
              s_l0[threadIdx.x][a] = Wrap(p.cell[a][i] + o, g.nf[a]);
              for (int k = 0; k < kMaxKernelWidth; ++k) {
                s_w[threadIdx.x][a][k] = k < w ? EsWeight(static_cast<T>(o + k) - f, g.beta, g.c) : T(0);
              }
            }
          }
          __syncthreads();
          for (int j = 0; j < n; ++j) {
            const C v = s_v[j];
#pragma unroll
            for (int k = 0; k < kGatherCellsPerThread; ++k) {
              int d0 = cell[k][0] - s_l0[j][0], d1 = cell[k][1] - s_l0[j][1];
              d0 += d0 < 0 ? g.nf[0] : 0;
              d1 += d1 < 0 ? g.nf[1] : 0;
              int d2 = 0;
              if (kDim == 3) {
                d2 = cell[k][2] - s_l0[j][2];
                d2 += d2 < 0 ? g.nf[2] : 0;
              }
              if (valid[k] && d0 < w && d1 < w && d2 < w) {
                const T wt = s_w[j][0][d0] * s_w[j][1][d1] * (kDim == 3 ? s_w[j][kDim - 1][d2] : T(1));
                acc_r[k] += v.x * wt;
                acc_i[k] += v.y * wt;
              }
            }
          }
        }
      }
    }
  }
  C* gt = grid + static_cast<long long>(t) * grid_size;
#pragma unroll
  for (int k = 0; k < kGatherCellsPerThread; ++k) {
    if (!valid[k]) continue;
    gt[(static_cast<long long>(cell[k][2]) * g.nf[1] + cell[k][1]) * g.nf[0] + cell[k][0]] = C{acc_r[k], acc_i[k]};
  }
}

// Type 2: one thread per (sorted point, transform).
template <typename T, int kDim>
__global__ void InterpKernel(Geo<T> g, Points<T> p, const typename Vec2<T>::type* __restrict__ grid,
                             long long grid_size, typename Vec2<T>::type* __restrict__ c) {
  using C = typename Vec2<T>::type;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.m) return;
  const int t = blockIdx.y, w = g.w;
  const C* gt = grid + static_cast<long long>(t) * grid_size;
  const T f0 = p.frac[0][i], f1 = p.frac[1][i];
  const int ox = FirstOffsetDev(f0, w), oy = FirstOffsetDev(f1, w);
  T wx[kMaxKernelWidth];
  int ix[kMaxKernelWidth];
#pragma unroll
  for (int k = 0; k < kMaxKernelWidth; ++k) {
    wx[k] = k < w ? EsWeight(static_cast<T>(ox + k) - f0, g.beta, g.c) : T(0);
    ix[k] = k < w ? Wrap(p.cell[0][i] + ox + k, g.nf[0]) : 0;
  }
  const int nz = kDim == 3 ? w : 1;
  const T f2 = kDim == 3 ? p.frac[2][i] : T(0);
  const int oz = kDim == 3 ? FirstOffsetDev(f2, w) : 0;
  T sr = 0, si = 0;
  for (int dz = 0; dz < nz; ++dz) {
    const T wz = kDim == 3 ? EsWeight(static_cast<T>(oz + dz) - f2, g.beta, g.c) : T(1);
    const int gz = kDim == 3 ? Wrap(p.cell[2][i] + oz + dz, g.nf[2]) : 0;
    for (int dy = 0; dy < w; ++dy) {
      const T wyz = wz * EsWeight(static_cast<T>(oy + dy) - f1, g.beta, g.c);
      const int gy = Wrap(p.cell[1][i] + oy + dy, g.nf[1]);
      const C* row = gt + (static_cast<long long>(gz) * g.nf[1] + gy) * g.nf[0];
      T rr = 0, ri = 0;
#pragma unroll
      for (int k = 0; k < kMaxKernelWidth; ++k) {
        if (k < w) {
          const C v = row[ix[k]];
          rr += v.x * wx[k];
          ri += v.y * wx[k];
        }
      }
      sr += rr * wyz;
      si += ri * wyz;
    }
  }
  c[static_cast<long long>(t) * p.m + p.perm[i]] = C{sr, si};
}

// Deconvolution tables: per axis, 1 / phihat and the fine index of each mode.
template <typename T>
struct Deconv {
  const T* d[3];
  const int* fi[3];
  int n[3];
  int nf[3];
};

// to_modes: f[t][mode] = grid[t][fine] * d (type 1); else grid[t][fine] =
// f[t][mode] * d (type 2, grid zeroed before).
template <typename T>
__global__ void DeconvKernel(Deconv<T> dc, long long nmodes, long long grid_size, bool to_modes,
                             typename Vec2<T>::type* __restrict__ grid, typename Vec2<T>::type* __restrict__ f) {
  using C = typename Vec2<T>::type;
  const long long q = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (q >= nmodes) return;
  const int t = blockIdx.y;
  const int i0 = static_cast<int>(q % dc.n[0]), i1 = static_cast<int>((q / dc.n[0]) % dc.n[1]);
  const int i2 = static_cast<int>(q / (static_cast<long long>(dc.n[0]) * dc.n[1]));
  const T scale = dc.d[0][i0] * dc.d[1][i1] * dc.d[2][i2];
  const long long g =
      t * grid_size + (static_cast<long long>(dc.fi[2][i2]) * dc.nf[1] + dc.fi[1][i1]) * dc.nf[0] + dc.fi[0][i0];
  const long long m = t * nmodes + q;
  if (to_modes) {
    const C v = grid[g];
    f[m] = C{v.x * scale, v.y * scale};
  } else {
    const C v = f[m];
    grid[g] = C{v.x * scale, v.y * scale};
  }
}

size_t TileBytes(const int bs[3], int dim, int pad, size_t elem) {
  size_t cells = 1;
  for (int a = 0; a < dim; ++a) cells *= static_cast<size_t>(bs[a] + 2 * pad);
  return cells * elem;
}

int BlocksFor(long long n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

template <typename T>
class CudaNufftPlan final : public NufftPlanBase<T> {
  using NufftPlanBase<T>::setup_;
  using NufftPlanBase<T>::m_;
  using C = typename Vec2<T>::type;

 public:
  CudaNufftPlan(NufftSetup setup, const Stream& stream) : NufftPlanBase<T>(std::move(setup)), stream_(stream) {}

  absl::Status Init();
  absl::Status SetPoints(int64_t m, const T* x, const T* y, const T* z) override;
  absl::Status Execute(std::complex<T>* c, std::complex<T>* f) override;

 private:
  enum class SpreadMethod { kNone, kTile, kGlobal, kGather };  // kNone: type 2
  absl::StatusOr<std::shared_ptr<Buffer>> Alloc(size_t bytes) {
    return Buffer::Allocate(MemoryKind::kDevice, std::max<size_t>(bytes, 1), stream_.ordinal());
  }
  Points<T> points() const {
    Points<T> p;
    p.m = static_cast<int>(m_);
    for (int a = 0; a < 3; ++a) {
      p.cell[a] = static_cast<const int*>(cell_[a]->data());
      p.frac[a] = static_cast<const T*>(frac_[a]->data());
    }
    p.perm = static_cast<const int*>(perm_->data());
    return p;
  }
  absl::Status RunBatch(int count, const CufftBatchPlan<T>& fft, C* c, C* f);

  const Stream& stream_;
  Geo<T> geo_{};
  SpreadMethod method_ = SpreadMethod::kNone;
  size_t tile_bytes_ = 0;
  int nbins_ = 1;
  int batch_ = 1;
  std::unique_ptr<CufftBatchPlan<T>> fft_, fft_tail_;
  std::shared_ptr<Buffer> grid_, deconv_[3], fine_index_[3];
  // Points (sorted) and bins.
  std::shared_ptr<Buffer> cell_[3], frac_[3], perm_, bin_start_, sub_bin_, sub_begin_, sub_end_;
  int num_sub_ = 0;
};

template <typename T>
absl::Status CudaNufftPlan<T>::Init() {
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream_.ordinal()));
  const int dim = setup_.dim, w = setup_.kernel.width;
  geo_.dim = dim;
  geo_.w = w;
  geo_.pad = (w + 1) / 2;
  geo_.beta = static_cast<T>(setup_.kernel.beta);
  geo_.c = static_cast<T>(setup_.kernel.c);
  for (int a = 0; a < 3; ++a) {
    geo_.nf[a] = static_cast<int>(setup_.fine[a]);
    geo_.bs[a] = 1;
  }
  const bool gather = setup_.type == NufftType::kType1 && setup_.options.mode == ExecutionMode::kDeterministic;
  if (dim == 2) {
    geo_.bs[0] = geo_.bs[1] = 32;
  } else {
    geo_.bs[0] = geo_.bs[1] = 16;
    geo_.bs[2] = 8;
  }
  if (gather) {
    method_ = SpreadMethod::kGather;
  } else if (setup_.type == NufftType::kType1) {
    // Shrink 3-D bins until the tile fits; below 8 cells a side the halo
    // dominates and global atomics do better.
    while (TileBytes(geo_.bs, dim, geo_.pad, sizeof(C)) > kMaxTileBytes) {
      int* largest = std::max_element(geo_.bs, geo_.bs + dim);
      if (*largest <= 8) break;
      *largest /= 2;
    }
    tile_bytes_ = TileBytes(geo_.bs, dim, geo_.pad, sizeof(C));
    method_ = tile_bytes_ <= kMaxTileBytes ? SpreadMethod::kTile : SpreadMethod::kGlobal;
  }
  nbins_ = 1;
  for (int a = 0; a < 3; ++a) {
    geo_.nb[a] = (geo_.nf[a] + geo_.bs[a] - 1) / geo_.bs[a];
    nbins_ *= geo_.nb[a];
  }
  const size_t grid_bytes = static_cast<size_t>(setup_.fine_size()) * sizeof(C);
  batch_ = static_cast<int>(std::max<size_t>(
      1, std::min<size_t>(setup_.options.ntransforms, kMaxBatchGridBytes / std::max<size_t>(grid_bytes, 1))));
  TESSERA_ASSIGN_OR_RETURN(grid_, Alloc(grid_bytes * batch_));
  TESSERA_ASSIGN_OR_RETURN(fft_, CufftBatchPlan<T>::Create(setup_.fine, batch_, stream_));
  const int tail = setup_.options.ntransforms % batch_;
  if (tail != 0) {
    TESSERA_ASSIGN_OR_RETURN(fft_tail_, CufftBatchPlan<T>::Create(setup_.fine, tail, stream_));
  }
  for (int a = 0; a < 3; ++a) {
    const int64_t n = setup_.modes[a];
    std::vector<T> d(n);
    std::vector<int> fi(n);
    for (int64_t i = 0; i < n; ++i) {
      d[i] = static_cast<T>(setup_.deconv[a][i]);
      fi[i] = static_cast<int>(setup_.fine_index[a][i]);
    }
    TESSERA_ASSIGN_OR_RETURN(deconv_[a], Alloc(n * sizeof(T)));
    TESSERA_ASSIGN_OR_RETURN(fine_index_[a], Alloc(n * sizeof(int)));
    TESSERA_RETURN_IF_ERROR(
        CopyBytes(deconv_[a]->data(), MemoryKind::kDevice, d.data(), MemoryKind::kHost, n * sizeof(T), stream_));
    TESSERA_RETURN_IF_ERROR(CopyBytes(fine_index_[a]->data(), MemoryKind::kDevice, fi.data(), MemoryKind::kHost,
                                      n * sizeof(int), stream_));
  }
  if (method_ == SpreadMethod::kTile && tile_bytes_ > (48 << 10)) {
    auto kernel = dim == 2 ? SpreadTileKernel<T, 2> : SpreadTileKernel<T, 3>;
    TESSERA_CUDA_RETURN_IF_ERROR(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(tile_bytes_)));
  }
  // An empty point set until SetPoints.
  TESSERA_RETURN_IF_ERROR(SetPoints(0, nullptr, nullptr, nullptr));
  return stream_.Synchronize();
}

template <typename T>
absl::Status CudaNufftPlan<T>::SetPoints(int64_t m, const T* x, const T* y, const T* z) {
  const int dim = setup_.dim;
  if (m < 0) return absl::InvalidArgumentError(absl::StrCat("nufft: number of points must be >= 0, got ", m));
  if (m > std::numeric_limits<int>::max() - 1) {
    return absl::InvalidArgumentError(absl::StrCat("nufft: number of points must be < 2^31 on CUDA, got ", m));
  }
  const T* coords[3] = {x, y, dim == 3 ? z : nullptr};
  const char* names[3] = {"x", "y", "z"};
  for (int a = 0; a < dim; ++a) {
    if (m > 0 && coords[a] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("nufft: coordinate array ", names[a], " is null"));
    }
  }
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream_.ordinal()));
  cudaStream_t s = Native(stream_);
  const int mi = static_cast<int>(m);
  // Keys, values (double-buffered for the sort), the bad-index flag.
  TESSERA_ASSIGN_OR_RETURN(auto keys, Alloc(2 * sizeof(unsigned) * m));
  TESSERA_ASSIGN_OR_RETURN(auto vals, Alloc(sizeof(int) * m));
  TESSERA_ASSIGN_OR_RETURN(auto bad, Alloc(sizeof(unsigned long long)));
  TESSERA_ASSIGN_OR_RETURN(perm_, Alloc(sizeof(int) * m));
  unsigned* keys_in = static_cast<unsigned*>(keys->data());
  unsigned* keys_out = keys_in + m;
  int* vals_in = static_cast<int*>(vals->data());
  int* perm = static_cast<int*>(perm_->data());
  auto* first_bad = static_cast<unsigned long long*>(bad->data());
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(first_bad, 0xff, sizeof(unsigned long long), s));
  if (m > 0) {
    FoldKeysKernel<T><<<BlocksFor(m), kThreads, 0, s>>>(mi, x, y, dim == 3 ? z : nullptr, geo_, keys_in, vals_in,
                                                       first_bad);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("FoldKeysKernel");
  }
  int end_bit = 1;
  while ((1LL << end_bit) < nbins_) ++end_bit;
  size_t sort_bytes = 0;
  TESSERA_CUDA_RETURN_IF_ERROR(
      cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, keys_in, keys_out, vals_in, perm, mi, 0, end_bit, s));
  TESSERA_ASSIGN_OR_RETURN(auto sort_temp, Alloc(sort_bytes));
  if (m > 0) {
    TESSERA_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(sort_temp->data(), sort_bytes, keys_in, keys_out,
                                                                 vals_in, perm, mi, 0, end_bit, s));
  }
  // Sorted cells and fractions.
  for (int a = 0; a < 3; ++a) {
    TESSERA_ASSIGN_OR_RETURN(cell_[a], Alloc(a < dim ? sizeof(int) * m : 1));
    TESSERA_ASSIGN_OR_RETURN(frac_[a], Alloc(a < dim ? sizeof(T) * m : 1));
  }
  if (m > 0) {
    GatherPointsKernel<T><<<BlocksFor(m), kThreads, 0, s>>>(
        mi, x, y, dim == 3 ? z : nullptr, geo_, perm, static_cast<int*>(cell_[0]->data()),
        static_cast<int*>(cell_[1]->data()), static_cast<int*>(cell_[2]->data()), static_cast<T*>(frac_[0]->data()),
        static_cast<T*>(frac_[1]->data()), static_cast<T*>(frac_[2]->data()));
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("GatherPointsKernel");
  }
  TESSERA_ASSIGN_OR_RETURN(bin_start_, Alloc(sizeof(int) * (nbins_ + 1)));
  int* start = static_cast<int*>(bin_start_->data());
  BinStartsKernel<<<BlocksFor(m + 1), kThreads, 0, s>>>(mi, keys_out, nbins_, start);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("BinStartsKernel");
  // Subproblems (tile spreading only).
  num_sub_ = 0;
  if (method_ == SpreadMethod::kTile) {
    const int max_sub = nbins_ + mi / kMaxSubproblem + 1;
    TESSERA_ASSIGN_OR_RETURN(auto nsub, Alloc(2 * sizeof(int) * nbins_));
    int* nsub_p = static_cast<int*>(nsub->data());
    int* incl = nsub_p + nbins_;
    SubproblemCountKernel<<<BlocksFor(nbins_), kThreads, 0, s>>>(nbins_, start, nsub_p);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("SubproblemCountKernel");
    size_t scan_bytes = 0;
    TESSERA_CUDA_RETURN_IF_ERROR(cub::DeviceScan::InclusiveSum(nullptr, scan_bytes, nsub_p, incl, nbins_, s));
    TESSERA_ASSIGN_OR_RETURN(auto scan_temp, Alloc(scan_bytes));
    TESSERA_CUDA_RETURN_IF_ERROR(
        cub::DeviceScan::InclusiveSum(scan_temp->data(), scan_bytes, nsub_p, incl, nbins_, s));
    TESSERA_ASSIGN_OR_RETURN(sub_bin_, Alloc(sizeof(int) * max_sub));
    TESSERA_ASSIGN_OR_RETURN(sub_begin_, Alloc(sizeof(int) * max_sub));
    TESSERA_ASSIGN_OR_RETURN(sub_end_, Alloc(sizeof(int) * max_sub));
    SubproblemFillKernel<<<BlocksFor(nbins_), kThreads, 0, s>>>(nbins_, start, nsub_p, incl,
                                                                static_cast<int*>(sub_bin_->data()),
                                                                static_cast<int*>(sub_begin_->data()),
                                                                static_cast<int*>(sub_end_->data()));
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("SubproblemFillKernel");
    TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&num_sub_, incl + nbins_ - 1, sizeof(int), cudaMemcpyDeviceToHost, s));
  }
  unsigned long long bad_index = 0;
  TESSERA_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(&bad_index, first_bad, sizeof(bad_index), cudaMemcpyDeviceToHost, s));
  TESSERA_RETURN_IF_ERROR(stream_.Synchronize());  // also keeps temporaries alive until the work is done
  if (bad_index != std::numeric_limits<unsigned long long>::max()) {
    for (int a = 0; a < dim; ++a) {
      T v;
      TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpy(&v, coords[a] + bad_index, sizeof(T), cudaMemcpyDeviceToHost));
      if (!std::isfinite(static_cast<double>(v))) {
        m_ = 0;
        return absl::InvalidArgumentError(absl::StrCat("nufft: coordinate ", names[a], "[", bad_index,
                                                       "] = ", static_cast<double>(v), " is not finite"));
      }
    }
  }
  m_ = m;
  return absl::OkStatus();
}

template <typename T>
absl::Status CudaNufftPlan<T>::RunBatch(int count, const CufftBatchPlan<T>& fft, C* c, C* f) {
  cudaStream_t s = Native(stream_);
  const int dim = setup_.dim;
  const long long grid_size = setup_.fine_size(), nmodes = setup_.num_modes();
  C* grid = static_cast<C*>(grid_->data());
  const Points<T> p = points();
  Deconv<T> dc;
  for (int a = 0; a < 3; ++a) {
    dc.d[a] = static_cast<const T*>(deconv_[a]->data());
    dc.fi[a] = static_cast<const int*>(fine_index_[a]->data());
    dc.n[a] = static_cast<int>(setup_.modes[a]);
    dc.nf[a] = geo_.nf[a];
  }
  const dim3 mode_grid(BlocksFor(nmodes), count);
  if (setup_.type == NufftType::kType1) {
    if (method_ != SpreadMethod::kGather) {
      TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(grid, 0, sizeof(C) * grid_size * count, s));
    }
    if (m_ > 0 && method_ == SpreadMethod::kTile && num_sub_ > 0) {
      const dim3 blocks(num_sub_, count);
      const int* sb = static_cast<const int*>(sub_bin_->data());
      const int* s0 = static_cast<const int*>(sub_begin_->data());
      const int* s1 = static_cast<const int*>(sub_end_->data());
      if (dim == 2) {
        SpreadTileKernel<T, 2><<<blocks, kThreads, tile_bytes_, s>>>(geo_, p, sb, s0, s1, c, grid, grid_size);
      } else {
        SpreadTileKernel<T, 3><<<blocks, kThreads, tile_bytes_, s>>>(geo_, p, sb, s0, s1, c, grid, grid_size);
      }
      TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("SpreadTileKernel");
    } else if (m_ > 0 && method_ == SpreadMethod::kGlobal) {
      const dim3 blocks(BlocksFor(m_), count);
      if (dim == 2) {
        SpreadGlobalKernel<T, 2><<<blocks, kThreads, 0, s>>>(geo_, p, c, grid, grid_size);
      } else {
        SpreadGlobalKernel<T, 3><<<blocks, kThreads, 0, s>>>(geo_, p, c, grid, grid_size);
      }
      TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("SpreadGlobalKernel");
    } else if (method_ == SpreadMethod::kGather) {
      const dim3 blocks(nbins_, count);
      const int* start = static_cast<const int*>(bin_start_->data());
      if (dim == 2) {
        GatherSpreadKernel<T, 2><<<blocks, kThreads, 0, s>>>(geo_, p, start, c, grid, grid_size);
      } else {
        GatherSpreadKernel<T, 3><<<blocks, kThreads, 0, s>>>(geo_, p, start, c, grid, grid_size);
      }
      TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("GatherSpreadKernel");
    }
    TESSERA_RETURN_IF_ERROR(fft.Execute(reinterpret_cast<std::complex<T>*>(grid), setup_.options.sign));
    DeconvKernel<T><<<mode_grid, kThreads, 0, s>>>(dc, nmodes, grid_size, true, grid, f);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("DeconvKernel");
  } else {
    TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(grid, 0, sizeof(C) * grid_size * count, s));
    DeconvKernel<T><<<mode_grid, kThreads, 0, s>>>(dc, nmodes, grid_size, false, grid, f);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("DeconvKernel");
    TESSERA_RETURN_IF_ERROR(fft.Execute(reinterpret_cast<std::complex<T>*>(grid), setup_.options.sign));
    if (m_ > 0) {
      const dim3 blocks(BlocksFor(m_), count);
      if (dim == 2) {
        InterpKernel<T, 2><<<blocks, kThreads, 0, s>>>(geo_, p, grid, grid_size, c);
      } else {
        InterpKernel<T, 3><<<blocks, kThreads, 0, s>>>(geo_, p, grid, grid_size, c);
      }
      TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("InterpKernel");
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status CudaNufftPlan<T>::Execute(std::complex<T>* c, std::complex<T>* f) {
  if ((c == nullptr && m_ > 0) || f == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("nufft: Execute got a null ", f == nullptr ? "f" : "c"));
  }
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream_.ordinal()));
  const int nt = setup_.options.ntransforms;
  const int64_t nmodes = setup_.num_modes();
  for (int t0 = 0; t0 < nt; t0 += batch_) {
    const int count = std::min(batch_, nt - t0);
    const CufftBatchPlan<T>& fft = count == batch_ ? *fft_ : *fft_tail_;
    TESSERA_RETURN_IF_ERROR(RunBatch(count, fft, reinterpret_cast<C*>(c + t0 * m_),
                                     reinterpret_cast<C*>(f + t0 * nmodes)));
  }
  return absl::OkStatus();
}

}  // namespace

template <typename T>
absl::StatusOr<std::unique_ptr<NufftPlan<T>>> MakeNufftPlan(NufftSetup setup, const Stream& stream) {
  std::unique_ptr<CudaNufftPlan<T>> plan(new CudaNufftPlan<T>(std::move(setup), stream));
  TESSERA_RETURN_IF_ERROR(plan->Init());
  return std::unique_ptr<NufftPlan<T>>(std::move(plan));
}

template absl::StatusOr<std::unique_ptr<NufftPlan<float>>> MakeNufftPlan<float>(NufftSetup, const Stream&);
template absl::StatusOr<std::unique_ptr<NufftPlan<double>>> MakeNufftPlan<double>(NufftSetup, const Stream&);

}  // namespace cuda
}  // namespace nufft
}  // namespace recon
}  // namespace tessera

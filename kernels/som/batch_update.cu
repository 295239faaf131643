// CUDA batch update. Per epoch: a histogram of the BMUs (uint32 atomics,
// exact), blurred; then, per slab of features: uint32 scatter of the
// (feature, BMU) pairs from the CSC, conversion to fp32, k box-blur passes
// along x then k along y (x: one warp per row, an exact double prefix sum in
// shared memory and window differences; y: one thread per column, a running
// double window sum, reads and writes coalesced across threads), and a
// finalize: a (feature, node)-parallel pass divides by the blurred counts and
// writes fp32 or fp16 weights, then one thread per node accumulates ||w||^2
// of the stored weights in double in ascending feature order (the CPU order,
// so norms agree bitwise).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/som/batch_update.h"

namespace tessera {
namespace som {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlurSmem = 48 * 1024;

__device__ inline int64_t FloorDiv(int64_t a, int64_t n) {
  const int64_t q = a / n;
  return (a % n != 0 && a < 0) ? q - 1 : q;
}

__device__ inline int64_t Mod(int64_t a, int64_t n) {
  const int64_t r = a % n;
  return r < 0 ? r + n : r;
}

__global__ void HistogramKernel(const int32_t* __restrict__ bmu, int64_t n, uint32_t* __restrict__ hits) {
  for (int64_t d = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; d < n;
       d += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    atomicAdd(hits + bmu[d], 1u);
  }
}

// In place: the same 4 bytes read as uint32, written as float.
__global__ void U32ToFloatKernel(void* data, int64_t n) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint32_t u = static_cast<const uint32_t*>(data)[k];
    static_cast<float*>(data)[k] = static_cast<float>(u);
  }
}

// (feature, BMU) pairs of features [v0, v1): one thread per CSC entry.
__global__ void ScatterKernel(const int64_t* __restrict__ offsets, const int32_t* __restrict__ doc_ids,
                              const int32_t* __restrict__ bmu, int64_t v0, int64_t v1, int64_t m,
                              uint32_t* __restrict__ slab) {
  const int64_t k0 = offsets[v0], k1 = offsets[v1];
  for (int64_t k = k0 + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < k1;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // The feature owning entry k: the last v in [v0, v1) with offsets[v] <= k.
    int64_t lo = v0, hi = v1 - 1;
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (offsets[mid] <= k) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    atomicAdd(slab + (lo - v0) * m + bmu[doc_ids[k]], 1u);
  }
}

// Along x: one warp per row of w cells; rows = planes * h.
__global__ void BlurXKernel(const float* __restrict__ in, float* __restrict__ out, int64_t rows, int w, int b,
                            bool torus) {
  extern __shared__ double prefix_all[];  // per warp: w + 1 doubles
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  double* prefix = prefix_all + warp * (w + 1);
  for (int64_t row = blockIdx.x * static_cast<int64_t>(warps) + warp; row < rows;
       row += static_cast<int64_t>(gridDim.x) * warps) {
    const float* line = in + row * w;
    float* dst = out + row * w;
    double carry = 0.0;
    if (lane == 0) prefix[0] = 0.0;
    for (int base = 0; base < w; base += 32) {
      const int x = base + lane;
      double v = x < w ? static_cast<double>(line[x]) : 0.0;
#pragma unroll
      for (int off = 1; off < 32; off <<= 1) {
        const double o = __shfl_up_sync(0xffffffffu, v, off);
        if (lane >= off) v += o;
      }
      if (x < w) prefix[x + 1] = carry + v;
      carry += __shfl_sync(0xffffffffu, v, 31);
    }
    __syncwarp();
    const double total = prefix[w];
    for (int x = lane; x < w; x += 32) {
      double s;
      if (torus) {
        const int64_t hi = int64_t{x} + b + 1, lo = int64_t{x} - b;
        s = static_cast<double>(FloorDiv(hi, w) - FloorDiv(lo, w)) * total + prefix[Mod(hi, w)] - prefix[Mod(lo, w)];
      } else {
        const int hi = min(x + b + 1, w), lo = max(x - b, 0);
        s = prefix[hi] - prefix[lo];
      }
      dst[x] = static_cast<float>(s);
    }
    __syncwarp();
  }
}

// Along y, out of place: one thread per (plane, x) column of h cells.
__global__ void BlurYKernel(const float* __restrict__ in, float* __restrict__ out, int64_t planes, int w, int h,
                            int b, bool torus) {
  const int64_t columns = planes * w;
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < columns;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t p = c / w;
    const int x = static_cast<int>(c - p * w);
    const float* src = in + p * w * h + x;
    float* dst = out + p * w * h + x;
    double s = 0.0;
    if (torus) {
      double total = 0.0;
      for (int t = 0; t < h; ++t) total += src[int64_t{t} * w];
      const int64_t width = 2 * int64_t{b} + 1;
      s = static_cast<double>(width / h) * total;
      const int64_t rest = width % h;
      for (int64_t t = 0; t < rest; ++t) s += src[Mod(t - b, h) * w];
      for (int y = 0; y < h; ++y) {
        dst[int64_t{y} * w] = static_cast<float>(s);
        s += static_cast<double>(src[Mod(int64_t{y} + b + 1, h) * w]) - src[Mod(int64_t{y} - b, h) * w];
      }
    } else {
      const int first_end = min(b, h - 1);
      for (int t = 0; t <= first_end; ++t) s += src[int64_t{t} * w];
      for (int y = 0; y < h; ++y) {
        dst[int64_t{y} * w] = static_cast<float>(s);
        const int64_t add = int64_t{y} + b + 1, sub = int64_t{y} - b;
        if (add < h) s += src[add * w];
        if (sub >= 0) s -= src[sub * w];
      }
    }
  }
}

// The 3-tap kernel along one axis, out of place: c + a (l + r) with explicit
// rounding (no FMA), exactly the CPU's arithmetic.
__global__ void Tap3Kernel(const float* __restrict__ in, float* __restrict__ out, int64_t planes, int w, int h,
                           double a, bool torus, bool along_x) {
  const int64_t total = planes * w * h;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t plane = k / (int64_t{w} * h);
    const int64_t cell = k - plane * w * h;
    const int x = static_cast<int>(cell % w), y = static_cast<int>(cell / w);
    const int n = along_x ? w : h;
    const int c = along_x ? x : y;
    const int64_t stride = along_x ? 1 : w;
    const float* base = in + plane * w * h + (along_x ? int64_t{y} * w : x);
    double l = 0.0, r = 0.0;
    if (torus) {
      l = base[Mod(c - 1, n) * stride];
      r = base[Mod(c + 1, n) * stride];
    } else {
      if (c > 0) l = base[(c - 1) * stride];
      if (c + 1 < n) r = base[(c + 1) * stride];
    }
    const double side = __dadd_rn(l, r);
    out[k] = static_cast<float>(__dadd_rn(static_cast<double>(in[k]), __dmul_rn(a, side)));
  }
}

__device__ inline void StoreWeight(float* w, int64_t k, float value, double& stored) {
  w[k] = value;
  stored = value;
}
__device__ inline void StoreWeight(__half* w, int64_t k, float value, double& stored) {
  const __half h = __float2half_rn(value);
  w[k] = h;
  stored = __half2float(h);
}
__device__ inline double LoadWeight(const float* w, int64_t k) { return w[k]; }
__device__ inline double LoadWeight(const __half* w, int64_t k) { return __half2float(w[k]); }

// New weights of the slab's features: sums / blurred count, or unchanged where
// the count is 0; every (feature, node) on its own thread (the division and
// the stores were one thread per node before: 4096 threads at 64x64, 16 blocks
// on a 132-SM GPU, each looping over 16K features).
// kDrift (UpdateOptions::group_drift): each sum, once read, is replaced by
// the rise of its weight rounded up (group_bounds::WeightRise of new - old;
// 0 where it stays or falls), for GroupRiseKernel: no second codebook.
template <typename TW, bool kDrift>
__global__ void FinalizeWeightsKernel(float* __restrict__ sums, const float* __restrict__ counts,
                                      TW* __restrict__ w, int64_t v0, int64_t nv, int64_t m) {
  const int64_t total = nv * m;
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < total;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = j % m;
    const float c = counts[i];
    float rise = 0.0f;
    if (c > 0.0f) {
      double before = 0;
      if constexpr (kDrift) before = LoadWeight(w, v0 * m + j);
      double stored;
      StoreWeight(w, v0 * m + j, sums[j] / c, stored);
      if constexpr (kDrift) rise = group_bounds::WeightRise(stored - before);
    }
    if constexpr (kDrift) sums[j] = rise;
  }
}

// weight_rise[(v0 + v) G + g] = the largest rise of the group's weights of
// feature v0 + v (rises: the slab, as FinalizeWeightsKernel<kDrift> left it).
__global__ void GroupRiseKernel(const float* __restrict__ rises, int64_t nv, int64_t m, int64_t v0,
                                GroupDriftView drift) {
  const int64_t total = nv * drift.groups;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t v = t / drift.groups, g = t % drift.groups;
    const int64_t j0 = g * drift.strip_nodes, j1 = min(m, j0 + drift.strip_nodes);
    float largest = 0.0f;
    for (int64_t j = j0; j < j1; ++j) largest = fmaxf(largest, rises[v * m + j]);  // rises are >= 0 or +inf
    drift.weight_rise[(v0 + v) * drift.groups + g] = largest;
  }
}

// norm_change[g] = min over the group's nodes of NormChange(now, before).
__global__ void GroupNormChangeKernel(const float* __restrict__ now, const float* __restrict__ before, int64_t m,
                                      GroupDriftView drift) {
  const int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (g >= drift.groups) return;
  drift.norm_change[g] = group_bounds::GroupNormChange(now, before, g * drift.strip_nodes,
                                                       min(m, (g + 1) * drift.strip_nodes));
}

// ||w||^2 partials: one thread per node adds the slab's stored weights in
// ascending feature order in double (the CPU order, so norms agree bitwise).
// Loads only (no stores in the loop), unrolled so several are in flight.
template <typename TW>
__global__ void SlabNormsKernel(const TW* __restrict__ w, int64_t v0, int64_t nv, int64_t m,
                                double* __restrict__ norm_acc) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= m) return;
  double acc = norm_acc[i];
  const TW* p = w + v0 * m + i;
#pragma unroll 8
  for (int64_t v = 0; v < nv; ++v) {
    const double stored = LoadWeight(p, v * m);
    acc += stored * stored;
  }
  norm_acc[i] = acc;
}

__global__ void NormsKernel(const double* __restrict__ norm_acc, int64_t m, float* __restrict__ norms) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < m) norms[i] = static_cast<float>(norm_acc[i]);
}

unsigned GridFor(int64_t work, int64_t per_block, int64_t cap = int64_t{1} << 20) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(cap, (work + per_block - 1) / per_block)));
}

// k passes along x, then k along y (as on the CPU), or the 3-tap kernel along
// x then y, over `planes` planes held in `a`; `scratch` has the same size. The 2k out-of-place passes alternate
// between the buffers, so the result ends in `a`.
absl::Status Blur(float* a, float* scratch, int64_t planes, const GridShape& grid, const BoxBlur& blur,
                  cudaStream_t s) {
  const int w = grid.width, h = grid.height;
  const bool torus = grid.topology == Topology::kToroidal;
  if (planes > 0 && blur.half_width == 0 && blur.side_weight > 0) {
    const unsigned blocks = GridFor(planes * w * h, kThreads);
    Tap3Kernel<<<blocks, kThreads, 0, s>>>(a, scratch, planes, w, h, blur.side_weight, torus, true);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("Tap3Kernel");
    Tap3Kernel<<<blocks, kThreads, 0, s>>>(scratch, a, planes, w, h, blur.side_weight, torus, false);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("Tap3Kernel");
    return absl::OkStatus();
  }
  if (blur.half_width == 0 || blur.passes == 0 || planes == 0) return absl::OkStatus();
  const size_t per_warp = sizeof(double) * (w + 1);
  if (per_warp > static_cast<size_t>(kMaxBlurSmem)) {
    return absl::InvalidArgumentError(absl::StrCat("box blur: map width ", w, " exceeds the CUDA limit"));
  }
  const int warps = static_cast<int>(std::max<size_t>(1, std::min<size_t>(8, kMaxBlurSmem / per_warp)));
  const int64_t rows = planes * h;
  float* src = a;
  float* dst = scratch;
  for (int pass = 0; pass < blur.passes; ++pass) {
    BlurXKernel<<<GridFor(rows, warps), warps * 32, per_warp * warps, s>>>(src, dst, rows, w, blur.half_width,
                                                                            torus);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("BlurXKernel");
    std::swap(src, dst);
  }
  for (int pass = 0; pass < blur.passes; ++pass) {
    BlurYKernel<<<GridFor(planes * w, kThreads), kThreads, 0, s>>>(src, dst, planes, w, h, blur.half_width, torus);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("BlurYKernel");
    std::swap(src, dst);
  }
  return absl::OkStatus();
}

enum Slot {
  kSlotHits = 0,
  kSlotCountsScratch,
  kSlotNormAcc,
  kSlotSlabA,
  kSlotSlabB,
  kSlotPlanesScratch,
  kSlotOldNorms = 7,  // group drift: the norms before the update (6 is free; 8.. are the BMU search's)
};

template <typename TW>
void LaunchFinalize(bool drift, unsigned blocks, float* sums, const float* counts, TW* w, int64_t v0, int64_t nv,
                    int64_t m, cudaStream_t s) {
  if (drift) {
    FinalizeWeightsKernel<TW, true><<<blocks, kThreads, 0, s>>>(sums, counts, w, v0, nv, m);
  } else {
    FinalizeWeightsKernel<TW, false><<<blocks, kThreads, 0, s>>>(sums, counts, w, v0, nv, m);
  }
}

}  // namespace

absl::Status BatchUpdate(const Stream& stream, const CscView& docs, const int32_t* bmu, const GridShape& grid,
                         const BoxBlur& blur, const CodebookView& codebook, SomWorkspace* workspace,
                         const UpdateOptions& options) {
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  SomWorkspace local;
  SomWorkspace& ws = workspace != nullptr ? *workspace : local;
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  const int64_t m = grid.nodes(), v_count = codebook.features;

  // Blurred counts (the hits buffer becomes the fp32 counts plane in place).
  TESSERA_ASSIGN_OR_RETURN(void* hits_raw, ws.Slot(kSlotHits, sizeof(uint32_t) * m, stream));
  TESSERA_ASSIGN_OR_RETURN(void* counts_scratch, ws.Slot(kSlotCountsScratch, sizeof(float) * m, stream));
  TESSERA_ASSIGN_OR_RETURN(void* norm_raw, ws.Slot(kSlotNormAcc, sizeof(double) * m, stream));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(hits_raw, 0, sizeof(uint32_t) * m, s));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(norm_raw, 0, sizeof(double) * m, s));
  if (docs.docs > 0) {
    HistogramKernel<<<GridFor(docs.docs, kThreads, 4096), kThreads, 0, s>>>(bmu, docs.docs,
                                                                           static_cast<uint32_t*>(hits_raw));
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("HistogramKernel");
  }
  U32ToFloatKernel<<<GridFor(m, kThreads, 4096), kThreads, 0, s>>>(hits_raw, m);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("U32ToFloatKernel");
  float* counts = static_cast<float*>(hits_raw);
  TESSERA_RETURN_IF_ERROR(Blur(counts, static_cast<float*>(counts_scratch), 1, grid, blur, s));
  double* norm_acc = static_cast<double*>(norm_raw);
  const GroupDriftView& drift = options.group_drift;
  const bool with_drift = drift.weight_rise != nullptr;
  float* old_norms = nullptr;
  if (with_drift) {
    TESSERA_ASSIGN_OR_RETURN(void* old_raw, ws.Slot(kSlotOldNorms, sizeof(float) * m, stream));
    old_norms = static_cast<float*>(old_raw);
    TESSERA_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(old_norms, codebook.sq_norms, sizeof(float) * m, cudaMemcpyDeviceToDevice, s));
  }

  const int64_t slab = std::max<int64_t>(
      1, std::min<int64_t>(v_count, options.slab_bytes / static_cast<int64_t>(sizeof(float) * m)));
  if (v_count > 0) {
    TESSERA_ASSIGN_OR_RETURN(void* slab_a, ws.Slot(kSlotSlabA, sizeof(float) * slab * m, stream));
    TESSERA_ASSIGN_OR_RETURN(void* slab_b, ws.Slot(kSlotSlabB, sizeof(float) * slab * m, stream));
    for (int64_t v0 = 0; v0 < v_count; v0 += slab) {
      const int64_t nv = std::min(slab, v_count - v0);
      TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(slab_a, 0, sizeof(uint32_t) * nv * m, s));
      ScatterKernel<<<1024, kThreads, 0, s>>>(
          docs.offsets, docs.doc_ids, bmu, v0, v0 + nv, m, static_cast<uint32_t*>(slab_a));
      TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("ScatterKernel");
      U32ToFloatKernel<<<GridFor(nv * m, kThreads, 8192), kThreads, 0, s>>>(slab_a, nv * m);
      TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("U32ToFloatKernel");
      TESSERA_RETURN_IF_ERROR(
          Blur(static_cast<float*>(slab_a), static_cast<float*>(slab_b), nv, grid, blur, s));
      const unsigned weight_blocks = GridFor(nv * m, kThreads, 8192);
      float* sums = static_cast<float*>(slab_a);
      if (codebook.type == WeightType::kFloat32) {
        float* w = static_cast<float*>(codebook.weights);
        LaunchFinalize<float>(with_drift, weight_blocks, sums, counts, w, v0, nv, m, s);
        TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("FinalizeWeightsKernel");
        SlabNormsKernel<float><<<GridFor(m, kThreads), kThreads, 0, s>>>(w, v0, nv, m, norm_acc);
      } else {
        __half* w = static_cast<__half*>(codebook.weights);
        LaunchFinalize<__half>(with_drift, weight_blocks, sums, counts, w, v0, nv, m, s);
        TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("FinalizeWeightsKernel");
        SlabNormsKernel<__half><<<GridFor(m, kThreads), kThreads, 0, s>>>(w, v0, nv, m, norm_acc);
      }
      TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("SlabNormsKernel");
      if (with_drift) {
        GroupRiseKernel<<<GridFor(nv * drift.groups, kThreads, 8192), kThreads, 0, s>>>(sums, nv, m, v0, drift);
        TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("GroupRiseKernel");
      }
    }
  }
  NormsKernel<<<GridFor(m, kThreads), kThreads, 0, s>>>(norm_acc, m, codebook.sq_norms);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("NormsKernel");
  if (with_drift) {
    GroupNormChangeKernel<<<GridFor(drift.groups, kThreads), kThreads, 0, s>>>(codebook.sq_norms, old_norms, m, drift);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("GroupNormChangeKernel");
  }
  if (workspace == nullptr) TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return absl::OkStatus();
}

absl::Status BoxBlurPlanes(const Stream& stream, float* planes, int64_t num_planes, const GridShape& grid,
                           const BoxBlur& blur, SomWorkspace* workspace) {
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  SomWorkspace local;
  SomWorkspace& ws = workspace != nullptr ? *workspace : local;
  TESSERA_ASSIGN_OR_RETURN(void* scratch,
                           ws.Slot(kSlotPlanesScratch, sizeof(float) * num_planes * grid.nodes(), stream));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  TESSERA_RETURN_IF_ERROR(Blur(planes, static_cast<float*>(scratch), num_planes, grid, blur, s));
  if (workspace == nullptr) TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace som
}  // namespace tessera

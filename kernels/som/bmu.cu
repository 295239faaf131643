// CUDA BMU search: the tiled feature-major kernel (and its node-major twin),
// the cuSPARSE SpMM baselines with a separate top-2 pass, and ||w||^2.
//
// Tiled kernel: one block per (tile of up to 32 documents, 512-node chunk),
// tiles fastest so resident blocks share a chunk's feature columns in L2. Each
// of the 256 threads owns two adjacent nodes and, for every distinct feature
// of the tile (ascending), loads the two weights once (one coalesced 8-byte
// fp32 / 4-byte fp16 load in feature-major layout; 8 entries in flight) and
// adds them to the shared-memory accumulators of each document whose mask bit
// is set. Then each warp scores its documents (||w||^2 - 2 x.w) over the chunk
// and writes a warp-reduced top-2 per (chunk, document); a merge kernel takes
// the top-2 over chunks. Documents go in launches sized so these partials stay
// under 256 MiB. Shared memory: 32 x 512 fp32 accumulators (64 KiB, opted in).
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cusparse.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/som/bmu.h"
#include "kernels/som/bmu_cuda_internal.h"
#include "kernels/som/bmu_device.cuh"

namespace tessera {
namespace som {
namespace cuda {
namespace {

using bmu_device::LoadQuad;
using bmu_device::WarpMergeTop2;
using bmu_device::Widen;
using bmu_device::WriteTop2;
using internal::kWarpPartialsBytes;
using internal::kWarpPartialsSlot;

constexpr int kThreads = internal::kBmuThreads;
constexpr int kWarps = kThreads / 32;
constexpr int kPair = 2;                  // adjacent nodes per thread
constexpr int kChunk = kThreads * kPair;  // nodes per sweep step
constexpr size_t kTiledSmem = sizeof(float) * kTileDocs * kChunk;
// cuSPARSE baselines: documents per SpMM batch so the dense score block stays
// under this many bytes.
constexpr size_t kCusparseBlockBytes = size_t{1} << 30;

#define TESSERA_CUSPARSE_RETURN_IF_ERROR(expr)                                                    \
  do {                                                                                            \
    cusparseStatus_t tessera_sp_ = (expr);                                                        \
    if (tessera_sp_ != CUSPARSE_STATUS_SUCCESS) {                                                 \
      return absl::InternalError(absl::StrCat(#expr, ": ", cusparseGetErrorString(tessera_sp_))); \
    }                                                                                             \
  } while (0)

// Weights of feature v at nodes n and n + 1 (n even); zero past the last node.
template <typename TW, bool kFeatureMajor>
__device__ inline void LoadPair(const TW* __restrict__ w, int64_t m, int64_t v_count, bool vec, int32_t v,
                                int64_t n, float& a, float& b) {
  if (kFeatureMajor) {
    const TW* p = w + static_cast<int64_t>(v) * m + n;
    if (vec && n + 1 < m) {
      if constexpr (sizeof(TW) == 4) {
        const float2 q = __ldg(reinterpret_cast<const float2*>(p));
        a = q.x;
        b = q.y;
      } else {
        const __half2 q = *reinterpret_cast<const __half2*>(p);
        a = __low2float(q);
        b = __high2float(q);
      }
      return;
    }
    a = n < m ? Widen(p[0]) : 0.0f;
    b = n + 1 < m ? Widen(p[1]) : 0.0f;
  } else {
    a = n < m ? Widen(w[n * v_count + v]) : 0.0f;
    b = n + 1 < m ? Widen(w[(n + 1) * v_count + v]) : 0.0f;
  }
}

struct TiledArgs {
  int64_t tile0;        // first tile of this launch (blockIdx.x = tile - tile0)
  int64_t tiles;        // tiles in this launch
  const int64_t* doc_begin;
  const int64_t* entry_begin;
  const int32_t* features;
  const uint32_t* masks;
  const void* weights;
  const float* norms;
  int64_t m;
  int64_t v_count;
  Top2* partials;       // [chunk][tile - tile0][kTileDocs]
};

// One block per (tile, node chunk); blockIdx.x (the tile) runs fastest, so the
// blocks resident at any moment share one chunk and its feature columns stay in
// L2 (a block sweeping every chunk of its tile, as before, re-read the codebook
// from HBM once per ~400 resident tiles). kDepth: tile entries whose weights are
// loaded before any is applied (more loads in flight per thread). The order in
// which each document's sum is formed (ascending features, from 0) never
// changes, so scores stay bit-identical to the CPU backend.
template <typename TW, bool kFeatureMajor, int kDepth>
__global__ void __launch_bounds__(kThreads) TiledBmuKernel(TiledArgs a) {
  extern __shared__ float acc[];  // [kTileDocs][kChunk]
  const TW* __restrict__ w = static_cast<const TW*>(a.weights);
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int col = kPair * tid;
  const bool vec = kFeatureMajor && (a.m % 2 == 0);
  const int64_t tile = a.tile0 + blockIdx.x;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * kChunk;
  const int64_t d0 = a.doc_begin[tile];
  const int nd = static_cast<int>(a.doc_begin[tile + 1] - d0);
  const int64_t e0 = a.entry_begin[tile];
  const int64_t e1 = a.entry_begin[tile + 1];
  // Each thread touches only its own two columns: no barrier between zeroing
  // and accumulating.
  for (int j = 0; j < nd; ++j) *reinterpret_cast<float2*>(acc + j * kChunk + col) = make_float2(0.0f, 0.0f);
  const int64_t n = c0 + col;
  for (int64_t e = e0; e < e1; e += kDepth) {
    float w0[kDepth], w1[kDepth];
    uint32_t masks[kDepth];
#pragma unroll
    for (int u = 0; u < kDepth; ++u) {
      if (e + u < e1) {
        masks[u] = __ldg(a.masks + e + u);
        LoadPair<TW, kFeatureMajor>(w, a.m, a.v_count, vec, __ldg(a.features + e + u), n, w0[u], w1[u]);
      } else {
        masks[u] = 0;
        w0[u] = w1[u] = 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < kDepth; ++u) {
      uint32_t mask = masks[u];
      while (mask != 0) {
        const int j = __ffs(mask) - 1;
        mask &= mask - 1;
        float2* p = reinterpret_cast<float2*>(acc + j * kChunk + col);
        float2 cur = *p;
        cur.x += w0[u];
        cur.y += w1[u];
        *p = cur;
      }
    }
  }
  __syncthreads();
  // Top-2 of the chunk: one warp per document.
  Top2* out = a.partials + (static_cast<int64_t>(blockIdx.y) * a.tiles + blockIdx.x) * kTileDocs;
  for (int j = warp; j < nd; j += kWarps) {
    Top2 t = Top2::Empty();
    const float* row = acc + j * kChunk;
    for (int l = lane; l < kChunk; l += 32) {
      const int64_t node = c0 + l;
      if (node >= a.m) break;
      t.Insert(__ldg(a.norms + node) - 2.0f * row[l], static_cast<int32_t>(node));
    }
    WarpMergeTop2(t);
    if (lane == 0) out[j] = t;
  }
}

// Per document of the launch's tiles: the top-2 over all chunks.
__global__ void MergeTilePartialsKernel(const Top2* __restrict__ partials, int64_t tile0, int64_t tiles, int chunks,
                                        const int64_t* __restrict__ doc_begin, int32_t* bmu, int32_t* second,
                                        float* score) {
  const int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (p >= tiles * kTileDocs) return;
  const int64_t tile = tile0 + p / kTileDocs;
  const int j = static_cast<int>(p % kTileDocs);
  const int64_t d0 = doc_begin[tile];
  if (j >= doc_begin[tile + 1] - d0) return;
  const int64_t stride = tiles * kTileDocs;
  Top2 t = partials[p];
  for (int c = 1; c < chunks; ++c) t.Merge(partials[c * stride + p]);
  WriteTop2(t, d0 + j, bmu, second, score);
}

// ---------------------------------------------------------------------------
// Warp kernel (the default for kFeatureMajor/kNodeMajor on CUDA): one warp per
// (document, group of nodes). Each lane owns 4 adjacent nodes and keeps their
// dot products in registers: for every feature of the document (ascending) it
// loads the 4 weights with one 16-byte (fp32) / 8-byte (fp16) load — a warp
// reads 128 consecutive weights of the column, coalesced — and adds them; it
// folds the scores into a lane-local top-2, and the warp merges the lanes'
// top-2 once per group. No shared memory and no N x M score matrix; blocks
// with the same group run together (documents fastest), so the group's columns
// stay in L2; the 8 documents of a block share L1. Per-(group, document) top-2
// partials are merged by MergePartialsKernel. With an order (documents sorted
// by their previous BMU, bmu_order.cu) warps take documents through it and
// the merge writes each result back to its document.

constexpr int kMaxLaneNodes = 8;  // nodes per lane: 4 (default) or 8 (BmuTuning::warp_lane_nodes)
constexpr int kWarpDepth = 4;     // features whose loads are issued before any add

struct WarpArgs {
  int64_t d0;  // first position of the launch
  int64_t nb;  // positions (documents) in the launch
  const int32_t* order;  // position -> document (BmuTuning::order_by_previous_bmu); null: the identity
  const int64_t* offsets;
  const int32_t* indices;
  const void* weights;
  const float* norms;
  int64_t m;
  int64_t v_count;
  int64_t group_nodes;  // multiple of 32 x nodes per lane
  Top2* partials;       // [group][document - d0]
};

template <typename TW, bool kFeatureMajor, bool kVec, int kLane>
__global__ void __launch_bounds__(kThreads) WarpBmuKernel(WarpArgs a) {
  static_assert(kLane % 4 == 0 && kLane <= kMaxLaneNodes, "lane nodes: 4 or 8");
  constexpr int kSpan = 32 * kLane;  // nodes per warp step
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int64_t local = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (local >= a.nb) return;  // whole warp
  const TW* __restrict__ w = static_cast<const TW*>(a.weights);
  const int64_t d = a.order != nullptr ? a.order[a.d0 + local] : a.d0 + local;
  const int64_t off = a.offsets[d];
  const int nnz = static_cast<int>(a.offsets[d + 1] - off);
  const int64_t g0 = static_cast<int64_t>(blockIdx.y) * a.group_nodes;
  const int64_t g1 = g0 + a.group_nodes < a.m ? g0 + a.group_nodes : a.m;
  const int32_t first = lane < nnz ? __ldg(a.indices + off + lane) : 0;  // features 0..31, one per lane
  Top2 t = Top2::Empty();
  for (int64_t base = g0; base < g1; base += kSpan) {
    const int64_t n0 = base + kLane * lane;
    float acc[kLane];
#pragma unroll
    for (int c = 0; c < kLane; ++c) acc[c] = 0.0f;
    for (int k0 = 0; k0 < nnz; k0 += 32) {
      const int32_t mine = k0 == 0 ? first : (k0 + lane < nnz ? __ldg(a.indices + off + k0 + lane) : 0);
      const int count = nnz - k0 < 32 ? nnz - k0 : 32;
      for (int k = 0; k < count; k += kWarpDepth) {
        float q[kWarpDepth][kLane];
#pragma unroll
        for (int u = 0; u < kWarpDepth; ++u) {
          const int32_t v = __shfl_sync(0xffffffffu, mine, (k + u) & 31);
          if (k + u < count) {
#pragma unroll
            for (int h = 0; h < kLane; h += 4) LoadQuad<TW, kFeatureMajor, kVec>(w, a.m, a.v_count, v, n0 + h, &q[u][h]);
          }
        }
        // Adds in ascending feature order, as the CPU backend.
#pragma unroll
        for (int u = 0; u < kWarpDepth; ++u) {
          if (k + u < count) {
#pragma unroll
            for (int c = 0; c < kLane; ++c) acc[c] += q[u][c];
          }
        }
      }
    }
#pragma unroll
    for (int c = 0; c < kLane; ++c) {
      const int64_t node = n0 + c;
      if (node < g1) t.Insert(__ldg(a.norms + node) - 2.0f * acc[c], static_cast<int32_t>(node));
    }
  }
  WarpMergeTop2(t);
  if (lane == 0) a.partials[static_cast<int64_t>(blockIdx.y) * a.nb + local] = t;
}

// ---------------------------------------------------------------------------
// Register-span form of the warp kernel (BmuTuning::warp_register_spans,
// issue 16; feature-major). Per (document, feature, 128 fp32 nodes) the form
// above issues a shuffle, two bounds tests, a 64-bit multiply and adds for the
// column address, one 16-byte load, 4 adds and the loop test (~20 PTX
// instructions per lane); here a lane owns kSpans 16-byte spans 128 (fp32) /
// 256 (fp16) nodes apart, so one shuffle and one 32x32->64 multiply serve
// kSpans loads at constant offsets, with no bounds test inside the map (4
// fp32 spans: 28 per feature, 7 per 128 nodes). Every warp load still reads
// 512 contiguous bytes. The
// norms come 16 bytes at a time, and a score only enters the lane's top-2
// when it is not above the second best (the lane visits its nodes in
// ascending order, as the CPU scan). A warp takes `rounds` documents in turn:
// in each round the block's 8 warps take 8 neighbouring positions of the
// visiting order, so sorted documents re-read shared columns from L1. Each
// node's sum is still formed in ascending feature order from 0 (same bits).

struct SpanArgs {
  int64_t d0;             // first position of the launch
  int64_t nb;             // positions in the launch
  int rounds;             // documents per warp
  const int32_t* order;   // position -> document; null: the identity
  const int64_t* offsets;
  const int32_t* indices;
  const void* weights;
  const float* norms;
  int64_t m;
  int64_t group_nodes;    // multiple of kSpans x the nodes of one warp span
  Top2* partials;         // [group][position - d0]
};

// 16 bytes of column `col` from node n (n % nodes-per-16-bytes == 0); zero
// bits (+0.0) past the last node. kVec: m is a multiple of the nodes per
// 16 bytes and the column 16-byte aligned, so one load.
template <typename TW, bool kVec>
__device__ inline uint4 LoadSpan(const TW* __restrict__ col, int64_t m, int64_t n) {
  constexpr int kQ = 16 / sizeof(TW);
  if constexpr (kVec) {
    return n < m ? __ldg(reinterpret_cast<const uint4*>(col + n)) : make_uint4(0, 0, 0, 0);
  } else {
    uint32_t bits[4] = {0, 0, 0, 0};
#pragma unroll
    for (int c = 0; c < kQ; ++c) {
      if (n + c < m) {
        if constexpr (sizeof(TW) == 4) {
          bits[c] = __float_as_uint(__ldg(col + n + c));
        } else {
          bits[c / 2] |= static_cast<uint32_t>(__half_as_ushort(__ldg(col + n + c))) << (16 * (c % 2));
        }
      }
    }
    return make_uint4(bits[0], bits[1], bits[2], bits[3]);
  }
}

// acc[c] += the c-th weight of the span (fp16 widened exactly to fp32 first,
// as the CPU backend's table).
template <typename TW>
__device__ inline void AddSpan(const uint4& raw, float* acc) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if constexpr (sizeof(TW) == 4) {
      acc[k] += __uint_as_float(words[k]);
    } else {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&words[k]));
      acc[2 * k] += f.x;
      acc[2 * k + 1] += f.y;
    }
  }
}

// Column v's byte offset: one 32x32->64-bit multiply (IMAD.WIDE.U32);
// written out because the compiler otherwise widened col_bytes once and
// multiplied in 64 bits per load.
__device__ inline uint64_t ColumnOffset(int32_t v, uint32_t col_bytes) {
  uint64_t r;
  asm("mul.wide.u32 %0, %1, %2;" : "=l"(r) : "r"(static_cast<uint32_t>(v)), "r"(col_bytes));
  return r;
}

// Adds the document's feature columns (ascending, as the CPU backend) to a
// lane's accumulators for the pass whose first lane node is n0. kFull (every
// span of the pass inside the map, 16-byte loads): one shuffle and one
// multiply-add (the column's byte address; SpanBmus checks that a column's
// bytes fit 32 bits) serve all kSpans loads, which sit 512 bytes apart, with
// no bounds test. Otherwise (the map's last pass, or nodes not a multiple of
// 4 / 8) LoadSpan tests each span. kDepth features are loaded before any is
// added (kDepth x kSpans = 4 loads in flight, as the form above).
template <typename TW, bool kVec, int kSpans, bool kFull>
__device__ inline void AccumulateSpans(const SpanArgs& a, const TW* __restrict__ w, int64_t n0, int64_t off, int nnz,
                                       int32_t first, int lane, float (&acc)[kSpans][16 / sizeof(TW)]) {
  static_assert(!kFull || kVec, "the unchecked path loads 16 bytes");
  constexpr int kWarpSpan = 32 * (16 / static_cast<int>(sizeof(TW)));
  constexpr int kDepth = kSpans >= 4 ? 1 : 4 / kSpans;
  const char* lane_base = reinterpret_cast<const char*>(w + n0);
  const uint32_t col_bytes = static_cast<uint32_t>(a.m * static_cast<int64_t>(sizeof(TW)));
  for (int k0 = 0; k0 < nnz; k0 += 32) {
    const int32_t mine = k0 == 0 ? first : (k0 + lane < nnz ? __ldg(a.indices + off + k0 + lane) : 0);
    const int count = nnz - k0 < 32 ? nnz - k0 : 32;
    // The features k .. k + kDepth - 1 (lanes past count: don't care).
    auto features = [&](int32_t (&v)[kDepth], int k) {
#pragma unroll
      for (int u = 0; u < kDepth; ++u) v[u] = __shfl_sync(0xffffffffu, mine, (k + u) & 31);
    };
    // Their loads (those below count).
    auto load = [&](uint4 (&raw)[kDepth][kSpans], const int32_t (&v)[kDepth], int k) {
#pragma unroll
      for (int u = 0; u < kDepth; ++u) {
        if (k + u < count) {
          if constexpr (kFull) {
            const uint4* p = reinterpret_cast<const uint4*>(lane_base + ColumnOffset(v[u], col_bytes));
#pragma unroll
            for (int s = 0; s < kSpans; ++s) raw[u][s] = __ldg(p + 32 * s);
          } else {
            const TW* col = w + static_cast<int64_t>(v[u]) * a.m;
#pragma unroll
            for (int s = 0; s < kSpans; ++s) raw[u][s] = LoadSpan<TW, kVec>(col, a.m, n0 + s * kWarpSpan);
          }
        }
      }
    };
    // Their adds, in ascending feature order (as the CPU backend).
    auto add = [&](const uint4 (&raw)[kDepth][kSpans], int k) {
#pragma unroll
      for (int u = 0; u < kDepth; ++u) {
        if (k + u < count) {
#pragma unroll
          for (int s = 0; s < kSpans; ++s) AddSpan<TW>(raw[u][s], acc[s]);
        }
      }
    };
    // Not unrolled further: kDepth x kSpans loads in flight is the design
    // (unrolled, 4 fp32 spans took 135 registers).
#pragma unroll 1
    for (int k = 0; k < count; k += kDepth) {
      int32_t v[kDepth];
      uint4 raw[kDepth][kSpans];
      features(v, k);
      load(raw, v, k);
      add(raw, k);
    }
  }
}

// Blocks per SM the register budget must allow (ptxas -v, sm_90, no spills):
// up to 8 accumulators per lane fit in 64 registers (4 blocks, 32 warps; the
// default form takes 48: 5 blocks); 16 (4 fp32 / 2 fp16 spans) take 72 / 78
// and spilled under a 64 cap, so 3 blocks (24 warps). The scalar-load path
// (nodes not a multiple of 4 / 8) gets 2.
template <typename TW, bool kVec, int kSpans>
constexpr int SpanMinBlocks() {
  return !kVec ? 2 : kSpans * (16 / static_cast<int>(sizeof(TW))) >= 16 ? 3 : 4;
}

// The same warps per SM in blocks of kBlockWarps (BmuTuning::warp_block_warps;
// at least one block): 24 warps of the 16-accumulator forms as one block.
template <typename TW, bool kVec, int kSpans, int kBlockWarps>
constexpr int SpanMinBlocksOf() {
  return SpanMinBlocks<TW, kVec, kSpans>() * kWarps / kBlockWarps > 0
             ? SpanMinBlocks<TW, kVec, kSpans>() * kWarps / kBlockWarps
             : 1;
}

// (Document headers loaded a batch of 32 rounds ahead, with the next round's
// first indices and the next feature's shuffle issued early, were removed
// after no end-to-end gain on the H100, 2026-12-07 round 7: 64x64 on 29.9 M
// documents 12.01 vs 11.98 s; BMU rows -2 % .. +5 %.)
template <typename TW, bool kVec, int kSpans, int kBlockWarps>
__global__ void __launch_bounds__(32 * kBlockWarps, (SpanMinBlocksOf<TW, kVec, kSpans, kBlockWarps>()))
    SpanBmuKernel(SpanArgs a) {
  constexpr int kQ = 16 / sizeof(TW);         // nodes per lane per span
  constexpr int kWarpSpan = 32 * kQ;          // nodes per warp load
  constexpr int kPass = kSpans * kWarpSpan;   // nodes per pass over the features
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const TW* __restrict__ w = static_cast<const TW*>(a.weights);
  const int64_t g0 = static_cast<int64_t>(blockIdx.y) * a.group_nodes;
  const int64_t g1 = g0 + a.group_nodes < a.m ? g0 + a.group_nodes : a.m;
  for (int r = 0; r < a.rounds; ++r) {
    const int64_t local = (static_cast<int64_t>(blockIdx.x) * a.rounds + r) * kBlockWarps + warp;
    if (local >= a.nb) return;  // whole warp; positions only grow with r
    const int64_t d = a.order != nullptr ? a.order[a.d0 + local] : a.d0 + local;
    const int64_t off = a.offsets[d];
    const int nnz = static_cast<int>(a.offsets[d + 1] - off);
    const int32_t first = lane < nnz ? __ldg(a.indices + off + lane) : 0;  // features 0..31, one per lane
    Top2 t = Top2::Empty();
    for (int64_t base = g0; base < g1; base += kPass) {
      const int64_t n0 = base + kQ * lane;  // this lane's first node
      float acc[kSpans][kQ];
#pragma unroll
      for (int s = 0; s < kSpans; ++s) {
#pragma unroll
        for (int c = 0; c < kQ; ++c) acc[s][c] = 0.0f;
      }
      if (kVec && base + kPass <= a.m) {  // the same for the whole warp
        AccumulateSpans<TW, kVec, kSpans, kVec>(a, w, n0, off, nnz, first, lane, acc);
      } else {
        AccumulateSpans<TW, kVec, kSpans, false>(a, w, n0, off, nnz, first, lane, acc);
      }
#pragma unroll
      for (int s = 0; s < kSpans; ++s) {
        const int64_t ns = n0 + s * kWarpSpan;
        float norm[kQ] = {};
        if constexpr (kVec) {
          if (ns < g1) {
#pragma unroll
            for (int c = 0; c < kQ; c += 4) {
              const float4 q = __ldg(reinterpret_cast<const float4*>(a.norms + ns + c));
              norm[c] = q.x;
              norm[c + 1] = q.y;
              norm[c + 2] = q.z;
              norm[c + 3] = q.w;
            }
          }
        } else {
#pragma unroll
          for (int c = 0; c < kQ; ++c) norm[c] = ns + c < g1 ? __ldg(a.norms + ns + c) : 0.0f;
        }
#pragma unroll
        for (int c = 0; c < kQ; ++c) {
          const float score = norm[c] - 2.0f * acc[s][c];
          // Insert would leave t unchanged when score > t.s2 (or NaN).
          if (ns + c < g1 && score <= t.s2) t.Insert(score, static_cast<int32_t>(ns + c));
        }
      }
    }
    WarpMergeTop2(t);
    if (lane == 0) a.partials[static_cast<int64_t>(blockIdx.y) * a.nb + local] = t;
  }
}

template <typename TW, bool kVec, int kSpans, int kBlockWarps>
absl::Status LaunchSpanKernel(const SpanArgs& args, int groups, cudaStream_t s) {
  auto kernel = SpanBmuKernel<TW, kVec, kSpans, kBlockWarps>;
  // No shared memory: ask for the largest L1 (it holds the columns that
  // neighbouring documents share).
  TESSERA_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxL1));
  const int64_t per_block = int64_t{kBlockWarps} * args.rounds;
  const dim3 grid(static_cast<unsigned>((args.nb + per_block - 1) / per_block), static_cast<unsigned>(groups));
  kernel<<<grid, 32 * kBlockWarps, 0, s>>>(args);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("SpanBmuKernel");
  return absl::OkStatus();
}

// Larger blocks only for the 16-byte-load forms (the scalar path keeps 8
// warps).
template <typename TW, bool kVec, int kSpans>
absl::Status LaunchSpanBlock(const SpanArgs& args, int groups, int block_warps, cudaStream_t s) {
  if constexpr (kVec) {
    switch (block_warps) {
      case 16:
        return LaunchSpanKernel<TW, kVec, kSpans, 16>(args, groups, s);
      case 24:
        return LaunchSpanKernel<TW, kVec, kSpans, 24>(args, groups, s);
      case 32:
        return LaunchSpanKernel<TW, kVec, kSpans, 32>(args, groups, s);
      default:
        return LaunchSpanKernel<TW, kVec, kSpans, kWarps>(args, groups, s);
    }
  }
  return LaunchSpanKernel<TW, kVec, kSpans, kWarps>(args, groups, s);
}

template <typename TW, bool kVec>
absl::Status LaunchSpan(const SpanArgs& args, int groups, int spans, int block_warps, cudaStream_t s) {
  switch (spans) {
    case 4:
      // fp16: 4 spans (32 accumulators per lane) spill; SpanBmus passes 2.
      if constexpr (sizeof(TW) == 4) return LaunchSpanBlock<TW, kVec, 4>(args, groups, block_warps, s);
      return LaunchSpanBlock<TW, kVec, 2>(args, groups, block_warps, s);
    case 2:
      return LaunchSpanBlock<TW, kVec, 2>(args, groups, block_warps, s);
    default:
      return LaunchSpanBlock<TW, kVec, 1>(args, groups, block_warps, s);
  }
}

// BmuTuning::warp_block_warps, 8 unless 16, 24 or 32.
int BlockWarps(const BmuTuning& tuning) {
  const int w = tuning.warp_block_warps;
  return w == 16 || w == 24 || w == 32 ? w : kWarps;
}

__global__ void MergePartialsKernel(const Top2* __restrict__ partials, int64_t nb, int splits, int64_t d0,
                                    const int32_t* __restrict__ order, int32_t* bmu, int32_t* second, float* score);

// The top-2 over `splits` node groups of partials[group * nb + p] for the
// launch's positions p < nb, written for document order[d0 + p] (d0 + p when
// order is null). The warp and cuSPARSE paths both end with it.
absl::Status LaunchMergePartials(const Stream& stream, const Top2* partials, int64_t nb, int splits, int64_t d0,
                                 const int32_t* order, const BmuOutput& out);

template <typename TW, bool kFeatureMajor, int kLane>
void LaunchWarpLane(const WarpArgs& args, int groups, bool vec, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>((args.nb + kWarps - 1) / kWarps), static_cast<unsigned>(groups));
  if (kFeatureMajor && vec) {
    WarpBmuKernel<TW, kFeatureMajor, true, kLane><<<grid, kThreads, 0, s>>>(args);
  } else {
    WarpBmuKernel<TW, kFeatureMajor, false, kLane><<<grid, kThreads, 0, s>>>(args);
  }
}

template <typename TW, bool kFeatureMajor>
void LaunchWarp(const WarpArgs& args, int groups, bool vec, int lane_nodes, cudaStream_t s) {
  if (lane_nodes == 8) {
    LaunchWarpLane<TW, kFeatureMajor, 8>(args, groups, vec, s);
  } else {
    LaunchWarpLane<TW, kFeatureMajor, 4>(args, groups, vec, s);
  }
}

absl::Status WarpBmus(const Stream& stream, const DocumentSet& docs, const CodebookView& cb, const BmuOutput& out,
                      SomWorkspace& ws, const BmuTuning& tuning, const int32_t* order) {
  const int64_t n = docs.rows();
  const int lane_nodes = tuning.warp_lane_nodes == 8 ? 8 : 4;
  const int64_t span = 32 * lane_nodes;
  const int64_t group_nodes = std::max<int64_t>(span, tuning.warp_group_nodes / span * span);
  const int64_t groups = (cb.nodes + group_nodes - 1) / group_nodes;
  if (groups > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("FindBmus: ", cb.nodes, " nodes exceed the warp kernel's limit of ",
                                                   int64_t{65535} * group_nodes));
  }
  const int64_t per_launch = std::max<int64_t>(
      1, std::min<int64_t>({n, int64_t{1} << 30, static_cast<int64_t>(kWarpPartialsBytes / (sizeof(Top2) * groups))}));
  TESSERA_ASSIGN_OR_RETURN(void* partials_raw, ws.Slot(kWarpPartialsSlot, sizeof(Top2) * groups * per_launch, stream));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  const bool fm = cb.layout == CodebookLayout::kFeatureMajor;
  const bool vec = cb.nodes % 4 == 0;
  const CsrView csr = docs.csr();
  for (int64_t d0 = 0; d0 < n; d0 += per_launch) {
    const int64_t nb = std::min(per_launch, n - d0);
    WarpArgs args{d0,          nb,          order,       csr.offsets, csr.indices,
                  cb.weights,  cb.sq_norms, cb.nodes,    cb.features, group_nodes,
                  static_cast<Top2*>(partials_raw)};
    const int g = static_cast<int>(groups);
    if (cb.type == WeightType::kFloat32) {
      fm ? LaunchWarp<float, true>(args, g, vec, lane_nodes, s) : LaunchWarp<float, false>(args, g, vec, lane_nodes, s);
    } else {
      fm ? LaunchWarp<__half, true>(args, g, vec, lane_nodes, s)
         : LaunchWarp<__half, false>(args, g, vec, lane_nodes, s);
    }
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("WarpBmuKernel");
    TESSERA_RETURN_IF_ERROR(LaunchMergePartials(stream, args.partials, nb, g, d0, order, out));
  }
  return absl::OkStatus();
}

// The register-span form (feature-major only; BmuTuning::warp_register_spans
// in {1, 2, 4}).
// `n` positions: documents order[0, n) (all documents when order is null).
absl::Status SpanBmus(const Stream& stream, const DocumentSet& docs, const CodebookView& cb, const BmuOutput& out,
                      SomWorkspace& ws, const BmuTuning& tuning, const int32_t* order, int64_t n) {
  // fp16 spans hold 8 nodes: 2 spans are as many accumulators as 4 fp32 ones.
  const int spans = cb.type == WeightType::kFloat16 ? std::min(2, tuning.warp_register_spans)
                                                    : tuning.warp_register_spans;
  const int rounds = std::max(1, std::min(64, tuning.warp_doc_rounds));
  const int64_t pass = int64_t{spans} * 32 * (16 / WeightBytes(cb.type));
  const int64_t group_nodes = std::max<int64_t>(pass, tuning.warp_group_nodes / pass * pass);
  const int64_t groups = (cb.nodes + group_nodes - 1) / group_nodes;
  if (groups > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("FindBmus: ", cb.nodes, " nodes exceed the warp kernel's limit of ",
                                                   int64_t{65535} * group_nodes));
  }
  if (cb.nodes * WeightBytes(cb.type) > int64_t{0xffffffff}) {
    return absl::InvalidArgumentError(
        absl::StrCat("FindBmus: ", cb.nodes, " nodes: a codebook column over 4 GiB (warp_register_spans)"));
  }
  const int block_warps = BlockWarps(tuning);
  const int64_t per_launch = std::max<int64_t>(
      1, std::min<int64_t>({n, int64_t{1} << 30, static_cast<int64_t>(kWarpPartialsBytes / (sizeof(Top2) * groups))}));
  if ((per_launch + kWarps * rounds - 1) / (kWarps * rounds) > 0x7fffffff) {
    return absl::InvalidArgumentError(absl::StrCat("FindBmus: ", n, " documents exceed the grid"));
  }
  TESSERA_ASSIGN_OR_RETURN(void* partials_raw, ws.Slot(kWarpPartialsSlot, sizeof(Top2) * groups * per_launch, stream));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  // One 16-byte load per span: whole spans (nodes a multiple of 4 fp32 / 8
  // fp16) and 16-byte aligned columns and norms.
  const bool vec = cb.nodes % (16 / WeightBytes(cb.type)) == 0 &&
                   reinterpret_cast<uintptr_t>(cb.weights) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(cb.sq_norms) % 16 == 0;
  const CsrView csr = docs.csr();
  for (int64_t d0 = 0; d0 < n; d0 += per_launch) {
    const int64_t nb = std::min(per_launch, n - d0);
    const SpanArgs args{d0,         nb,          rounds,   order,       csr.offsets,
                        csr.indices, cb.weights, cb.sq_norms, cb.nodes, group_nodes,
                        static_cast<Top2*>(partials_raw)};
    const int g = static_cast<int>(groups);
    if (cb.type == WeightType::kFloat32 && vec) {
      TESSERA_RETURN_IF_ERROR((LaunchSpan<float, true>(args, g, spans, block_warps, s)));
    } else if (cb.type == WeightType::kFloat32) {
      TESSERA_RETURN_IF_ERROR((LaunchSpan<float, false>(args, g, spans, block_warps, s)));
    } else if (vec) {
      TESSERA_RETURN_IF_ERROR((LaunchSpan<__half, true>(args, g, spans, block_warps, s)));
    } else {
      TESSERA_RETURN_IF_ERROR((LaunchSpan<__half, false>(args, g, spans, block_warps, s)));
    }
    TESSERA_RETURN_IF_ERROR(LaunchMergePartials(stream, args.partials, nb, g, d0, order, out));
  }
  return absl::OkStatus();
}

constexpr int kTiledPartialsSlot = kWarpPartialsSlot;
constexpr size_t kTiledPartialsBytes = size_t{256} << 20;  // per launch

template <typename TW, bool kFeatureMajor, int kDepth>
absl::Status LaunchTiledDepth(const TiledArgs& args, int chunks, cudaStream_t s) {
  auto kernel = TiledBmuKernel<TW, kFeatureMajor, kDepth>;
  TESSERA_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kTiledSmem)));
  kernel<<<dim3(static_cast<unsigned>(args.tiles), static_cast<unsigned>(chunks)), kThreads, kTiledSmem, s>>>(args);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("TiledBmuKernel");
  return absl::OkStatus();
}

template <typename TW, bool kFeatureMajor>
absl::Status LaunchTiled(const TiledArgs& args, int chunks, int depth, cudaStream_t s) {
  switch (depth) {
    case 1:
      return LaunchTiledDepth<TW, kFeatureMajor, 1>(args, chunks, s);
    case 4:
      return LaunchTiledDepth<TW, kFeatureMajor, 4>(args, chunks, s);
    case 16:
      return LaunchTiledDepth<TW, kFeatureMajor, 16>(args, chunks, s);
    default:
      return LaunchTiledDepth<TW, kFeatureMajor, 8>(args, chunks, s);
  }
}

absl::Status TiledBmus(const Stream& stream, const DocumentSet& docs, const CodebookView& cb, const BmuOutput& out,
                       SomWorkspace& ws, const BmuTuning& tuning) {
  const DocTilesView tiles = docs.tiles();
  if (tiles.num_tiles <= 0 || tiles.doc_begin == nullptr) {
    return absl::FailedPreconditionError("FindBmus: the CUDA tiled kernels need document tiles (DocumentParts::tiles)");
  }
  const int64_t chunks = (cb.nodes + kChunk - 1) / kChunk;
  if (chunks > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("FindBmus: ", cb.nodes, " nodes exceed the tiled kernels' limit of ", int64_t{65535} * kChunk));
  }
  // Tiles per launch so the partial top-2s stay within kTiledPartialsBytes.
  const int64_t per_launch = std::max<int64_t>(
      1, std::min<int64_t>({tiles.num_tiles, int64_t{1} << 30,
                            static_cast<int64_t>(kTiledPartialsBytes / (sizeof(Top2) * kTileDocs * chunks))}));
  TESSERA_ASSIGN_OR_RETURN(void* partials_raw,
                           ws.Slot(kTiledPartialsSlot, sizeof(Top2) * kTileDocs * chunks * per_launch, stream));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  const bool fm = cb.layout == CodebookLayout::kFeatureMajor;
  for (int64_t t0 = 0; t0 < tiles.num_tiles; t0 += per_launch) {
    const int64_t count = std::min(per_launch, tiles.num_tiles - t0);
    TiledArgs args{t0,          count,       tiles.doc_begin, tiles.entry_begin, tiles.features,
                   tiles.masks, cb.weights,  cb.sq_norms,     cb.nodes,          cb.features,
                   static_cast<Top2*>(partials_raw)};
    const int c = static_cast<int>(chunks);
    absl::Status launched;
    const int depth = tuning.tiled_load_depth;
    if (cb.type == WeightType::kFloat32) {
      launched = fm ? LaunchTiled<float, true>(args, c, depth, s) : LaunchTiled<float, false>(args, c, depth, s);
    } else {
      launched = fm ? LaunchTiled<__half, true>(args, c, depth, s) : LaunchTiled<__half, false>(args, c, depth, s);
    }
    TESSERA_RETURN_IF_ERROR(launched);
    const int64_t slots = count * kTileDocs;
    MergeTilePartialsKernel<<<static_cast<unsigned>((slots + kThreads - 1) / kThreads), kThreads, 0, s>>>(
        args.partials, t0, count, c, tiles.doc_begin, out.bmu, out.second, out.score);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("MergeTilePartialsKernel");
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// cuSPARSE baselines.

__global__ void RebaseOffsetsKernel(const int64_t* __restrict__ offsets, int64_t count, int64_t base,
                                    int32_t* __restrict__ out) {
  const int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (k < count) out[k] = static_cast<int32_t>(offsets[k] - base);
}

__global__ void FillKernel(float* __restrict__ p, int64_t count, float value) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < count;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    p[k] = value;
  }
}

// Row order C[d * m + i]: block (document d, node split s).
__global__ void __launch_bounds__(kThreads)
    RowOrderPartialKernel(const float* __restrict__ c, const float* __restrict__ norms, int64_t nb, int64_t m,
                          int64_t span, Top2* __restrict__ partials) {
  __shared__ Top2 warp_best[kWarps];
  const int64_t d = blockIdx.x;
  const int64_t i0 = blockIdx.y * span;
  const int64_t i1 = i0 + span < m ? i0 + span : m;
  Top2 t = Top2::Empty();
  const float* row = c + d * m;
  for (int64_t i = i0 + threadIdx.x; i < i1; i += kThreads) {
    t.Insert(__ldg(norms + i) - 2.0f * row[i], static_cast<int32_t>(i));
  }
  WarpMergeTop2(t);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_best[warp] = t;
  __syncthreads();
  if (threadIdx.x == 0) {
    Top2 r = warp_best[0];
    for (int k = 1; k < kWarps; ++k) r.Merge(warp_best[k]);
    partials[blockIdx.y * nb + d] = r;
  }
}

// Column order C[i * nb + d]: block (32 documents, node split s); lanes run
// over documents (coalesced), warps over node phases.
__global__ void __launch_bounds__(kThreads)
    ColOrderPartialKernel(const float* __restrict__ c, const float* __restrict__ norms, int64_t nb, int64_t m,
                          int64_t span, Top2* __restrict__ partials) {
  __shared__ Top2 phase_best[kWarps][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t d = blockIdx.x * 32 + lane;
  const int64_t i0 = blockIdx.y * span;
  const int64_t i1 = i0 + span < m ? i0 + span : m;
  Top2 t = Top2::Empty();
  if (d < nb) {
    for (int64_t i = i0 + warp; i < i1; i += kWarps) {
      t.Insert(__ldg(norms + i) - 2.0f * c[i * nb + d], static_cast<int32_t>(i));
    }
  }
  phase_best[warp][lane] = t;
  __syncthreads();
  if (warp == 0 && d < nb) {
    Top2 r = phase_best[0][lane];
    for (int k = 1; k < kWarps; ++k) r.Merge(phase_best[k][lane]);
    partials[blockIdx.y * nb + d] = r;
  }
}

__global__ void MergePartialsKernel(const Top2* __restrict__ partials, int64_t nb, int splits, int64_t d0,
                                    const int32_t* __restrict__ order, int32_t* bmu, int32_t* second, float* score) {
  const int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (p >= nb) return;
  Top2 t = partials[p];
  for (int s = 1; s < splits; ++s) t.Merge(partials[s * nb + p]);
  WriteTop2(t, order != nullptr ? order[d0 + p] : d0 + p, bmu, second, score);
}

// Destroys cuSPARSE descriptors on scope exit.
struct SpMatGuard {
  cusparseConstSpMatDescr_t a = nullptr;
  cusparseConstDnMatDescr_t b = nullptr;
  cusparseDnMatDescr_t c = nullptr;
  ~SpMatGuard() {
    if (a != nullptr) cusparseDestroySpMat(a);
    if (b != nullptr) cusparseDestroyDnMat(b);
    if (c != nullptr) cusparseDestroyDnMat(c);
  }
};

absl::StatusOr<cusparseHandle_t> HandleFor(SomWorkspace& ws) {
  std::shared_ptr<void>& h = ws.cusparse_handle();
  if (h == nullptr) {
    cusparseHandle_t raw = nullptr;
    TESSERA_CUSPARSE_RETURN_IF_ERROR(cusparseCreate(&raw));
    h = std::shared_ptr<void>(raw, [](void* p) { cusparseDestroy(static_cast<cusparseHandle_t>(p)); });
  }
  return static_cast<cusparseHandle_t>(h.get());
}

enum Slot { kSlotScores = 0, kSlotOffsets, kSlotOnes, kSlotPartials, kSlotSpmm };

absl::Status CusparseBmus(const Stream& stream, bool row_order, const DocumentSet& docs, const CodebookView& cb,
                          const BmuOutput& out, SomWorkspace& ws) {
  if (cb.type != WeightType::kFloat32) {
    return absl::UnimplementedError("FindBmus: the cuSPARSE baselines take fp32 codebooks only");
  }
  const int64_t n = docs.rows(), m = cb.nodes, v_count = cb.features;
  const std::vector<int64_t>& host_offsets = docs.host_offsets();
  if (host_offsets.size() != static_cast<size_t>(docs.rows()) + 1) {
    return absl::FailedPreconditionError("FindBmus: the cuSPARSE baselines need DocumentParts::host_offsets");
  }
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  TESSERA_ASSIGN_OR_RETURN(cusparseHandle_t handle, HandleFor(ws));
  TESSERA_CUSPARSE_RETURN_IF_ERROR(cusparseSetStream(handle, s));

  const int64_t batch = std::max<int64_t>(1, std::min<int64_t>(n, kCusparseBlockBytes / (sizeof(float) * m)));
  int64_t max_nnz = 0;
  for (int64_t b0 = 0; b0 < n; b0 += batch) {
    const int64_t nb = std::min(batch, n - b0);
    max_nnz = std::max(max_nnz, host_offsets[b0 + nb] - host_offsets[b0]);
  }
  if (max_nnz >= (int64_t{1} << 31)) {
    return absl::InvalidArgumentError("FindBmus: a cuSPARSE batch would exceed 2^31 non-zeros");
  }
  // Node splits so the top-2 pass has enough blocks.
  const int64_t blocks_per_split = row_order ? batch : (batch + 31) / 32;
  const int splits = static_cast<int>(std::max<int64_t>(
      1, std::min<int64_t>((m + kThreads - 1) / kThreads, (2048 + blocks_per_split - 1) / blocks_per_split)));
  const int64_t span = (m + splits - 1) / splits;

  TESSERA_ASSIGN_OR_RETURN(void* scores_raw, ws.Slot(kSlotScores, sizeof(float) * batch * m, stream));
  TESSERA_ASSIGN_OR_RETURN(void* offsets_raw, ws.Slot(kSlotOffsets, sizeof(int32_t) * (batch + 1), stream));
  TESSERA_ASSIGN_OR_RETURN(void* ones_raw, ws.Slot(kSlotOnes, sizeof(float) * std::max<int64_t>(1, max_nnz), stream));
  TESSERA_ASSIGN_OR_RETURN(void* partials_raw, ws.Slot(kSlotPartials, sizeof(Top2) * splits * batch, stream));
  float* scores = static_cast<float*>(scores_raw);
  int32_t* offsets32 = static_cast<int32_t*>(offsets_raw);
  float* ones = static_cast<float*>(ones_raw);
  Top2* partials = static_cast<Top2*>(partials_raw);
  FillKernel<<<1024, kThreads, 0, s>>>(ones, std::max<int64_t>(1, max_nnz), 1.0f);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("FillKernel");

  const float alpha = 1.0f, beta = 0.0f;
  const cusparseOrder_t order = row_order ? CUSPARSE_ORDER_ROW : CUSPARSE_ORDER_COL;
  for (int64_t b0 = 0; b0 < n; b0 += batch) {
    const int64_t nb = std::min(batch, n - b0);
    const int64_t off0 = host_offsets[b0];
    const int64_t bnnz = host_offsets[b0 + nb] - off0;
    if (bnnz == 0 || v_count == 0) {
      TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(scores, 0, sizeof(float) * nb * m, s));
    } else {
      RebaseOffsetsKernel<<<static_cast<unsigned>((nb + 1 + kThreads - 1) / kThreads), kThreads, 0, s>>>(
          docs.csr().offsets + b0, nb + 1, off0, offsets32);
      TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("RebaseOffsetsKernel");
      // Column order: one SpMM per node range so the dense B (V x nodes,
      // column-major) stays under 2^31 elements — past that the column-order
      // SpMM returned wrong scores (edge 1024: 5 % agreement) without an error.
      const int64_t node_step = row_order ? m : std::max<int64_t>(1, ((int64_t{1} << 31) - 1) / v_count);
      for (int64_t i0 = 0; i0 < m; i0 += node_step) {
        const int64_t mc = std::min(node_step, m - i0);
        SpMatGuard g;
        TESSERA_CUSPARSE_RETURN_IF_ERROR(cusparseCreateConstCsr(&g.a, nb, v_count, bnnz, offsets32,
                                                                docs.csr().indices + off0, ones, CUSPARSE_INDEX_32I,
                                                                CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                                                                CUDA_R_32F));
        const float* b_block = static_cast<const float*>(cb.weights) + (row_order ? 0 : i0 * v_count);
        TESSERA_CUSPARSE_RETURN_IF_ERROR(
            cusparseCreateConstDnMat(&g.b, v_count, mc, row_order ? m : v_count, b_block, CUDA_R_32F, order));
        TESSERA_CUSPARSE_RETURN_IF_ERROR(
            cusparseCreateDnMat(&g.c, nb, mc, row_order ? m : nb, scores + i0 * nb, CUDA_R_32F, order));
        size_t buffer_bytes = 0;
        TESSERA_CUSPARSE_RETURN_IF_ERROR(cusparseSpMM_bufferSize(
            handle, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, g.a, g.b, &beta,
            g.c, CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT, &buffer_bytes));
        TESSERA_ASSIGN_OR_RETURN(void* buffer, ws.Slot(kSlotSpmm, buffer_bytes, stream));
        TESSERA_CUSPARSE_RETURN_IF_ERROR(cusparseSpMM(handle, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                      CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, g.a, g.b, &beta,
                                                      g.c, CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT, buffer));
      }
    }
    if (row_order) {
      RowOrderPartialKernel<<<dim3(static_cast<unsigned>(nb), splits), kThreads, 0, s>>>(scores, cb.sq_norms, nb, m,
                                                                                        span, partials);
      TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("RowOrderPartialKernel");
    } else {
      ColOrderPartialKernel<<<dim3(static_cast<unsigned>((nb + 31) / 32), splits), kThreads, 0, s>>>(
          scores, cb.sq_norms, nb, m, span, partials);
      TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("ColOrderPartialKernel");
    }
    TESSERA_RETURN_IF_ERROR(LaunchMergePartials(stream, partials, nb, splits, b0, nullptr, out));
  }
  return absl::OkStatus();
}

template <typename TW, bool kFeatureMajor>
__global__ void SqNormsKernel(const TW* __restrict__ w, int64_t m, int64_t v_count, float* __restrict__ norms) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= m) return;
  double acc = 0.0;
  for (int64_t v = 0; v < v_count; ++v) {
    const double x = Widen(kFeatureMajor ? w[v * m + i] : w[i * v_count + v]);
    acc += x * x;
  }
  norms[i] = static_cast<float>(acc);
}

absl::Status LaunchMergePartials(const Stream& stream, const Top2* partials, int64_t nb, int splits, int64_t d0,
                                 const int32_t* order, const BmuOutput& out) {
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  MergePartialsKernel<<<static_cast<unsigned>((nb + kThreads - 1) / kThreads), kThreads, 0, s>>>(
      partials, nb, splits, d0, order, out.bmu, out.second, out.score);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("MergePartialsKernel");
  return absl::OkStatus();
}

}  // namespace

namespace internal {

absl::Status ExactBmusAt(const Stream& stream, const DocumentSet& docs, const CodebookView& cb, const BmuOutput& out,
                         SomWorkspace& ws, BmuTuning tuning, const int32_t* order, int64_t n) {
  if (n == 0) return absl::OkStatus();
  const int spans = tuning.warp_register_spans;
  if (spans != 1 && spans != 2 && spans != 4) tuning.warp_register_spans = 4;
  return SpanBmus(stream, docs, cb, out, ws, tuning, order, n);
}

}  // namespace internal

absl::Status FindBmus(const Stream& stream, BmuAlgorithm algorithm, const DocumentSet& docs,
                      const CodebookView& codebook, const BmuOutput& out, SomWorkspace* workspace,
                      BmuTuning tuning, const BmuHints& hints) {
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  if (out.exact_rescans != nullptr) *out.exact_rescans = 0;
  SomWorkspace local;
  SomWorkspace& ws = workspace != nullptr ? *workspace : local;
  if (algorithm == BmuAlgorithm::kFeatureMajor || algorithm == BmuAlgorithm::kNodeMajor) {
    if (tuning.tiled_kernel) {
      TESSERA_RETURN_IF_ERROR(TiledBmus(stream, docs, codebook, out, ws, tuning));
    } else {
      // The order is computed before the search writes: previous_bmu may alias out.bmu.
      const int32_t* order = nullptr;
      if (tuning.order_by_previous_bmu && (hints.previous_bmu != nullptr || hints.document_key != nullptr)) {
        TESSERA_ASSIGN_OR_RETURN(order, internal::OrderByPreviousBmu(stream, hints.previous_bmu, hints.document_key,
                                                                     codebook.features, docs.rows(), codebook.nodes,
                                                                     ws));
      }
      const int spans = tuning.warp_register_spans;
      const bool screen = tuning.screen_fp16 ||
                          (tuning.screen_auto_max_nodes > 0 && codebook.nodes <= tuning.screen_auto_max_nodes);
      if (screen && codebook.layout == CodebookLayout::kFeatureMajor && codebook.type == WeightType::kFloat32) {
        TESSERA_RETURN_IF_ERROR(internal::ScreenedBmus(stream, docs, codebook, out, ws, tuning, order));
      } else if (codebook.layout == CodebookLayout::kFeatureMajor && (spans == 1 || spans == 2 || spans == 4)) {
        TESSERA_RETURN_IF_ERROR(SpanBmus(stream, docs, codebook, out, ws, tuning, order, docs.rows()));
      } else {
        TESSERA_RETURN_IF_ERROR(WarpBmus(stream, docs, codebook, out, ws, tuning, order));
      }
    }
  } else {
    TESSERA_RETURN_IF_ERROR(
        CusparseBmus(stream, algorithm == BmuAlgorithm::kCusparseRowOrder, docs, codebook, out, ws));
  }
  // A local workspace is freed on return: finish its work first.
  if (workspace == nullptr) TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return absl::OkStatus();
}

absl::Status ComputeSqNorms(const Stream& stream, const CodebookView& cb) {
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  const unsigned blocks = static_cast<unsigned>((cb.nodes + kThreads - 1) / kThreads);
  const bool fm = cb.layout == CodebookLayout::kFeatureMajor;
  if (cb.type == WeightType::kFloat32) {
    const float* w = static_cast<const float*>(cb.weights);
    if (fm) {
      SqNormsKernel<float, true><<<blocks, kThreads, 0, s>>>(w, cb.nodes, cb.features, cb.sq_norms);
    } else {
      SqNormsKernel<float, false><<<blocks, kThreads, 0, s>>>(w, cb.nodes, cb.features, cb.sq_norms);
    }
  } else {
    const __half* w = static_cast<const __half*>(cb.weights);
    if (fm) {
      SqNormsKernel<__half, true><<<blocks, kThreads, 0, s>>>(w, cb.nodes, cb.features, cb.sq_norms);
    } else {
      SqNormsKernel<__half, false><<<blocks, kThreads, 0, s>>>(w, cb.nodes, cb.features, cb.sq_norms);
    }
  }
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("SqNormsKernel");
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace som
}  // namespace tessera

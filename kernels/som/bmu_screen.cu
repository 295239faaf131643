// Screened BMU search (BmuTuning::screen_fp16, issue 37): an fp16 pass that
// bounds every node's score, then the exact fp32 scores of the few nodes the
// bounds cannot rule out. Same bits as the exact kernels.
//
// Why: the exact register-span kernel spends one fp32 add and a quarter of a
// 16-byte load per (document, feature, node); on the 64 x 64 map it is
// load- and issue-bound. Here a 16-byte load brings 8 fp16 weights and one
// HADD2 adds 2: half the bytes and about a third of the instructions.
//
// The bound. For document x with k <= 64 features and node i, let A32 be the
// exact kernels' sum (fp32 weights, fp32 adds in ascending feature order) and
// A16 this pass's (fp16 copies, fp16 adds in the same order). With
// non-negative weights, every partial sum is at most the total, so
//   |A32 - A16| <= rel * A16 + abs,  rel = 1.25 (k + 1) 2^-11, abs = k 2^-20
// (fp16 rounding of each weight 2^-11 relative; each of the k - 1 fp16 adds
// 2^-11 of its partial sum; fp32 adds k 2^-24; 1.25 covers bounding the exact
// sum by A16 and second-order terms; abs covers fp16 subnormals). The exact
// score is s = fl(|w|^2 - 2 A32); this pass's s~ = fl(|w|^2 - 2 A16), so
//   |s - s~| <= e(i) = (2 rel + 2^-18) A16 + 2^-19 |w|^2 + 2 abs + 2^-19
// (the last terms cover the fp32 roundings of both scores and of L and U,
// each formed with two multiply-adds).
// With L = s~ - e and U = s~ + e, the second-smallest U bounds the true
// second-smallest score from above, so every node whose score is at most the
// true second-best (ties included) has L <= T = that second-smallest U. Each
// lane keeps its 4 smallest L; the nodes among them with L <= T are scored
// exactly (fp32 weights, ascending features from 0: the exact kernels' sum)
// and the warp merges their top-2 by (score, index), as the exact kernels.
// (4 or 8 per lane: BmuTuning::screen_slots.) When a lane's last slot's L is <= T a candidate may have been dropped, so
// the document goes to the exact kernel; so do documents with over 64
// features, and every document when the codebook has a negative, non-finite
// or >= 512 weight (the bound assumes 0 <= w, and 64 such sums stay in fp16
// range), or < 2 nodes.
//
// Layout of the fp16 copy: position p of a column holds node pos_node[p],
// p = (i * a) mod m with a coprime to m (~0.618 m), so map neighbours (whose
// scores are close, i.e. candidates together) fall on different lanes and
// rarely overflow one lane's slots. Columns are padded to whole passes
// (1024 positions) with zero weights and +inf norms.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

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
namespace internal {
namespace {

using bmu_device::WarpMergeTop2;
using bmu_device::WriteTop2;

constexpr int kThreads = kBmuThreads;
constexpr int kWarps = kThreads / 32;
constexpr int kSpans = 4;                    // 16-byte loads per lane per feature
constexpr int kLaneNodes = 8 * kSpans;       // fp16 positions per lane per pass
constexpr int kPass = 32 * kLaneNodes;       // positions per warp pass
constexpr int kMaxFeatures = 64;             // longer documents: exact kernel
constexpr float kBadWeight = 512.0f;         // fp16 range: 64 x 512 sums stay finite
// The probe (ScreenedBmus): its positions, and the fraction of them sent to
// the exact kernel above which the rest skip screening (the screening pass
// costs about 0.8 of the exact one on the 64 x 64 map, H100; in the 64x64
// training of 2026-12-07 epochs with 22-25 % re-searched took 1.08-1.13x the
// exact kernel's time, 7.5-9.6 % 0.94-0.96x).
constexpr int64_t kProbeMin = 65536;
// Grouped form: per-launch budget of the per-(group, document) candidates.
constexpr size_t kGroupBytes = size_t{256} << 20;
constexpr double kProbeLimit = 0.12;

struct ScreenArgs {
  int64_t d0;
  int64_t nb;
  int rounds;
  const int32_t* order;
  const int64_t* offsets;
  const int32_t* indices;
  const char* shadow;      // fp16 [feature][position], column stride col_bytes
  uint32_t col_bytes;
  int64_t positions;       // padded column length (multiple of kPass)
  const float* norms_p;    // per position (+inf past the last node)
  const int32_t* pos_node; // per position < m
  const float* weights;    // the fp32 codebook, feature-major
  const float* norms;      // per node
  int64_t m;
  int32_t* bmu;
  int32_t* second;
  float* score;
  uint8_t* rescan;         // per position (from 0, not d0): 1 when the exact kernel must search the document
};

__device__ inline uint64_t ColumnOffset(int32_t v, uint32_t col_bytes) {
  uint64_t r;
  asm("mul.wide.u32 %0, %1, %2;" : "=l"(r) : "r"(static_cast<uint32_t>(v)), "r"(col_bytes));
  return r;
}

// 3 blocks of 8 warps per SM; larger blocks (BmuTuning::warp_block_warps)
// keep the same 24 warps as one block of 24 or 16 / 32 as one block.
template <int kBlockWarps>
constexpr int ScreenMinBlocks() {
  return 3 * kWarps / kBlockWarps > 0 ? 3 * kWarps / kBlockWarps : 1;
}

// kSlots: candidates kept per lane (BmuTuning::screen_slots). kBlockWarps:
// warps per block (BmuTuning::warp_block_warps).
template <int kSlots, int kBlockWarps>
__global__ void __launch_bounds__(32 * kBlockWarps, ScreenMinBlocks<kBlockWarps>()) ScreenBmuKernel(ScreenArgs a) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  for (int r = 0; r < a.rounds; ++r) {
    const int64_t local = (static_cast<int64_t>(blockIdx.x) * a.rounds + r) * kBlockWarps + warp;
    if (local >= a.nb) return;  // whole warp
    const int64_t d = a.order != nullptr ? a.order[a.d0 + local] : a.d0 + local;
    const int64_t off = a.offsets[d];
    const int nnz = static_cast<int>(a.offsets[d + 1] - off);
    if (nnz > kMaxFeatures) {
      if (lane == 0) a.rescan[a.d0 + local] = 1;
      continue;
    }
    // Features 0..31 and 32..63, one per lane.
    const int32_t f0 = lane < nnz ? __ldg(a.indices + off + lane) : 0;
    const int32_t f1 = lane + 32 < nnz ? __ldg(a.indices + off + 32 + lane) : 0;
    const float k = static_cast<float>(nnz);
    const float rel = 1.25f * (k + 1.0f) * 0x1p-11f;
    const float c1 = 2.0f * rel + 0x1p-18f;
    const float c0 = 2.0f * k * 0x1p-20f + 0x1p-19f;
    // L = s~ - e and U = s~ + e written as one multiply-add each on the norm
    // term: L = (1 - 2^-19) |w|^2 - (2 + c1) A16 - c0, U = (1 + 2^-19) |w|^2
    // - (2 - c1) A16 + c0.
    const float lo_x = -(2.0f + c1), hi_x = c1 - 2.0f;
    float slot_l[kSlots];
    int32_t slot_p[kSlots];
#pragma unroll
    for (int q = 0; q < kSlots; ++q) {
      slot_l[q] = INFINITY;
      slot_p[q] = -1;
    }
    float max_l = INFINITY;
    int max_q = 0;
    float up1 = INFINITY, up2 = INFINITY;
    // A node with L >= max(max_l, up2) changes neither the slots nor the
    // upper bounds' top-2 (U >= L): most nodes stop at this test.
    float reject = INFINITY;
    for (int64_t base = 0; base < a.positions; base += kPass) {
      __half2 acc[kSpans][4];
#pragma unroll
      for (int s = 0; s < kSpans; ++s) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[s][j] = __float2half2_rn(0.0f);
      }
      const char* lane_base = a.shadow + 2 * (base + 8 * lane);
      auto load = [&](uint4 (&raw)[kSpans], int kk) {
        const int32_t v = __shfl_sync(0xffffffffu, kk < 32 ? f0 : f1, kk & 31);
        const uint4* p = reinterpret_cast<const uint4*>(lane_base + ColumnOffset(v, a.col_bytes));
#pragma unroll
        for (int s = 0; s < kSpans; ++s) raw[s] = __ldg(p + 32 * s);
      };
      auto add = [&](const uint4 (&raw)[kSpans]) {
#pragma unroll
        for (int s = 0; s < kSpans; ++s) {
          const uint32_t words[4] = {raw[s].x, raw[s].y, raw[s].z, raw[s].w};
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[s][j] = __hadd2(acc[s][j], *reinterpret_cast<const __half2*>(&words[j]));
        }
      };
#pragma unroll 1
      for (int kk = 0; kk < nnz; ++kk) {
        uint4 raw[kSpans];
        load(raw, kk);
        add(raw);
      }
#pragma unroll
      for (int s = 0; s < kSpans; ++s) {
        const int64_t ps = base + 256 * s + 8 * lane;
        const float4 n_lo = __ldg(reinterpret_cast<const float4*>(a.norms_p + ps));
        const float4 n_hi = __ldg(reinterpret_cast<const float4*>(a.norms_p + ps + 4));
        const float nrm[8] = {n_lo.x, n_lo.y, n_lo.z, n_lo.w, n_hi.x, n_hi.y, n_hi.z, n_hi.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 f = __half22float2(acc[s][j]);
#pragma unroll
          for (int t = 0; t < 2; ++t) {
            const float x = t == 0 ? f.x : f.y;
            const float norm = nrm[2 * j + t];
            const float lo = fmaf(lo_x, x, fmaf(1.0f - 0x1p-19f, norm, -c0));  // +inf in the padding
            if (!(lo < reject)) continue;
            const float hi = fmaf(hi_x, x, fmaf(1.0f + 0x1p-19f, norm, c0));
            if (hi < up2) {
              if (hi < up1) {
                up2 = up1;
                up1 = hi;
              } else {
                up2 = hi;
              }
            }
            if (lo < max_l) {
              const int32_t pos = static_cast<int32_t>(ps + 2 * j + t);
#pragma unroll
              for (int q = 0; q < kSlots; ++q) {
                if (q == max_q) {
                  slot_l[q] = lo;
                  slot_p[q] = pos;
                }
              }
              max_l = slot_l[0];
              max_q = 0;
#pragma unroll
              for (int q = 1; q < kSlots; ++q) {
                if (slot_l[q] > max_l) {
                  max_l = slot_l[q];
                  max_q = q;
                }
              }
            }
            reject = fmaxf(max_l, up2);
          }
        }
      }
    }
    // T: the warp's second-smallest upper bound.
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float b1 = __shfl_xor_sync(0xffffffffu, up1, o);
      const float b2 = __shfl_xor_sync(0xffffffffu, up2, o);
      const float n2 = fminf(fmaxf(up1, b1), fminf(up2, b2));
      up1 = fminf(up1, b1);
      up2 = n2;
    }
    const float t_bound = up2;
    // A dropped node has L >= this lane's 4th-smallest: it may matter only
    // when that is within the bound (all slots full).
    const bool overflow = __any_sync(0xffffffffu, max_l <= t_bound);
    if (lane == 0) a.rescan[a.d0 + local] = overflow ? 1 : 0;
    if (overflow) continue;
    int32_t node[kSlots];
    float acc32[kSlots];
#pragma unroll
    for (int q = 0; q < kSlots; ++q) {
      node[q] = slot_p[q] >= 0 && slot_l[q] <= t_bound ? __ldg(a.pos_node + slot_p[q]) : -1;
      acc32[q] = 0.0f;
    }
    // Exact sums: fp32 weights, ascending features, from 0 (as bmu.cu).
#pragma unroll 1
    for (int kk = 0; kk < nnz; ++kk) {
      const int32_t v = __shfl_sync(0xffffffffu, kk < 32 ? f0 : f1, kk & 31);
      const float* col = a.weights + static_cast<int64_t>(v) * a.m;
#pragma unroll
      for (int q = 0; q < kSlots; ++q) {
        if (node[q] >= 0) acc32[q] += __ldg(col + node[q]);
      }
    }
    Top2 top = Top2::Empty();
#pragma unroll
    for (int q = 0; q < kSlots; ++q) {
      if (node[q] >= 0) top.Insert(__ldg(a.norms + node[q]) - 2.0f * acc32[q], node[q]);
    }
    WarpMergeTop2(top);
    if (lane == 0) WriteTop2(top, d, a.bmu, a.second, a.score);
  }
}

// Grouped form (BmuTuning::screen_group_positions): blocks of one group of
// positions run together (documents fastest), as the exact span kernel's
// node groups, so the group's slice of each column stays in L1/L2. Per
// (document, group) the first kernel writes the group's two smallest U, the
// smallest L a lane may have dropped, and its candidates with L <= the
// group's second-smallest U (at most kGroupOut; more: the document goes to
// the exact kernel); the second takes T over the groups and scores the
// candidates with L <= T exactly. Same candidates as the whole-map form:
// T <= every group's second-smallest U.
constexpr int kGroupOut = 8;
struct GroupCandidates {
  float up1, up2;
  float dropped;  // -inf: this document goes to the exact kernel
  int32_t count;
  float l[kGroupOut];
  int32_t p[kGroupOut];
};

template <int kSlots>
__global__ void __launch_bounds__(kThreads, 3)
    ScreenGroupKernel(ScreenArgs a, int64_t group_positions, GroupCandidates* __restrict__ out) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int64_t g0 = static_cast<int64_t>(blockIdx.y) * group_positions;
  const int64_t g1 = g0 + group_positions < a.positions ? g0 + group_positions : a.positions;
  for (int r = 0; r < a.rounds; ++r) {
    const int64_t local = (static_cast<int64_t>(blockIdx.x) * a.rounds + r) * kWarps + warp;
    if (local >= a.nb) return;  // whole warp
    GroupCandidates* o = out + static_cast<int64_t>(blockIdx.y) * a.nb + local;
    const int64_t d = a.order != nullptr ? a.order[a.d0 + local] : a.d0 + local;
    const int64_t off = a.offsets[d];
    const int nnz = static_cast<int>(a.offsets[d + 1] - off);
    if (nnz > kMaxFeatures) {
      if (lane == 0) {
        o->up1 = o->up2 = INFINITY;
        o->dropped = -INFINITY;
        o->count = 0;
      }
      continue;
    }
    const int32_t f0 = lane < nnz ? __ldg(a.indices + off + lane) : 0;            // features 0..31
    const int32_t f1 = lane + 32 < nnz ? __ldg(a.indices + off + 32 + lane) : 0;  // 32..63
    const float k = static_cast<float>(nnz);
    const float rel = 1.25f * (k + 1.0f) * 0x1p-11f;
    const float c1 = 2.0f * rel + 0x1p-18f;
    const float c0 = 2.0f * k * 0x1p-20f + 0x1p-19f;
    // L = s~ - e and U = s~ + e written as one multiply-add each on the norm
    // term: L = (1 - 2^-19) |w|^2 - (2 + c1) A16 - c0, U = (1 + 2^-19) |w|^2
    // - (2 - c1) A16 + c0.
    const float lo_x = -(2.0f + c1), hi_x = c1 - 2.0f;
    float slot_l[kSlots];
    int32_t slot_p[kSlots];
#pragma unroll
    for (int q = 0; q < kSlots; ++q) {
      slot_l[q] = INFINITY;
      slot_p[q] = -1;
    }
    float max_l = INFINITY;
    int max_q = 0;
    float up1 = INFINITY, up2 = INFINITY;
    // A node with L >= max(max_l, up2) changes neither the slots nor the
    // upper bounds' top-2 (U >= L): most nodes stop at this test.
    float reject = INFINITY;
    for (int64_t base = g0; base < g1; base += kPass) {
      __half2 acc[kSpans][4];
#pragma unroll
      for (int s = 0; s < kSpans; ++s) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[s][j] = __float2half2_rn(0.0f);
      }
      const char* lane_base = a.shadow + 2 * (base + 8 * lane);
#pragma unroll 1
      for (int kk = 0; kk < nnz; ++kk) {
        const int32_t v = __shfl_sync(0xffffffffu, kk < 32 ? f0 : f1, kk & 31);
        const uint4* p = reinterpret_cast<const uint4*>(lane_base + ColumnOffset(v, a.col_bytes));
        uint4 raw[kSpans];
#pragma unroll
        for (int s = 0; s < kSpans; ++s) raw[s] = __ldg(p + 32 * s);
#pragma unroll
        for (int s = 0; s < kSpans; ++s) {
          const uint32_t words[4] = {raw[s].x, raw[s].y, raw[s].z, raw[s].w};
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[s][j] = __hadd2(acc[s][j], *reinterpret_cast<const __half2*>(&words[j]));
        }
      }
#pragma unroll
      for (int s = 0; s < kSpans; ++s) {
        const int64_t ps = base + 256 * s + 8 * lane;
        const float4 n_lo = __ldg(reinterpret_cast<const float4*>(a.norms_p + ps));
        const float4 n_hi = __ldg(reinterpret_cast<const float4*>(a.norms_p + ps + 4));
        const float nrm[8] = {n_lo.x, n_lo.y, n_lo.z, n_lo.w, n_hi.x, n_hi.y, n_hi.z, n_hi.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 f = __half22float2(acc[s][j]);
#pragma unroll
          for (int t = 0; t < 2; ++t) {
            const float x = t == 0 ? f.x : f.y;
            const float norm = nrm[2 * j + t];
            const float lo = fmaf(lo_x, x, fmaf(1.0f - 0x1p-19f, norm, -c0));  // +inf in the padding
            if (!(lo < reject)) continue;
            const float hi = fmaf(hi_x, x, fmaf(1.0f + 0x1p-19f, norm, c0));
            if (hi < up2) {
              if (hi < up1) {
                up2 = up1;
                up1 = hi;
              } else {
                up2 = hi;
              }
            }
            if (lo < max_l) {
              const int32_t pos = static_cast<int32_t>(ps + 2 * j + t);
#pragma unroll
              for (int q = 0; q < kSlots; ++q) {
                if (q == max_q) {
                  slot_l[q] = lo;
                  slot_p[q] = pos;
                }
              }
              max_l = slot_l[0];
              max_q = 0;
#pragma unroll
              for (int q = 1; q < kSlots; ++q) {
                if (slot_l[q] > max_l) {
                  max_l = slot_l[q];
                  max_q = q;
                }
              }
            }
            reject = fmaxf(max_l, up2);
          }
        }
      }
    }
    // The group's two smallest U (T <= the second), the smallest L a lane
    // may have dropped, and the candidates with L <= the group's second U.
#pragma unroll
    for (int o2 = 16; o2 > 0; o2 >>= 1) {
      const float b1 = __shfl_xor_sync(0xffffffffu, up1, o2);
      const float b2 = __shfl_xor_sync(0xffffffffu, up2, o2);
      const float n2 = fminf(fmaxf(up1, b1), fminf(up2, b2));
      up1 = fminf(up1, b1);
      up2 = n2;
    }
    const float local_t = up2;
    float dropped = max_l;  // +inf unless the lane's slots are full
#pragma unroll
    for (int o2 = 16; o2 > 0; o2 >>= 1) dropped = fminf(dropped, __shfl_xor_sync(0xffffffffu, dropped, o2));
    int mine = 0;
#pragma unroll
    for (int q = 0; q < kSlots; ++q) mine += slot_p[q] >= 0 && slot_l[q] <= local_t;
    int before = mine;  // inclusive prefix over the lanes
#pragma unroll
    for (int o2 = 1; o2 < 32; o2 <<= 1) {
      const int x = __shfl_up_sync(0xffffffffu, before, o2);
      if (lane >= o2) before += x;
    }
    const int total = __shfl_sync(0xffffffffu, before, 31);
    before -= mine;
    if (total <= kGroupOut) {
#pragma unroll
      for (int q = 0; q < kSlots; ++q) {
        if (slot_p[q] >= 0 && slot_l[q] <= local_t) {
          o->l[before] = slot_l[q];
          o->p[before] = slot_p[q];
          ++before;
        }
      }
    }
    if (lane == 0) {
      o->up1 = up1;
      o->up2 = up2;
      o->dropped = total <= kGroupOut ? dropped : -INFINITY;
      o->count = total <= kGroupOut ? total : 0;
    }
  }
}


// The warp's two smallest of the lanes' (u1 <= u2) pairs, in every lane.
__device__ __forceinline__ void WarpTwoSmallest(float& u1, float& u2) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float b1 = __shfl_xor_sync(0xffffffffu, u1, o);
    const float b2 = __shfl_xor_sync(0xffffffffu, u2, o);
    const float n2 = fminf(fmaxf(u1, b1), fminf(u2, b2));
    u1 = fminf(u1, b1);
    u2 = n2;
  }
}

// Per document (a warp): T over the groups, then the exact candidates.
__global__ void __launch_bounds__(kThreads)
    ScreenMergeKernel(ScreenArgs a, int groups, const GroupCandidates* __restrict__ in) {
  const int lane = threadIdx.x & 31;
  const int64_t local = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (local >= a.nb) return;
  float u1 = INFINITY, u2 = INFINITY;
  bool overflow = false;
  for (int g = lane; g < groups; g += 32) {
    const GroupCandidates& c = in[static_cast<int64_t>(g) * a.nb + local];
    const float b1 = c.up1, b2 = c.up2;
    const float n2 = fminf(fmaxf(u1, b1), fminf(u2, b2));
    u1 = fminf(u1, b1);
    u2 = n2;
  }
  WarpTwoSmallest(u1, u2);
  const float t_bound = u2;
  for (int g = lane; g < groups; g += 32) overflow |= in[static_cast<int64_t>(g) * a.nb + local].dropped <= t_bound;
  overflow = __any_sync(0xffffffffu, overflow);
  if (lane == 0) a.rescan[a.d0 + local] = overflow ? 1 : 0;
  if (overflow) return;
  const int64_t d = a.order != nullptr ? a.order[a.d0 + local] : a.d0 + local;
  const int64_t off = a.offsets[d];
  const int nnz = static_cast<int>(a.offsets[d + 1] - off);  // <= kMaxFeatures here
  const int32_t f0 = lane < nnz ? __ldg(a.indices + off + lane) : 0;
  const int32_t f1 = lane + 32 < nnz ? __ldg(a.indices + off + 32 + lane) : 0;
  Top2 top = Top2::Empty();
  for (int base = 0; base < groups * kGroupOut; base += 32) {  // one (group, entry) per lane
    const int k = base + lane;
    int32_t node = -1;
    if (k < groups * kGroupOut) {
      const GroupCandidates& c = in[static_cast<int64_t>(k / kGroupOut) * a.nb + local];
      const int e = k % kGroupOut;
      if (e < c.count && c.l[e] <= t_bound) node = __ldg(a.pos_node + c.p[e]);
    }
    if (!__any_sync(0xffffffffu, node >= 0)) continue;
    // Exact sum: fp32 weights, ascending features, from 0 (as bmu.cu).
    float acc32 = 0.0f;
#pragma unroll 1
    for (int kk = 0; kk < nnz; ++kk) {
      const int32_t v = __shfl_sync(0xffffffffu, kk < 32 ? f0 : f1, kk & 31);
      if (node >= 0) acc32 += __ldg(a.weights + static_cast<int64_t>(v) * a.m + node);
    }
    if (node >= 0) top.Insert(__ldg(a.norms + node) - 2.0f * acc32, node);
  }
  WarpMergeTop2(top);
  if (lane == 0) WriteTop2(top, d, a.bmu, a.second, a.score);
}

// pos_node[(i * mult) mod m] = i; norms_p[p] = norms[pos_node[p]], +inf in
// the padding.
__global__ void ScreenPositionsKernel(int64_t m, int64_t positions, uint64_t mult, const float* __restrict__ norms,
                                      int32_t* __restrict__ pos_node, float* __restrict__ norms_p) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < m) {
    const int64_t p = static_cast<int64_t>((static_cast<uint64_t>(i) * mult) % static_cast<uint64_t>(m));
    pos_node[p] = static_cast<int32_t>(i);
    norms_p[p] = norms[i];
  } else if (i < positions) {
    norms_p[i] = INFINITY;
  }
}

// The fp16 copy: 8 positions per thread (one 16-byte store); flags[0] = 1
// when a weight is negative, non-finite or >= kBadWeight.
__global__ void ScreenShadowKernel(const float* __restrict__ w, int64_t m, int64_t v_count, int64_t positions,
                                   const int32_t* __restrict__ pos_node, uint4* __restrict__ shadow,
                                   int32_t* __restrict__ flags) {
  const int64_t per_col = positions / 8;
  const int64_t total = v_count * per_col;
  bool bad = false;
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < total;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t v = g / per_col;
    const int64_t p0 = (g - v * per_col) * 8;
    const float* col = w + v * m;
    uint32_t words[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float x[2];
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const int64_t p = p0 + 2 * j + t;
        x[t] = p < m ? __ldg(col + __ldg(pos_node + p)) : 0.0f;
        bad |= !(x[t] >= 0.0f && x[t] < kBadWeight);
      }
      const __half2 h = __floats2half2_rn(x[0], x[1]);
      words[j] = *reinterpret_cast<const uint32_t*>(&h);
    }
    shadow[g] = make_uint4(words[0], words[1], words[2], words[3]);
  }
  if (bad) atomicOr(flags, 1);
}

uint64_t gcd64(uint64_t x, uint64_t y) {
  while (y != 0) {
    const uint64_t t = x % y;
    x = y;
    y = t;
  }
  return x;
}

// A multiplier coprime to m near 0.618 m (1 for m <= 2).
uint64_t Multiplier(int64_t m) {
  if (m <= 2) return 1;
  uint64_t a = static_cast<uint64_t>(0.6180339887498949 * static_cast<double>(m));
  if (a < 1) a = 1;
  while (gcd64(a, static_cast<uint64_t>(m)) != 1) ++a;
  return a % static_cast<uint64_t>(m);
}

using ScreenKernel = void (*)(ScreenArgs);

template <int kSlots>
ScreenKernel ScreenKernelOfBlock(int block_warps) {
  switch (block_warps) {
    case 16:
      return ScreenBmuKernel<kSlots, 16>;
    case 24:
      return ScreenBmuKernel<kSlots, 24>;
    case 32:
      return ScreenBmuKernel<kSlots, 32>;
    default:
      return ScreenBmuKernel<kSlots, kWarps>;
  }
}

// The whole-map screening kernel for slots 4 / 8, 8 / 16 / 24 / 32 warps per
// block.
ScreenKernel ScreenKernelFor(int slots, int block_warps) {
  return slots == 8 ? ScreenKernelOfBlock<8>(block_warps) : ScreenKernelOfBlock<4>(block_warps);
}

}  // namespace

absl::Status ScreenedBmus(const Stream& stream, const DocumentSet& docs, const CodebookView& cb, const BmuOutput& out,
                          SomWorkspace& ws, const BmuTuning& tuning, const int32_t* order) {
  const int64_t n = docs.rows(), m = cb.nodes, v_count = cb.features;
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  const int64_t positions = (m + kPass - 1) / kPass * kPass;
  const bool weights_aligned = reinterpret_cast<uintptr_t>(cb.weights) % 16 == 0;
  if (m < 2 || n == 0 || v_count == 0 || 2 * positions > int64_t{0xffffffff} || !weights_aligned ||
      n >= (int64_t{1} << 31)) {
    if (out.exact_rescans != nullptr) *out.exact_rescans = n;
    return ExactBmusAt(stream, docs, cb, out, ws, tuning, order, n);
  }
  TESSERA_ASSIGN_OR_RETURN(void* shadow, ws.Slot(kScreenShadowSlot, 2 * positions * v_count, stream));
  TESSERA_ASSIGN_OR_RETURN(void* norms_p, ws.Slot(kScreenNormsSlot, sizeof(float) * positions, stream));
  TESSERA_ASSIGN_OR_RETURN(void* pos_node, ws.Slot(kScreenNodesSlot, sizeof(int32_t) * positions, stream));
  TESSERA_ASSIGN_OR_RETURN(void* counters, ws.Slot(kScreenCountersSlot, 2 * sizeof(int32_t), stream));
  TESSERA_ASSIGN_OR_RETURN(void* list, ws.Slot(kScreenListSlot, sizeof(int32_t) * n, stream));
  TESSERA_ASSIGN_OR_RETURN(void* rescan, ws.Slot(kScreenRescanSlot, n, stream));
  int32_t* flags = static_cast<int32_t*>(counters);  // [0] bad weight, [1] documents in the list
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(flags, 0, 2 * sizeof(int32_t), s));
  ScreenPositionsKernel<<<static_cast<unsigned>((positions + kThreads - 1) / kThreads), kThreads, 0, s>>>(
      m, positions, Multiplier(m), cb.sq_norms, static_cast<int32_t*>(pos_node), static_cast<float*>(norms_p));
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("ScreenPositionsKernel");
  ScreenShadowKernel<<<4096, kThreads, 0, s>>>(static_cast<const float*>(cb.weights), m, v_count, positions,
                                               static_cast<const int32_t*>(pos_node), static_cast<uint4*>(shadow),
                                               flags);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("ScreenShadowKernel");
  int32_t host_flags[2] = {0, 0};
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_flags, flags, sizeof(int32_t), cudaMemcpyDeviceToHost, s));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  if (host_flags[0] != 0) {
    if (out.exact_rescans != nullptr) *out.exact_rescans = n;
    return ExactBmusAt(stream, docs, cb, out, ws, tuning, order, n);
  }
  const int rounds = std::max(1, std::min(64, tuning.warp_doc_rounds));
  const CsrView csr = docs.csr();
  ScreenArgs args{0,
                  n,
                  rounds,
                  order,
                  csr.offsets,
                  csr.indices,
                  static_cast<const char*>(shadow),
                  static_cast<uint32_t>(2 * positions),
                  positions,
                  static_cast<const float*>(norms_p),
                  static_cast<const int32_t*>(pos_node),
                  static_cast<const float*>(cb.weights),
                  cb.sq_norms,
                  m,
                  out.bmu,
                  out.second,
                  out.score,
                  static_cast<uint8_t*>(rescan)};
  const int block_warps =
      tuning.warp_block_warps == 16 || tuning.warp_block_warps == 24 || tuning.warp_block_warps == 32
          ? tuning.warp_block_warps
          : kWarps;
  const int64_t per_block = int64_t{block_warps} * rounds;
  if ((n + per_block - 1) / per_block > 0x7fffffff) {
    return absl::InvalidArgumentError(absl::StrCat("FindBmus: ", n, " documents exceed the grid"));
  }
  auto kernel = ScreenKernelFor(tuning.screen_slots == 8 ? 8 : 4, block_warps);
  TESSERA_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxL1));
  // Grouped form: positions per group (whole passes) and documents per launch
  // so the per-(group, document) candidates stay under kGroupBytes.
  const int64_t group_positions =
      tuning.screen_group_positions > 0
          ? std::max<int64_t>(kPass, std::min<int64_t>(positions, tuning.screen_group_positions / kPass * kPass))
          : positions;
  const int64_t groups = (positions + group_positions - 1) / group_positions;
  const bool grouped = groups > 1;
  if (groups > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("FindBmus: ", groups, " screening groups exceed the grid"));
  }
  const int64_t group_launch =
      std::max<int64_t>(1, std::min<int64_t>(n, static_cast<int64_t>(kGroupBytes / (sizeof(GroupCandidates) * groups))));
  GroupCandidates* candidates = nullptr;
  if (grouped) {
    TESSERA_ASSIGN_OR_RETURN(void* raw,
                             ws.Slot(kScreenGroupSlot, sizeof(GroupCandidates) * groups * group_launch, stream));
    candidates = static_cast<GroupCandidates*>(raw);
    auto group_kernel = tuning.screen_slots == 8 ? ScreenGroupKernel<8> : ScreenGroupKernel<4>;
    TESSERA_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(group_kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                                      cudaSharedmemCarveoutMaxL1));
  }
  auto screen = [&](int64_t d0, int64_t nb) -> absl::Status {
    if (!grouped) {
      ScreenArgs chunk = args;
      chunk.d0 = d0;
      chunk.nb = nb;
      kernel<<<static_cast<unsigned>((nb + per_block - 1) / per_block), 32 * block_warps, 0, s>>>(chunk);
      TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("ScreenBmuKernel");
      return absl::OkStatus();
    }
    auto group_kernel = tuning.screen_slots == 8 ? ScreenGroupKernel<8> : ScreenGroupKernel<4>;
    for (int64_t c0 = d0; c0 < d0 + nb; c0 += group_launch) {
      ScreenArgs chunk = args;
      chunk.d0 = c0;
      chunk.nb = std::min(group_launch, d0 + nb - c0);
      const int64_t group_per_block = int64_t{kWarps} * rounds;  // the grouped form keeps 8-warp blocks
      const dim3 grid(static_cast<unsigned>((chunk.nb + group_per_block - 1) / group_per_block),
                      static_cast<unsigned>(groups));
      group_kernel<<<grid, kThreads, 0, s>>>(chunk, group_positions, candidates);
      TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("ScreenGroupKernel");
      ScreenMergeKernel<<<static_cast<unsigned>((chunk.nb + kWarps - 1) / kWarps), kThreads, 0, s>>>(
          chunk, static_cast<int>(groups), candidates);
      TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("ScreenMergeKernel");
    }
    return absl::OkStatus();
  };
  // The marked documents among the first `count` positions, in visiting
  // order (a stable selection, so the exact kernel keeps the sorted order's
  // cache reuse), into `list`; returns how many.
  int32_t* selected = static_cast<int32_t*>(list);
  const uint8_t* marks = static_cast<const uint8_t*>(rescan);
  thrust::counting_iterator<int32_t> identity(0);
  size_t temp_bytes = 0;
  if (order != nullptr) {
    TESSERA_CUDA_RETURN_IF_ERROR(
        cub::DeviceSelect::Flagged(nullptr, temp_bytes, order, marks, selected, flags + 1, static_cast<int>(n), s));
  } else {
    TESSERA_CUDA_RETURN_IF_ERROR(
        cub::DeviceSelect::Flagged(nullptr, temp_bytes, identity, marks, selected, flags + 1, static_cast<int>(n), s));
  }
  TESSERA_ASSIGN_OR_RETURN(void* temp, ws.Slot(kScreenTempSlot, std::max<size_t>(temp_bytes, 16), stream));
  auto select = [&](int64_t count) -> absl::StatusOr<int64_t> {
    size_t bytes = temp_bytes;
    const int c = static_cast<int>(count);
    if (order != nullptr) {
      TESSERA_CUDA_RETURN_IF_ERROR(cub::DeviceSelect::Flagged(temp, bytes, order, marks, selected, flags + 1, c, s));
    } else {
      TESSERA_CUDA_RETURN_IF_ERROR(
          cub::DeviceSelect::Flagged(temp, bytes, identity, marks, selected, flags + 1, c, s));
    }
    TESSERA_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(host_flags + 1, flags + 1, sizeof(int32_t), cudaMemcpyDeviceToHost, s));
    TESSERA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
    return static_cast<int64_t>(host_flags[1]);
  };
  // A probe of the first positions first: when over kProbeLimit of them need
  // the exact kernel (a smooth map: the early epochs of a training), screening
  // costs more than it saves, so the rest are marked for the exact kernel
  // without being screened.
  const int64_t probe = std::min(n, std::max<int64_t>(kProbeMin, n / 16));
  TESSERA_RETURN_IF_ERROR(screen(0, probe));
  if (probe < n) {
    TESSERA_ASSIGN_OR_RETURN(const int64_t probe_rescans, select(probe));
    if (probe_rescans > kProbeLimit * probe) {
      TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(static_cast<uint8_t*>(rescan) + probe, 1, n - probe, s));
    } else {
      TESSERA_RETURN_IF_ERROR(screen(probe, n - probe));
    }
  }
  TESSERA_ASSIGN_OR_RETURN(const int64_t selected_count, select(n));
  host_flags[1] = static_cast<int32_t>(selected_count);
  const int64_t rescans = host_flags[1];
  if (out.exact_rescans != nullptr) *out.exact_rescans = rescans;
  // The listed documents (an order of their own) through the exact kernel.
  return ExactBmusAt(stream, docs, cb, out, ws, tuning, static_cast<const int32_t*>(list), rescans);
}

}  // namespace internal
}  // namespace cuda
}  // namespace som
}  // namespace tessera

// CUDA BMU search with score-space group bounds (group_bounds.h): one fused
// kernel per epoch, one warp per document, documents visited in the order the
// exhaustive search uses (previous BMU, rarest feature: bmu_order.cu), so
// neighbouring warps read the same column slices from L1/L2.
//
// Per document (bounded): the previous BMU b's group is searched first, which
// gives b's new score s_b' (the search's operations: the same bits); then, 128
// groups at a time (4 per lane), the moved bounds L_g' = L_g + m_g - 2 sum
// D_gf (the D rows of the document's features: G floats each, L2-resident),
// (fp32 with directed rounding: __fadd_ru for the sum of rises, _rd for the
// bound and the margin; the CPU reference uses double with a relative slack),
// a ballot of the groups that could tie or beat s_b', and those groups
// searched at once: each lane owns 4 consecutive nodes (one 16-byte fp32 / 8-
// byte fp16 load per feature), S / 4 lanes per group, 32 / (S / 4) groups per
// pass. Searched groups get their exact minimum as the new bound (a shuffle
// reduction over their lanes); the others keep L_g'. A full search (bounds
// not set yet) searches every group the same way. The warp's top-2 is merged
// at the end with the exhaustive kernels' rule (types.h: Top2).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/som/bmu_cuda_internal.h"
#include "kernels/som/bmu_device.cuh"
#include "kernels/som/group_bounds.h"

namespace tessera {
namespace som {
namespace cuda {
namespace {

constexpr int kThreads = 256;          // 8 warps per block
constexpr int kCountersSlot = 23;      // pairs searched, documents skipped
constexpr unsigned kFull = 0xffffffffu;

struct SearchArgs {
  int64_t n;
  const int32_t* order;  // null: storage order
  const int64_t* offsets;
  const int32_t* indices;
  const void* weights;
  const float* norms;
  int64_t m;
  int64_t groups;
  int strip;
  int32_t* bmu;
  int32_t* second;
  float* score;
  float* lower;
  const float* rise;    // null: a full search
  const float* change;
  float max_sq_norm;
  unsigned long long* counters;
};

// Sums the document's weights of kQuads 4-node quads per lane (nodes node0
// .. node0 + 4 kQuads - 1; fp32 from 0 in ascending feature order, as the
// exhaustive kernels) for the quads that are active (quad q: node0 + 4 q <
// active_end); the feature indices are loaded 32 at a time and broadcast.
template <typename TW, int kQuads>
__device__ inline void SumQuads(const SearchArgs& a, const TW* __restrict__ w, int64_t k0, int64_t nnz,
                                int64_t node0, int64_t active_end, float (&acc)[kQuads][4]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int q = 0; q < kQuads; ++q) acc[q][0] = acc[q][1] = acc[q][2] = acc[q][3] = 0.0f;
  for (int64_t kc = 0; kc < nnz; kc += 32) {
    const int chunk = static_cast<int>(nnz - kc < 32 ? nnz - kc : 32);
    const int32_t mine = lane < chunk ? __ldg(a.indices + k0 + kc + lane) : 0;
    for (int j = 0; j < chunk; ++j) {
      const int32_t f = __shfl_sync(kFull, mine, j);
#pragma unroll
      for (int q = 0; q < kQuads; ++q) {
        if (node0 + 4 * q < active_end) {
          float x[4];
          bmu_device::LoadQuad<TW, true, true>(w, a.m, 0, f, node0 + 4 * q, x);
#pragma unroll
          for (int c = 0; c < 4; ++c) acc[q][c] += x[c];
        }
      }
    }
  }
}

// One pass over up to 32 / lanes_per_group groups (groups[0, count)), each
// lane on kQuads quads (lanes_per_group = S / (4 kQuads)): scores into
// `best`, each group's exact minimum (minus E) into its bound. Returns the
// score of node `want` (only meaningful when it lies in groups[0]).
template <typename TW, int kQuads>
__device__ inline float SearchPass(const SearchArgs& a, const TW* __restrict__ w, int64_t k0, int64_t nnz,
                                   const int32_t* group_of_slot, int count, double err, float* lower, Top2& best,
                                   int32_t want) {
  const int lane = threadIdx.x & 31;
  const int lanes_per_group = a.strip / (4 * kQuads);
  const int slot = lane / lanes_per_group;
  const int64_t g = slot < count ? group_of_slot[slot] : 0;
  const int64_t node0 = g * a.strip + static_cast<int64_t>(lane % lanes_per_group) * 4 * kQuads;
  // Quads past the last node (a ragged last group; nodes % 4 == 0) sit out.
  const int64_t active_end = slot < count ? a.m : 0;
  float acc[kQuads][4];
  SumQuads<TW, kQuads>(a, w, k0, nnz, node0, active_end, acc);
  float minimum = INFINITY, wanted = 0.0f;
#pragma unroll
  for (int q = 0; q < kQuads; ++q) {
    if (node0 + 4 * q >= active_end) continue;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int64_t node = node0 + 4 * q + c;
      const float s = __ldg(a.norms + node) - 2.0f * acc[q][c];
      if (s <= best.s2) best.Insert(s, static_cast<int32_t>(node));
      minimum = group_bounds::MinimumOrNan(minimum, s);
      if (node == want) wanted = s;
    }
  }
  for (int off = lanes_per_group / 2; off > 0; off >>= 1) {
    minimum = group_bounds::MinimumOrNan(minimum, __shfl_xor_sync(kFull, minimum, off));
  }
  if (slot < count && lane % lanes_per_group == 0) lower[g] = group_bounds::BoundFromMinimum(minimum, err);
  // The lane holding `want` (in the first slot's group) hands its score over.
  const int64_t from = want >= 0 ? (want - (want / a.strip) * a.strip) / (4 * kQuads) : 0;
  return __shfl_sync(kFull, wanted, static_cast<int>(from & 31));
}

// kQuads: quads per lane. A full search (the bounds-setting epoch) takes up
// to 4 (fewer, longer passes, as the exhaustive kernels' 16 nodes per lane);
// a bounded one 1 (more groups per pass: fewer idle lanes when a document
// searches a few groups; and fewer registers).
template <typename TW, int kQuads>
__global__ void __launch_bounds__(kThreads) GroupBoundedKernel(SearchArgs a) {
  const TW* __restrict__ w = static_cast<const TW*>(a.weights);
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (kThreads / 32);
  unsigned long long searched_total = 0, skipped_total = 0;
  for (int64_t p = blockIdx.x * static_cast<int64_t>(kThreads / 32) + threadIdx.x / 32; p < a.n; p += warps) {
    const int64_t d = a.order != nullptr ? a.order[p] : p;
    const int64_t k0 = a.offsets[d];
    const int64_t nnz = a.offsets[d + 1] - k0;
    const double err = group_bounds::ScoreErrorBound(nnz, a.max_sq_norm);
    const float err_up = group_bounds::RoundUp(err);  // +inf when E is not finite: nothing excluded
    float* lower = a.lower + d * a.groups;
    Top2 best = Top2::Empty();
    const int32_t b = a.rise != nullptr ? a.bmu[d] : -1;
    const bool bounded = b >= 0 && b < a.m;
    int32_t gb = -1;
    int32_t pending[32];  // groups waiting for a pass (warp-uniform)
    float bmu_score = 0.0f;
    int64_t searched = 0;
    if (bounded) {
      gb = static_cast<int32_t>(b / a.strip);
      bmu_score = SearchPass<TW, kQuads>(a, w, k0, nnz, &gb, 1, err, lower, best, b);
      searched = 1;
    }
    const int per_pass = 32 * 4 * kQuads / a.strip;  // groups per pass
    auto pass = [&](int count) { SearchPass<TW, kQuads>(a, w, k0, nnz, pending, count, err, lower, best, -1); };
    // A non-finite s_b' excludes nothing (as GroupExcluded): -inf scores may tie.
    const bool score_finite = bmu_score > -INFINITY && bmu_score < INFINITY;
    int queued = 0;
    // 128 groups at a time, 4 consecutive ones per lane (one 16-byte load of
    // each D row when G % 4 == 0).
    const bool vector_rises = a.groups % 4 == 0;
    for (int64_t c0 = 0; c0 < a.groups; c0 += 128) {
      const int64_t g0 = c0 + 4 * static_cast<int64_t>(lane);
      bool search[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) search[j] = g0 + j < a.groups && g0 + j != gb;
      if (bounded) {  // warp-uniform: every lane takes part in the shuffles
        // In fp32 with directed rounding (the CPU reference uses double; both
        // are bounds, only their last bits differ): the sum of the rises
        // rounded up, L + m - 2 sum rounded down.
        float rises[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int64_t kc = 0; kc < nnz; kc += 32) {
          const int chunk = static_cast<int>(nnz - kc < 32 ? nnz - kc : 32);
          const int32_t mine = lane < chunk ? __ldg(a.indices + k0 + kc + lane) : 0;
          for (int jf = 0; jf < chunk; ++jf) {
            const float* row = a.rise + static_cast<int64_t>(__shfl_sync(kFull, mine, jf)) * a.groups;
            if (vector_rises) {
              if (g0 < a.groups) {
                const float4 r = __ldg(reinterpret_cast<const float4*>(row + g0));
                rises[0] = __fadd_ru(rises[0], r.x);
                rises[1] = __fadd_ru(rises[1], r.y);
                rises[2] = __fadd_ru(rises[2], r.z);
                rises[3] = __fadd_ru(rises[3], r.w);
              }
            } else {
#pragma unroll
              for (int j = 0; j < 4; ++j) {
                if (g0 + j < a.groups) rises[j] = __fadd_ru(rises[j], __ldg(row + g0 + j));
              }
            }
          }
        }
        float old[4], change[4];
        if (vector_rises && g0 < a.groups) {
          const float4 l = *reinterpret_cast<const float4*>(lower + g0);
          const float4 c = __ldg(reinterpret_cast<const float4*>(a.change + g0));
          old[0] = l.x, old[1] = l.y, old[2] = l.z, old[3] = l.w;
          change[0] = c.x, change[1] = c.y, change[2] = c.z, change[3] = c.w;
        } else {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            old[j] = g0 + j < a.groups ? lower[g0 + j] : 0.0f;
            change[j] = g0 + j < a.groups ? __ldg(a.change + g0 + j) : 0.0f;
          }
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (!search[j]) continue;
          const float moved = __fsub_rd(__fadd_rd(old[j], change[j]), 2.0f * rises[j]);
          // Excluded only when moved - E > s_b' strictly (NaN compares false).
          if (score_finite && __fsub_rd(moved, err_up) > bmu_score) {
            lower[g0 + j] = moved;
            search[j] = false;
          }
        }
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        unsigned word = __ballot_sync(kFull, search[j]);
        searched += __popc(word);
        while (word != 0) {
          pending[queued++] = static_cast<int32_t>(c0 + 4 * (__ffs(word) - 1) + j);
          word &= word - 1;
          if (queued == per_pass) {
            pass(queued);
            queued = 0;
          }
        }
      }
    }
    if (queued > 0) pass(queued);
    bmu_device::WarpMergeTop2(best);
    if (lane == 0) {
      bmu_device::WriteTop2(best, d, a.bmu, a.second, a.score);
      searched_total += searched;
      skipped_total += bounded && searched == 1;
    }
  }
  if (lane == 0 && a.counters != nullptr) {
    atomicAdd(a.counters, searched_total);
    atomicAdd(a.counters + 1, skipped_total);
  }
}

}  // namespace

absl::Status FindBmusGroupBounded(const Stream& stream, const DocumentSet& docs, const CodebookView& cb,
                                  const BmuOutput& out, const GroupBoundsView& bounds, const GroupDriftView* drift,
                                  SomWorkspace& ws, const BmuHints& hints, GroupSearchStats* stats) {
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  const int64_t n = docs.rows();
  // E needs the largest norm: 4 bytes per node to the host.
  std::vector<float> norms(static_cast<size_t>(cb.nodes));
  TESSERA_RETURN_IF_ERROR(
      CopyBytes(norms.data(), MemoryKind::kHost, cb.sq_norms, MemoryKind::kDevice, 4 * norms.size(), stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  CodebookView host = cb;
  host.sq_norms = norms.data();
  const float max_sq_norm = cpu::MaxSqNorm(host);
  // The order is computed before the search writes: previous_bmu may alias out.bmu.
  const int32_t* order = nullptr;
  if (hints.previous_bmu != nullptr || hints.document_key != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(order, internal::OrderByPreviousBmu(stream, hints.previous_bmu, hints.document_key,
                                                                 cb.features, n, cb.nodes, ws));
  }
  TESSERA_ASSIGN_OR_RETURN(void* counters_raw, ws.Slot(kCountersSlot, 2 * sizeof(unsigned long long), stream));
  auto* counters = static_cast<unsigned long long*>(counters_raw);
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(counters, 0, 2 * sizeof(unsigned long long), s));
  const CsrView csr = docs.csr();
  SearchArgs args{n,          order,       csr.offsets, csr.indices,   cb.weights, cb.sq_norms,
                  cb.nodes,   bounds.groups, bounds.strip_nodes, out.bmu, out.second, out.score,
                  bounds.lower, drift != nullptr ? drift->weight_rise : nullptr,
                  drift != nullptr ? drift->norm_change : nullptr, max_sq_norm, counters};
  int sms = 0;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, stream.ordinal()));
  const int64_t warps_needed = n;
  const unsigned blocks = static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>((warps_needed + kThreads / 32 - 1) / (kThreads / 32), int64_t{sms} * 8)));
  // Full searches: up to 4 quads (16 nodes) per lane, at most S / 4; bounded ones 1.
  const int full_quads = drift != nullptr ? 1 : bounds.strip_nodes >= 16 ? 4 : bounds.strip_nodes / 4;
  if (cb.type == WeightType::kFloat32) {
    if (full_quads == 4) {
      GroupBoundedKernel<float, 4><<<blocks, kThreads, 0, s>>>(args);
    } else if (full_quads == 2) {
      GroupBoundedKernel<float, 2><<<blocks, kThreads, 0, s>>>(args);
    } else {
      GroupBoundedKernel<float, 1><<<blocks, kThreads, 0, s>>>(args);
    }
  } else {
    if (full_quads == 4) {
      GroupBoundedKernel<__half, 4><<<blocks, kThreads, 0, s>>>(args);
    } else if (full_quads == 2) {
      GroupBoundedKernel<__half, 2><<<blocks, kThreads, 0, s>>>(args);
    } else {
      GroupBoundedKernel<__half, 1><<<blocks, kThreads, 0, s>>>(args);
    }
  }
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("GroupBoundedKernel");
  if (stats != nullptr) {
    unsigned long long host_counts[2] = {0, 0};
    TESSERA_RETURN_IF_ERROR(CopyBytes(host_counts, MemoryKind::kHost, counters, MemoryKind::kDevice,
                                      sizeof host_counts, stream));
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
    stats->documents = n;
    stats->pairs = n * bounds.groups;
    stats->pairs_searched = static_cast<int64_t>(host_counts[0]);
    stats->documents_skipped = static_cast<int64_t>(host_counts[1]);
  }
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace som
}  // namespace tessera

// The multi-document warp kernel (BmuTuning::warp_docs = 2 or 4): one warp per
// (kDocs documents, group of nodes). The single-document warp kernel loads the
// weights of every (document, feature) pair from L2; here a warp merges the
// ascending feature lists of its documents on the fly and loads each distinct
// feature's 128 weights once, adding them into the register accumulators of
// every document of the warp that has that feature. Documents sorted by their
// previous BMU (bmu_order.cu) share more features, so more loads are saved.
//
// Bits: each document's accumulator still receives exactly its own features'
// weights in ascending feature order starting from 0 (a merged entry adds to a
// document only if its mask bit is set), so scores equal the CPU backend's.
// All control flow is warp-uniform: the merge state lives in every lane alike
// and each document's features are spread over the lanes (32 at a time) and
// read with shuffles.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/som/bmu_cuda_internal.h"
#include "kernels/som/bmu_device.cuh"

namespace tessera {
namespace som {
namespace cuda {
namespace internal {
namespace {

using bmu_device::LoadQuad;
using bmu_device::WarpMergeTop2;

constexpr int kThreads = kBmuThreads;
constexpr int kWarps = kThreads / 32;
constexpr int kLane = 4;            // nodes per lane
constexpr int kSpan = 32 * kLane;   // nodes per warp step
constexpr int kDepth = 4;           // merged features whose loads are issued before any add
constexpr int32_t kEnd = 0x7fffffff;  // past a document's last feature (never a feature index)

struct MultiDocArgs {
  int64_t d0;            // first position of the launch
  int64_t nb;            // positions in the launch
  const int32_t* order;  // position -> document; null: the identity
  const int64_t* offsets;
  const int32_t* indices;
  const void* weights;
  const float* norms;
  int64_t m;
  int64_t v_count;
  int64_t group_nodes;  // multiple of kSpan
  Top2* partials;       // [group][position - d0]
};

template <typename TW, bool kFeatureMajor, bool kVec, int kDocs>
__global__ void __launch_bounds__(kThreads) MultiDocWarpKernel(MultiDocArgs a) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int64_t p0 = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * kDocs;  // launch-local position
  if (p0 >= a.nb) return;  // whole warp
  const TW* __restrict__ w = static_cast<const TW*>(a.weights);
  int64_t off[kDocs];
  int nnz[kDocs];
#pragma unroll
  for (int j = 0; j < kDocs; ++j) {
    const int64_t p = p0 + j;
    off[j] = 0;
    nnz[j] = 0;
    if (p < a.nb) {
      const int64_t d = a.order != nullptr ? a.order[a.d0 + p] : a.d0 + p;
      off[j] = a.offsets[d];
      nnz[j] = static_cast<int>(a.offsets[d + 1] - off[j]);
    }
  }
  const int64_t g0 = static_cast<int64_t>(blockIdx.y) * a.group_nodes;
  const int64_t g1 = g0 + a.group_nodes < a.m ? g0 + a.group_nodes : a.m;
  Top2 t[kDocs];
#pragma unroll
  for (int j = 0; j < kDocs; ++j) t[j] = Top2::Empty();
  for (int64_t base = g0; base < g1; base += kSpan) {
    const int64_t n0 = base + kLane * lane;
    float acc[kDocs][kLane];
    int pos[kDocs];     // next feature of document j (its k-th), the same in every lane
    int window[kDocs];  // first feature held in `mine` (a multiple of 32)
    int32_t mine[kDocs];
#pragma unroll
    for (int j = 0; j < kDocs; ++j) {
#pragma unroll
      for (int c = 0; c < kLane; ++c) acc[j][c] = 0.0f;
      pos[j] = 0;
      window[j] = 0;
      mine[j] = lane < nnz[j] ? __ldg(a.indices + off[j] + lane) : kEnd;
    }
    while (true) {
      // The next kDepth distinct features of the merged lists, and per feature
      // the documents that have it.
      int32_t v[kDepth];
      unsigned mask[kDepth];
#pragma unroll
      for (int u = 0; u < kDepth; ++u) {
        int32_t head[kDocs];
        int32_t lowest = kEnd;
#pragma unroll
        for (int j = 0; j < kDocs; ++j) {
          if (pos[j] - window[j] == 32 && pos[j] < nnz[j]) {  // long document: next 32 features
            window[j] = pos[j];
            mine[j] = window[j] + lane < nnz[j] ? __ldg(a.indices + off[j] + window[j] + lane) : kEnd;
          }
          head[j] = __shfl_sync(0xffffffffu, mine[j], (pos[j] - window[j]) & 31);
          if (pos[j] >= nnz[j]) head[j] = kEnd;
          lowest = head[j] < lowest ? head[j] : lowest;
        }
        unsigned bits = 0;
#pragma unroll
        for (int j = 0; j < kDocs; ++j) {
          if (lowest != kEnd && head[j] == lowest) {
            bits |= 1u << j;
            ++pos[j];
          }
        }
        v[u] = lowest;
        mask[u] = bits;
      }
      if (mask[0] == 0) break;  // every list exhausted (later masks are empty too)
      float q[kDepth][kLane];
#pragma unroll
      for (int u = 0; u < kDepth; ++u) {
        if (mask[u] != 0) {
          LoadQuad<TW, kFeatureMajor, kVec>(w, a.m, a.v_count, v[u], n0, q[u]);
        } else {
#pragma unroll
          for (int c = 0; c < kLane; ++c) q[u][c] = 0.0f;
        }
      }
      // Ascending features per document, as the CPU backend.
#pragma unroll
      for (int u = 0; u < kDepth; ++u) {
#pragma unroll
        for (int j = 0; j < kDocs; ++j) {
          if ((mask[u] >> j) & 1u) {
#pragma unroll
            for (int c = 0; c < kLane; ++c) acc[j][c] += q[u][c];
          }
        }
      }
    }
#pragma unroll
    for (int c = 0; c < kLane; ++c) {
      const int64_t node = n0 + c;
      if (node < g1) {
        const float norm = __ldg(a.norms + node);
#pragma unroll
        for (int j = 0; j < kDocs; ++j) t[j].Insert(norm - 2.0f * acc[j][c], static_cast<int32_t>(node));
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kDocs; ++j) {
    WarpMergeTop2(t[j]);
    if (lane == 0 && p0 + j < a.nb) a.partials[static_cast<int64_t>(blockIdx.y) * a.nb + p0 + j] = t[j];
  }
}

template <typename TW, bool kFeatureMajor, int kDocs>
void LaunchDocs(const MultiDocArgs& args, int groups, bool vec, cudaStream_t s) {
  const int64_t per_block = int64_t{kWarps} * kDocs;
  const dim3 grid(static_cast<unsigned>((args.nb + per_block - 1) / per_block), static_cast<unsigned>(groups));
  if (kFeatureMajor && vec) {
    MultiDocWarpKernel<TW, kFeatureMajor, true, kDocs><<<grid, kThreads, 0, s>>>(args);
  } else {
    MultiDocWarpKernel<TW, kFeatureMajor, false, kDocs><<<grid, kThreads, 0, s>>>(args);
  }
}

template <typename TW, bool kFeatureMajor>
void Launch(const MultiDocArgs& args, int groups, bool vec, int docs_per_warp, cudaStream_t s) {
  if (docs_per_warp == 4) {
    LaunchDocs<TW, kFeatureMajor, 4>(args, groups, vec, s);
  } else {
    LaunchDocs<TW, kFeatureMajor, 2>(args, groups, vec, s);
  }
}

}  // namespace

absl::Status MultiDocWarpBmus(const Stream& stream, const DocumentSet& docs, const CodebookView& cb,
                              const BmuOutput& out, SomWorkspace& ws, const BmuTuning& tuning, const int32_t* order) {
  const int64_t n = docs.rows();
  const int64_t group_nodes = std::max<int64_t>(kSpan, tuning.warp_group_nodes / kSpan * kSpan);
  const int64_t groups = (cb.nodes + group_nodes - 1) / group_nodes;
  if (groups > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("FindBmus: ", cb.nodes, " nodes exceed the warp kernel's limit of ",
                                                   int64_t{65535} * group_nodes));
  }
  const int per_warp = tuning.warp_docs == 4 ? 4 : 2;
  const int64_t per_launch = std::max<int64_t>(
      1, std::min<int64_t>({n, int64_t{1} << 30, static_cast<int64_t>(kWarpPartialsBytes / (sizeof(Top2) * groups))}));
  TESSERA_ASSIGN_OR_RETURN(void* partials_raw, ws.Slot(kWarpPartialsSlot, sizeof(Top2) * groups * per_launch, stream));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  const bool fm = cb.layout == CodebookLayout::kFeatureMajor;
  const bool vec = cb.nodes % 4 == 0;
  const CsrView csr = docs.csr();
  const int g = static_cast<int>(groups);
  for (int64_t d0 = 0; d0 < n; d0 += per_launch) {
    const int64_t nb = std::min(per_launch, n - d0);
    const MultiDocArgs args{d0,       nb,          order,       csr.offsets, csr.indices,
                            cb.weights, cb.sq_norms, cb.nodes, cb.features, group_nodes,
                            static_cast<Top2*>(partials_raw)};
    if (cb.type == WeightType::kFloat32) {
      fm ? Launch<float, true>(args, g, vec, per_warp, s) : Launch<float, false>(args, g, vec, per_warp, s);
    } else {
      fm ? Launch<__half, true>(args, g, vec, per_warp, s) : Launch<__half, false>(args, g, vec, per_warp, s);
    }
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("MultiDocWarpKernel");
    TESSERA_RETURN_IF_ERROR(LaunchMergePartials(stream, args.partials, nb, g, d0, order, out));
  }
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace cuda
}  // namespace som
}  // namespace tessera

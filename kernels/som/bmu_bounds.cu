// CUDA BMU search with distance bounds (bmu_bounds.h). Per epoch:
//   1. PrepareKernel (one thread per document): shifts the bounds; a document
//      whose BMU provably stays gets its score (one sparse dot product, the
//      kernels' operations) and a masked previous BMU of -1; the others keep
//      their previous BMU and are counted (warp-aggregated atomic).
//   2. The visiting order the exact search sorts anyway (bmu_order.cu) on the
//      masked BMUs: masked documents sort last, so the order's first `count`
//      positions are exactly the documents to search, still in (previous BMU,
//      key) order. The count comes back to the host (4 bytes) and the
//      register-span kernel (ExactBmusAt) runs on those positions only: late
//      epochs launch work only for the documents that need it.
//   3. RefreshKernel (one thread per searched position): bounds from the new
//      BMU's score and the second-best's score (one more dot product).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/som/bmu_bounds.h"
#include "kernels/som/bmu_cuda_internal.h"

namespace tessera {
namespace som {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaskedSlot = 23;   // masked previous BMUs (the order's key)
constexpr int kCounterSlot = 24;  // documents to search

__device__ inline float Widen(float w) { return w; }
__device__ inline float Widen(__half w) { return __half2float(w); }

// As the search kernels: fp32 from 0 in ascending feature order, then
// ||w||^2 - 2 sum (the doubling is exact, so a contraction to an FMA rounds alike).
template <typename TW>
__device__ inline float NodeScore(const int64_t* __restrict__ offsets, const int32_t* __restrict__ indices,
                                  const TW* __restrict__ w, const float* __restrict__ norms, int64_t m, int64_t d,
                                  int32_t node) {
  float acc = 0.0f;
  for (int64_t k = offsets[d]; k < offsets[d + 1]; ++k) {
    acc += Widen(__ldg(w + static_cast<int64_t>(__ldg(indices + k)) * m + node));
  }
  return __ldg(norms + node) - 2.0f * acc;
}

struct PrepareArgs {
  int64_t n;
  const int64_t* offsets;
  const int32_t* indices;
  const void* weights;
  const float* norms;
  int64_t m;
  const int32_t* bmu;
  float* score;
  float* upper;
  float* lower;
  const float* node_shift;
  BoundStep step;
  int32_t* masked;
  unsigned long long* count;
};

template <typename TW>
__global__ void PrepareKernel(PrepareArgs a) {
  const int64_t d = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  bool search = false;
  if (d < a.n) {
    const int32_t b = a.bmu[d];
    search = true;
    if (b >= 0 && b < a.m) {
      const int64_t nnz = a.offsets[d + 1] - a.offsets[d];
      const double err = bounds::ScoreErrorBound(nnz, a.step.max_sq_norm);
      const float upper = bounds::ShiftedUpper(a.upper[d], a.node_shift[b]);
      const float lower = bounds::ShiftedLower(a.lower[d], bounds::OtherShift(a.step, b));
      a.lower[d] = lower;
      if (bounds::CanSkip(upper, lower, err)) {
        const float s = NodeScore(a.offsets, a.indices, static_cast<const TW*>(a.weights), a.norms, a.m, d, b);
        a.score[d] = s;
        a.upper[d] = bounds::UpperFromScore(nnz, s, err);
        search = false;
      }
    }
    // Searched documents keep a key inside [0, m) (an invalid BMU sorts as
    // node 0): only the skipped ones (-1) may sort behind the count.
    a.masked[d] = search ? (b >= 0 && b < a.m ? b : 0) : -1;
  }
  const unsigned ballot = __ballot_sync(0xffffffffu, search);
  if ((threadIdx.x & 31) == 0 && ballot != 0) atomicAdd(a.count, static_cast<unsigned long long>(__popc(ballot)));
}

struct RefreshArgs {
  int64_t count;
  const int32_t* order;  // null: the identity
  const int64_t* offsets;
  const int32_t* indices;
  const void* weights;
  const float* norms;
  int64_t m;
  const int32_t* second;
  const float* score;
  float* upper;
  float* lower;
  float max_sq_norm;
};

template <typename TW>
__global__ void RefreshKernel(RefreshArgs a) {
  const int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (p >= a.count) return;
  const int64_t d = a.order != nullptr ? a.order[p] : p;
  const int64_t nnz = a.offsets[d + 1] - a.offsets[d];
  const double err = bounds::ScoreErrorBound(nnz, a.max_sq_norm);
  a.upper[d] = bounds::UpperFromScore(nnz, a.score[d], err);
  const int32_t second = a.second[d];
  a.lower[d] = second < 0 ? INFINITY
                          : bounds::LowerFromScore(
                                nnz, NodeScore(a.offsets, a.indices, static_cast<const TW*>(a.weights), a.norms, a.m,
                                               d, second),
                                err);
}

unsigned Blocks(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

absl::Status Refresh(cudaStream_t s, const RefreshArgs& args, WeightType type) {
  if (args.count == 0) return absl::OkStatus();
  if (type == WeightType::kFloat32) {
    RefreshKernel<float><<<Blocks(args.count), kThreads, 0, s>>>(args);
  } else {
    RefreshKernel<__half><<<Blocks(args.count), kThreads, 0, s>>>(args);
  }
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("RefreshKernel");
  return absl::OkStatus();
}

}  // namespace

absl::Status FindBmusBounded(const Stream& stream, const DocumentSet& docs, const CodebookView& cb,
                             const BmuOutput& out, const BmuBounds& bounds, const BoundStep& step, SomWorkspace& ws,
                             BmuTuning tuning, const BmuHints& hints, int64_t* searched) {
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  const int64_t n = docs.rows();
  const CsrView csr = docs.csr();
  RefreshArgs refresh{n, nullptr, csr.offsets, csr.indices, cb.weights, cb.sq_norms, cb.nodes,
                      out.second, out.score, bounds.upper, bounds.lower, step.max_sq_norm};
  if (!step.have_bounds) {
    // The first search: every document, as FindBmus does, then every bound.
    TESSERA_RETURN_IF_ERROR(cuda::FindBmus(stream, BmuAlgorithm::kFeatureMajor, docs, cb, out, &ws, tuning, hints));
    TESSERA_RETURN_IF_ERROR(Refresh(s, refresh, cb.type));
    if (searched != nullptr) *searched = n;
    return absl::OkStatus();
  }
  TESSERA_ASSIGN_OR_RETURN(void* masked_raw, ws.Slot(kMaskedSlot, sizeof(int32_t) * n, stream));
  TESSERA_ASSIGN_OR_RETURN(void* count_raw, ws.Slot(kCounterSlot, sizeof(unsigned long long), stream));
  auto* count = static_cast<unsigned long long*>(count_raw);
  auto* masked = static_cast<int32_t*>(masked_raw);
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(count, 0, sizeof(unsigned long long), s));
  const PrepareArgs prepare{n,        csr.offsets,  csr.indices,  cb.weights,      cb.sq_norms, cb.nodes, out.bmu,
                            out.score, bounds.upper, bounds.lower, step.node_shift, step,        masked,   count};
  if (cb.type == WeightType::kFloat32) {
    PrepareKernel<float><<<Blocks(n), kThreads, 0, s>>>(prepare);
  } else {
    PrepareKernel<__half><<<Blocks(n), kThreads, 0, s>>>(prepare);
  }
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("PrepareKernel");
  // Masked documents (-1) sort last: the first `to_search` positions are the
  // documents to search, in the order the full search would visit them.
  TESSERA_ASSIGN_OR_RETURN(const int32_t* order,
                           internal::OrderByPreviousBmu(stream, masked, hints.document_key, cb.features, n, cb.nodes,
                                                        ws));
  unsigned long long to_search = 0;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&to_search, count, sizeof(to_search), cudaMemcpyDeviceToHost, s));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  const int64_t k = static_cast<int64_t>(to_search);
  TESSERA_RETURN_IF_ERROR(internal::ExactBmusAt(stream, docs, cb, out, ws, tuning, order, k));
  refresh.count = k;
  refresh.order = order;
  TESSERA_RETURN_IF_ERROR(Refresh(s, refresh, cb.type));
  if (searched != nullptr) *searched = k;
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace som
}  // namespace tessera

// CUDA quality pass (quality_device.h): per-document terms as quality.cc,
// block partials in double, summed over blocks in order by one block.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/som/quality_device.h"

namespace tessera {
namespace som {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocks = 1024;  // fixed: the partials and their order do not depend on the device
constexpr int kPartialsSlot = 18;
constexpr int kHitsSlot = 19;

__global__ void __launch_bounds__(kThreads)
    QualityTermsKernel(const int64_t* __restrict__ offsets, int64_t docs, const int32_t* __restrict__ bmu,
                       const int32_t* __restrict__ second, const float* __restrict__ score,
                       const float* __restrict__ sq_norms, GridShape grid, Adjacency adjacency,
                       double* __restrict__ partials, unsigned char* __restrict__ hits) {
  __shared__ double sums[3][kThreads];
  double e = 0, c = 0, t = 0;
  for (int64_t d = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; d < docs;
       d += static_cast<int64_t>(kBlocks) * kThreads) {
    const double nnz = static_cast<double>(offsets[d + 1] - offsets[d]);
    const double s = score[d];
    const int32_t b = bmu[d];
    const double norm = sq_norms[b];
    e += sqrt(fmax(0.0, nnz + s));
    const double denom = sqrt(nnz) * sqrt(fmax(0.0, norm));
    c += denom > 0 ? 1.0 - (norm - s) / 2.0 / denom : 1.0;
    if (second != nullptr && second[d] >= 0 && !AreNeighbours(b, second[d], grid, adjacency)) t += 1;
    hits[b] = 1;
  }
  sums[0][threadIdx.x] = e;
  sums[1][threadIdx.x] = c;
  sums[2][threadIdx.x] = t;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half >>= 1) {
    if (threadIdx.x < half) {
      for (int k = 0; k < 3; ++k) sums[k][threadIdx.x] += sums[k][threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x < 3) partials[3 * blockIdx.x + threadIdx.x] = sums[threadIdx.x][0];
}

// out[0..2] = the sums over blocks (in block order), out[3] = nodes hit.
__global__ void QualityTotalsKernel(const double* __restrict__ partials, const unsigned char* __restrict__ hits,
                                    int64_t m, double* __restrict__ out) {
  __shared__ long long counts[kThreads];
  long long hit = 0;
  for (int64_t i = threadIdx.x; i < m; i += kThreads) hit += hits[i];
  counts[threadIdx.x] = hit;
  __syncthreads();
  if (threadIdx.x == 0) {
    long long total = 0;
    for (int k = 0; k < kThreads; ++k) total += counts[k];
    double sums[3] = {0, 0, 0};
    for (int b = 0; b < kBlocks; ++b) {
      for (int k = 0; k < 3; ++k) sums[k] += partials[3 * b + k];
    }
    out[0] = sums[0];
    out[1] = sums[1];
    out[2] = sums[2];
    out[3] = static_cast<double>(total);
  }
}

}  // namespace

absl::StatusOr<QualityMetrics> ComputeQuality(const Stream& stream, const int64_t* offsets, int64_t docs,
                                              const int32_t* bmu, const int32_t* second, const float* score,
                                              const float* sq_norms, const GridShape& grid, Adjacency adjacency,
                                              SomWorkspace& ws) {
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  const int64_t m = grid.nodes();
  QualityMetrics q;
  q.docs = docs;
  TESSERA_ASSIGN_OR_RETURN(void* partials_raw, ws.Slot(kPartialsSlot, sizeof(double) * (3 * kBlocks + 4), stream));
  TESSERA_ASSIGN_OR_RETURN(void* hits_raw, ws.Slot(kHitsSlot, static_cast<size_t>(m > 0 ? m : 1), stream));
  double* partials = static_cast<double*>(partials_raw);
  unsigned char* hits = static_cast<unsigned char*>(hits_raw);
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(hits, 0, static_cast<size_t>(m > 0 ? m : 1), s));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(partials, 0, sizeof(double) * (3 * kBlocks + 4), s));
  if (docs > 0) {
    QualityTermsKernel<<<kBlocks, kThreads, 0, s>>>(offsets, docs, bmu, second, score, sq_norms, grid, adjacency,
                                                    partials, hits);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("QualityTermsKernel");
  }
  QualityTotalsKernel<<<1, kThreads, 0, s>>>(partials, hits, m, partials + 3 * kBlocks);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("QualityTotalsKernel");
  double totals[4];
  TESSERA_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(totals, partials + 3 * kBlocks, sizeof totals, cudaMemcpyDeviceToHost, s));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  if (docs > 0) {
    q.qe_euclidean = totals[0] / docs;
    q.qe_cosine = totals[1] / docs;
    q.topographic_error = totals[2] / docs;
  }
  q.dead_units = m - static_cast<int64_t>(totals[3]);
  q.dead_unit_fraction = m > 0 ? static_cast<double>(q.dead_units) / m : 0.0;
  return q;
}

}  // namespace cuda
}  // namespace som
}  // namespace tessera

// The bucketed CSR SpMV (row_buckets.h): one launch per non-empty length
// class with V lanes per row (V = 1 ... 32, a sub-warp of V lanes reads the
// row's entries V apart, coalesced, and reduces with a fixed xor-shuffle
// tree), one warp per 1024-entry chunk of the long rows, then one warp per
// long row adding its chunk sums in chunk order. No atomics: the same
// structure gives the same bits on every run. Also the column-index check
// and y = beta y for matrices without entries.
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "common/buffer.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/reconstruction/linalg/spmv_cuda.h"

namespace tessera {
namespace recon {
namespace linalg {
namespace cuda {
namespace {

constexpr int kThreads = 256;

cudaStream_t Native(const Stream& s) { return static_cast<cudaStream_t>(s.native()); }

int BlocksFor(int64_t threads) { return static_cast<int>((threads + kThreads - 1) / kThreads); }

__device__ __forceinline__ float Output(float sum, float alpha, float beta, const float* y, int32_t row) {
  return beta == 0.0f ? alpha * sum : fmaf(alpha, sum, beta * y[row]);
}

// Rows of one class: V lanes per row; `rows` null means slot == row.
template <int V>
__global__ void __launch_bounds__(kThreads)
    ClassRowsKernel(const int32_t* __restrict__ rows, int64_t count, const int32_t* __restrict__ row_ptr,
                    const int32_t* __restrict__ col_idx, const float* __restrict__ values, const float* __restrict__ x,
                    float* __restrict__ y, float alpha, float beta) {
  const int64_t slot = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) / V;
  if (slot >= count) return;  // whole sub-warps leave together, so the shuffle masks stay exact
  const int lane = threadIdx.x % V;
  const int32_t row = rows != nullptr ? rows[slot] : static_cast<int32_t>(slot);
  const int32_t end = row_ptr[row + 1];
  float sum = 0.0f;
  for (int32_t k = row_ptr[row] + lane; k < end; k += V) sum = fmaf(values[k], __ldg(x + col_idx[k]), sum);
  if (V > 1) {
    const unsigned group = (threadIdx.x & 31) & ~(V - 1);
    const unsigned mask = V == 32 ? 0xffffffffu : (((1u << V) - 1u) << group);
#pragma unroll
    for (int offset = V / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(mask, sum, offset);
  }
  if (lane == 0) y[row] = Output(sum, alpha, beta, y, row);
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// One warp per chunk of a long row: partials[chunk] = its entries' sum.
__global__ void __launch_bounds__(kThreads)
    LongChunksKernel(const int32_t* __restrict__ chunk_row, const int32_t* __restrict__ chunk_start, int64_t num_chunks,
                     const int32_t* __restrict__ row_ptr, const int32_t* __restrict__ col_idx,
                     const float* __restrict__ values, const float* __restrict__ x, float* __restrict__ partials) {
  const int64_t chunk = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) / 32;
  if (chunk >= num_chunks) return;  // whole warps
  const int lane = threadIdx.x & 31;
  const int32_t begin = chunk_start[chunk];
  const int32_t end = min(begin + kLongChunk, row_ptr[chunk_row[chunk] + 1]);
  float sum = 0.0f;
#pragma unroll 4
  for (int32_t k = begin + lane; k < end; k += 32) sum = fmaf(values[k], __ldg(x + col_idx[k]), sum);
  sum = WarpSum(sum);
  if (lane == 0) partials[chunk] = sum;
}

// One warp per long row: its chunk sums, lane-strided then a fixed tree.
__global__ void __launch_bounds__(kThreads)
    LongRowsKernel(const int32_t* __restrict__ long_rows, const int32_t* __restrict__ chunk_begin, int64_t count,
                   const float* __restrict__ partials, float* __restrict__ y, float alpha, float beta) {
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) / 32;
  if (i >= count) return;
  const int lane = threadIdx.x & 31;
  float sum = 0.0f;
  for (int32_t c = chunk_begin[i] + lane; c < chunk_begin[i + 1]; c += 32) sum += partials[c];
  sum = WarpSum(sum);
  if (lane == 0) y[long_rows[i]] = Output(sum, alpha, beta, y, long_rows[i]);
}

__global__ void FirstBadColumnKernel(const int32_t* __restrict__ col_idx, int64_t nnz, int32_t cols,
                                     unsigned long long* first) {
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < nnz;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t c = col_idx[k];
    if (c < 0 || c >= cols) atomicMin(first, static_cast<unsigned long long>(k));
  }
}

__global__ void ScaleYKernel(float* y, int64_t n, float beta) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = beta == 0.0f ? 0.0f : beta * y[i];
  }
}

template <typename T>
const T* Data(const std::shared_ptr<Buffer>& b) {
  return static_cast<const T*>(b->data());
}

class BucketedSpmv : public SpmvKernel {
 public:
  static absl::StatusOr<std::unique_ptr<SpmvKernel>> Create(const CsrMatrix& m, const Stream& stream,
                                                            const RowBuckets& b) {
    std::unique_ptr<BucketedSpmv> k(new BucketedSpmv(m, stream, b));
    TESSERA_ASSIGN_OR_RETURN(k->rows_, UploadVector(b.rows, stream));
    TESSERA_ASSIGN_OR_RETURN(k->long_rows_, UploadVector(b.long_rows, stream));
    TESSERA_ASSIGN_OR_RETURN(k->long_chunk_begin_, UploadVector(b.long_chunk_begin, stream));
    TESSERA_ASSIGN_OR_RETURN(k->chunk_row_, UploadVector(b.chunk_row, stream));
    TESSERA_ASSIGN_OR_RETURN(k->chunk_start_, UploadVector(b.chunk_start, stream));
    TESSERA_ASSIGN_OR_RETURN(k->partials_,
                             Buffer::Allocate(MemoryKind::kDevice, b.num_chunks() * sizeof(float), stream.ordinal()));
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());  // the host vectors go away
    return std::unique_ptr<SpmvKernel>(std::move(k));
  }

  absl::Status Apply(const float* x, float* y, float alpha, float beta) override {
    TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream_.ordinal()));
    const cudaStream_t s = Native(stream_);
    for (int c = 0; c < kNumRowClasses; ++c) {
      const int64_t count = class_begin_[c + 1] - class_begin_[c];
      if (count == 0) continue;
      const int32_t* rows = identity_ ? nullptr : Data<int32_t>(rows_) + class_begin_[c];
      const int blocks = BlocksFor(count * kRowClassLanes[c]);
#define TESSERA_SPMV_CLASS(V)                                                                                          \
  case V:                                                                                                              \
    ClassRowsKernel<V><<<blocks, kThreads, 0, s>>>(rows, count, m_.row_ptr, m_.col_idx, m_.values, x, y, alpha, beta); \
    break;
      switch (kRowClassLanes[c]) {
        TESSERA_SPMV_CLASS(1)
        TESSERA_SPMV_CLASS(2)
        TESSERA_SPMV_CLASS(4)
        TESSERA_SPMV_CLASS(8)
        TESSERA_SPMV_CLASS(16)
        TESSERA_SPMV_CLASS(32)
        default:
          return absl::InternalError("spmv: unexpected lanes per row");
      }
#undef TESSERA_SPMV_CLASS
      TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("spmv class rows");
    }
    if (num_chunks_ > 0) {
      float* partials = static_cast<float*>(partials_->data());
      LongChunksKernel<<<BlocksFor(num_chunks_ * 32), kThreads, 0, s>>>(Data<int32_t>(chunk_row_),
                                                                        Data<int32_t>(chunk_start_), num_chunks_,
                                                                        m_.row_ptr, m_.col_idx, m_.values, x, partials);
      TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("spmv long chunks");
      LongRowsKernel<<<BlocksFor(num_long_ * 32), kThreads, 0, s>>>(
          Data<int32_t>(long_rows_), Data<int32_t>(long_chunk_begin_), num_long_, partials, y, alpha, beta);
      TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("spmv long rows");
    }
    return absl::OkStatus();
  }

 private:
  BucketedSpmv(const CsrMatrix& m, const Stream& stream, const RowBuckets& b)
      : m_(m),
        stream_(stream),
        class_begin_(b.class_begin),
        identity_(b.identity),
        num_chunks_(b.num_chunks()),
        num_long_(static_cast<int64_t>(b.long_rows.size())) {}

  CsrMatrix m_;
  const Stream& stream_;
  std::array<int64_t, kNumRowClasses + 1> class_begin_;
  bool identity_;
  int64_t num_chunks_;
  int64_t num_long_;
  std::shared_ptr<Buffer> rows_, long_rows_, long_chunk_begin_, chunk_row_, chunk_start_, partials_;
};

}  // namespace

absl::StatusOr<int64_t> FirstBadColumn(const Stream& stream, const int32_t* col_idx, int64_t nnz, int64_t cols) {
  if (nnz == 0) return -1;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(auto first,
                           Buffer::Allocate(MemoryKind::kDevice, sizeof(unsigned long long), stream.ordinal()));
  auto* d_first = static_cast<unsigned long long*>(first->data());
  const cudaStream_t s = Native(stream);
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_first, 0xff, sizeof(unsigned long long), s));
  const int blocks = static_cast<int>(std::min<int64_t>(BlocksFor(nnz), 4096));
  FirstBadColumnKernel<<<blocks, kThreads, 0, s>>>(col_idx, nnz, static_cast<int32_t>(cols), d_first);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("csr column check");
  unsigned long long host = 0;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&host, d_first, sizeof(host), cudaMemcpyDeviceToHost, s));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return host == ~0ull ? int64_t{-1} : static_cast<int64_t>(host);
}

absl::Status ScaleY(const Stream& stream, float* y, int64_t n, float beta) {
  if (n == 0) return absl::OkStatus();
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  ScaleYKernel<<<static_cast<int>(std::min<int64_t>(BlocksFor(n), 4096)), kThreads, 0, Native(stream)>>>(y, n, beta);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("spmv scale y");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SpmvKernel>> CreateBucketedSpmv(const CsrMatrix& matrix, const Stream& stream,
                                                               const RowBuckets& buckets) {
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  return BucketedSpmv::Create(matrix, stream, buckets);
}

}  // namespace cuda
}  // namespace linalg
}  // namespace recon
}  // namespace tessera

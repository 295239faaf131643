// CUDA element-wise ops (grid-stride loops) and deterministic dot/sum: one
// fixed-tree block sum per block into partials, then the partials summed in
// index order by one block (kernels/registration/reduce.cuh).
#include <cuda_runtime.h>

#include "common/buffer.h"
#include "common/cuda_check.h"
#include "kernels/reconstruction/vector_ops.h"
#include "kernels/registration/reduce.cuh"

namespace tessera {
namespace recon {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 4096;  // also the number of partials of Dot/Sum

int Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

cudaStream_t Native(const Stream& s) { return static_cast<cudaStream_t>(s.native()); }

template <typename F>
__global__ void ForEach(int64_t n, F f) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) f(i);
}

template <typename F>
absl::Status Launch(const Stream& stream, int64_t n, F f) {
  if (n == 0) return absl::OkStatus();
  ForEach<<<Blocks(n), kThreads, 0, Native(stream)>>>(n, f);
  return CudaStatus(cudaGetLastError(), "recon vector op");
}

// partials[block] = sum over the block's grid-stride elements of x*y (or x).
template <bool kProduct>
__global__ void PartialSums(const float* x, const float* y, int64_t n, double* partials) {
  __shared__ double scratch[32];
  double v[1] = {0.0};
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    v[0] += kProduct ? static_cast<double>(x[i]) * y[i] : static_cast<double>(x[i]);
  }
  registration::cuda_detail::BlockSum<1>(v, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = v[0];
}

__global__ void SumPartialsInOrder(const double* partials, int count, double* out) {
  // One thread: `count` <= kMaxBlocks doubles, read once; the order is fixed.
  double s = 0;
  for (int i = 0; i < count; ++i) s += partials[i];
  *out = s;
}

template <bool kProduct>
absl::StatusOr<double> Reduce(const Stream& stream, const float* x, const float* y, int64_t n) {
  if (n == 0) return 0.0;
  const int blocks = Blocks(n);
  // The partials (<= 32 KiB) come from the stream-ordered pool: no
  // cudaMalloc/cudaFree (and its device-wide synchronisation) per dot
  // product, which the solvers call a few times per iteration.
  double* partials = nullptr;
  if (auto s = CudaStatus(cudaMallocAsync(reinterpret_cast<void**>(&partials), (blocks + 1) * sizeof(double),
                                          Native(stream)),
                          "recon reduce scratch");
      !s.ok()) {
    return s;
  }
  PartialSums<kProduct><<<blocks, kThreads, 0, Native(stream)>>>(x, y, n, partials);
  SumPartialsInOrder<<<1, 1, 0, Native(stream)>>>(partials, blocks, partials + blocks);
  absl::Status status = CudaStatus(cudaGetLastError(), "recon reduce");
  double result = 0;
  if (status.ok()) {
    status = CudaStatus(cudaMemcpyAsync(&result, partials + blocks, sizeof(double), cudaMemcpyDeviceToHost,
                                        Native(stream)),
                        "recon reduce copy");
  }
  const absl::Status freed = CudaStatus(cudaFreeAsync(partials, Native(stream)), "recon reduce free");
  if (status.ok()) status = freed;
  if (status.ok()) status = stream.Synchronize();
  if (!status.ok()) return status;
  return result;
}

}  // namespace

// Functors instead of device lambdas: no --extended-lambda needed.
struct FillOp {
  float* x;
  float value;
  __device__ void operator()(int64_t i) const { x[i] = value; }
};
struct AxpyOp {
  float a;
  const float* x;
  float* y;
  __device__ void operator()(int64_t i) const { y[i] += a * x[i]; }
};
struct XpbyOp {
  const float* x;
  float b;
  float* y;
  __device__ void operator()(int64_t i) const { y[i] = x[i] + b * y[i]; }
};
struct ScaleOp {
  float a;
  float* x;
  __device__ void operator()(int64_t i) const { x[i] *= a; }
};
struct SafeDivideOp {
  const float* num;
  const float* den;
  float eps;
  float* out;
  __device__ void operator()(int64_t i) const { out[i] = fabsf(den[i]) > eps ? num[i] / den[i] : 0.0f; }
};
struct MultiplyOp {
  const float* y;
  float* x;
  __device__ void operator()(int64_t i) const { x[i] *= y[i]; }
};
struct SubtractOp {
  const float* a;
  const float* b;
  float* out;
  __device__ void operator()(int64_t i) const { out[i] = a[i] - b[i]; }
};
struct ClampMinOp {
  float lo;
  float* x;
  __device__ void operator()(int64_t i) const { x[i] = fmaxf(x[i], lo); }
};
struct ZeroWhereBoundOp {
  float lo;
  const float* x;
  float* g;
  __device__ void operator()(int64_t i) const {
    if (x[i] <= lo && g[i] < 0) g[i] = 0;
  }
};
struct AddScaledRatioOp {
  float lambda;
  const float* num;
  const float* den;
  float eps;
  float* x;
  __device__ void operator()(int64_t i) const {
    if (fabsf(den[i]) > eps) x[i] += lambda * num[i] / den[i];
  }
};

absl::Status Fill(const Stream& stream, float* x, int64_t n, float value) {
  return Launch(stream, n, FillOp{x, value});
}
absl::Status Axpy(const Stream& stream, float a, const float* x, float* y, int64_t n) {
  return Launch(stream, n, AxpyOp{a, x, y});
}
absl::Status Xpby(const Stream& stream, const float* x, float b, float* y, int64_t n) {
  return Launch(stream, n, XpbyOp{x, b, y});
}
absl::Status Scale(const Stream& stream, float a, float* x, int64_t n) { return Launch(stream, n, ScaleOp{a, x}); }
absl::StatusOr<double> Dot(const Stream& stream, const float* x, const float* y, int64_t n) {
  return Reduce<true>(stream, x, y, n);
}
absl::StatusOr<double> Sum(const Stream& stream, const float* x, int64_t n) {
  return Reduce<false>(stream, x, nullptr, n);
}
absl::Status SafeDivide(const Stream& stream, const float* num, const float* den, float eps, float* out, int64_t n) {
  return Launch(stream, n, SafeDivideOp{num, den, eps, out});
}
absl::Status Multiply(const Stream& stream, const float* y, float* x, int64_t n) {
  return Launch(stream, n, MultiplyOp{y, x});
}
absl::Status Subtract(const Stream& stream, const float* a, const float* b, float* out, int64_t n) {
  return Launch(stream, n, SubtractOp{a, b, out});
}
absl::Status ClampMin(const Stream& stream, float lo, float* x, int64_t n) {
  return Launch(stream, n, ClampMinOp{lo, x});
}
absl::Status ZeroWhereBound(const Stream& stream, float lo, const float* x, float* g, int64_t n) {
  return Launch(stream, n, ZeroWhereBoundOp{lo, x, g});
}
absl::Status AddScaledRatio(const Stream& stream, float lambda, const float* num, const float* den, float eps, float* x,
                            int64_t n) {
  return Launch(stream, n, AddScaledRatioOp{lambda, num, den, eps, x});
}

}  // namespace cuda
}  // namespace recon
}  // namespace tessera

// Unfused (materialising) Mattes MI baseline; see mutual_info_unfused.h.
#include <cublas_v2.h>
#include <cub/block/block_reduce.cuh>

#include <algorithm>
#include <climits>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/registration/mutual_info_parzen.h"
#include "kernels/registration/mutual_info_unfused.h"

namespace tessera {
namespace registration {
namespace {

using mi_internal::BinCoord;

constexpr int kThreads = 256;
constexpr int kFinalizeThreads = 1024;

absl::Status CublasStatus(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": cuBLAS status ", int(st)));
}

__device__ __forceinline__ float Beta3(float u) {
  const float a = fabsf(u);
  if (a < 1.f) return (4.f - 6.f * a * a + 3.f * a * a * a) * (1.f / 6.f);
  if (a < 2.f) {
    const float r = 2.f - a;
    return r * r * r * (1.f / 6.f);
  }
  return 0.f;
}

// d/du beta3(u)
__device__ __forceinline__ float Beta3Prime(float u) {
  const float a = fabsf(u);
  const float sgn = u < 0.f ? -1.f : 1.f;
  if (a < 1.f) return sgn * (-2.f * a + 1.5f * a * a);
  if (a < 2.f) {
    const float r = 2.f - a;
    return -0.5f * sgn * r * r;
  }
  return 0.f;
}

// Dense tables, column-major N x B (entry (k, b) at k + b * n), every bin
// evaluated as a tensor library would.
__global__ void ParzenTablesKernel(const float* __restrict__ F, const float* __restrict__ W,
                                   const uint8_t* __restrict__ M, int64_t n, int bins, float f_lo, float f_inv,
                                   float w_lo, float w_inv, bool box, float* __restrict__ psi_f,
                                   float* __restrict__ psi_w) {
  const float span = float(bins - 4);
  for (int64_t k = blockIdx.x * int64_t(kThreads) + threadIdx.x; k < n; k += int64_t(gridDim.x) * kThreads) {
    bool inside;
    const float tf = BinCoord(F[k], f_lo, f_inv, span, &inside);
    const float tw = BinCoord(W[k], w_lo, w_inv, span, &inside);
    const float on = (M == nullptr || M[k] != 0) ? 1.f : 0.f;
    const int box_bin = int(floorf(tf + 0.5f));
    for (int b = 0; b < bins; ++b) {
      psi_f[k + b * n] = on * (box ? (b == box_bin ? 1.f : 0.f) : Beta3(float(b) - tf));
      psi_w[k + b * n] = Beta3(float(b) - tw);
    }
  }
}

// d/dt beta3(b - t) = -beta3'(b - t), times 0 where W is clamped or masked.
__global__ void DerivTableKernel(const float* __restrict__ W, const uint8_t* __restrict__ M, int64_t n, int bins,
                                 float w_lo, float w_inv, float* __restrict__ dpsi) {
  const float span = float(bins - 4);
  for (int64_t k = blockIdx.x * int64_t(kThreads) + threadIdx.x; k < n; k += int64_t(gridDim.x) * kThreads) {
    bool inside;
    const float tw = BinCoord(W[k], w_lo, w_inv, span, &inside);
    const float on = (inside && (M == nullptr || M[k] != 0)) ? 1.f : 0.f;
    for (int b = 0; b < bins; ++b) dpsi[k + b * n] = -on * Beta3Prime(float(b) - tw);
  }
}

__global__ void RowDotKernel(const float* __restrict__ a, const float* __restrict__ b, int64_t n, int bins,
                             float* __restrict__ out) {
  for (int64_t k = blockIdx.x * int64_t(kThreads) + threadIdx.x; k < n; k += int64_t(gridDim.x) * kThreads) {
    float s = 0.f;
    for (int j = 0; j < bins; ++j) s = fmaf(a[k + j * n], b[k + j * n], s);
    out[k] = s;
  }
}

struct Result {
  double mi;
  double total;
};

// joint: B x B, entry (a, b) at a * B + b. Writes T(a, b) = -G dt/dW / total.
__global__ void __launch_bounds__(kFinalizeThreads)
    FinalizeKernel(const float* __restrict__ joint_f, int B, double dtdw, float* __restrict__ table,
                   Result* __restrict__ result) {
  __shared__ double joint[64 * 64];
  __shared__ double pf[64], pw[64];
  const int BB = B * B;
  for (int e = threadIdx.x; e < BB; e += kFinalizeThreads) joint[e] = joint_f[e];
  __syncthreads();
  const int tid = threadIdx.x;
  if (tid < B) {
    double s = 0;
    for (int b = 0; b < B; ++b) s += joint[tid * B + b];
    pf[tid] = s;
  } else if (tid < 2 * B) {
    double s = 0;
    for (int a = 0; a < B; ++a) s += joint[a * B + tid - B];
    pw[tid - B] = s;
  }
  __syncthreads();
  double total = 0;
  for (int a = 0; a < B; ++a) total += pf[a];
  double mi = 0;
  for (int e = tid; e < BB; e += kFinalizeThreads) {
    const int a = e / B, b = e % B;
    const double h = joint[e];
    float t = 0.f;
    if (total > 0 && h > 0 && pf[a] > 0 && pw[b] > 0) {
      const double g = log(h * total / (pf[a] * pw[b]));
      mi += h / total * g;
      t = float(-g * dtdw / total);
    }
    table[e] = t;
  }
  using BlockReduce = cub::BlockReduce<double, kFinalizeThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  const double sum = BlockReduce(temp).Sum(mi);
  if (tid == 0) *result = Result{sum, total};
}

int GridFor(int64_t n) { return int(std::min<int64_t>((n + kThreads - 1) / kThreads, 65535)); }

}  // namespace

absl::StatusOr<std::unique_ptr<MattesMiUnfused>> MattesMiUnfused::Create(const Stream& stream) {
  if (stream.backend() != Backend::kCuda) {
    return absl::InvalidArgumentError("MattesMiUnfused needs a CUDA stream");
  }
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  cublasHandle_t h = nullptr;
  TESSERA_RETURN_IF_ERROR(CublasStatus(cublasCreate(&h), "cublasCreate"));
  TESSERA_RETURN_IF_ERROR(
      CublasStatus(cublasSetStream(h, static_cast<cudaStream_t>(stream.native())), "cublasSetStream"));
  return std::unique_ptr<MattesMiUnfused>(new MattesMiUnfused(stream, h));
}

MattesMiUnfused::~MattesMiUnfused() {
  if (handle_ != nullptr) cublasDestroy(static_cast<cublasHandle_t>(handle_));
}

void MattesMiUnfused::ReleaseTables() {
  cudaStreamSynchronize(static_cast<cudaStream_t>(stream_.native()));
  for (auto& t : tables_) t.reset();
  small_.reset();
}

size_t MattesMiUnfused::DeviceBytes(int64_t n, int bins, bool with_gradient) {
  return size_t(with_gradient ? 4 : 2) * size_t(bins) * size_t(n) * sizeof(float);
}

absl::StatusOr<MattesMiResult> MattesMiUnfused::Run(const NDArray& fixed, const NDArray& warped,
                                                    const NDArray* mask, const MattesMiOptions& options,
                                                    NDArray* grad) {
  const int64_t n = fixed.num_elements();
  const int B = options.bins;
  if (B < kMattesMiMinBins || B > kMattesMiMaxBins) return absl::InvalidArgumentError("bins out of range");
  if (n <= 0 || n >= INT_MAX) return absl::InvalidArgumentError("MattesMiUnfused: need 0 < n < 2^31");
  if (warped.num_elements() != n || (grad && grad->num_elements() != n) || (mask && mask->num_elements() != n)) {
    return absl::InvalidArgumentError("MattesMiUnfused: shape mismatch");
  }
  const int ordinal = stream_.ordinal();
  cudaStream_t s = static_cast<cudaStream_t>(stream_.native());
  cublasHandle_t h = static_cast<cublasHandle_t>(handle_);
  const size_t table_bytes = size_t(B) * size_t(n) * sizeof(float);
  // Cached like a caching allocator: grown when too small, else reused.
  auto reserve = [&](std::shared_ptr<Buffer>& buf, size_t bytes) -> absl::Status {
    if (buf && buf->size() >= bytes && buf->ordinal() == ordinal) return absl::OkStatus();
    buf.reset();
    TESSERA_ASSIGN_OR_RETURN(buf, Buffer::Allocate(MemoryKind::kDevice, bytes, ordinal));
    return absl::OkStatus();
  };
  TESSERA_RETURN_IF_ERROR(reserve(tables_[0], table_bytes));
  TESSERA_RETURN_IF_ERROR(reserve(tables_[1], table_bytes));
  TESSERA_RETURN_IF_ERROR(reserve(small_, 2 * 64 * 64 * sizeof(float) + 256));
  Buffer* psi_f = tables_[0].get();
  Buffer* psi_w = tables_[1].get();
  Buffer* small = small_.get();
  float* joint = static_cast<float*>(small->data());
  float* table = joint + 64 * 64;
  Result* result = reinterpret_cast<Result*>(table + 64 * 64);
  const float f_inv = float(1.0 / (double(options.fixed_max) - options.fixed_min));
  const float w_inv = float(1.0 / (double(options.warped_max) - options.warped_min));
  const uint8_t* M = mask ? mask->data<uint8_t>() : nullptr;
  const float* Fp = static_cast<const float*>(psi_f->data());
  const float* Wp = static_cast<const float*>(psi_w->data());

  ParzenTablesKernel<<<GridFor(n), kThreads, 0, s>>>(
      fixed.data<float>(), warped.data<float>(), M, n, B, options.fixed_min, f_inv, options.warped_min, w_inv,
      options.fixed_kernel == ParzenKernel::kBox, static_cast<float*>(psi_f->data()),
      static_cast<float*>(psi_w->data()));
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("ParzenTablesKernel");
  // joint (col-major B x B, C(b, a) at b + a * B = a * B + b) = Psi_W^T Psi_F.
  const float one = 1.f, zero = 0.f;
  TESSERA_RETURN_IF_ERROR(CublasStatus(
      cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, B, B, int(n), &one, Wp, int(n), Fp, int(n), &zero, joint, B),
      "cublasSgemm (joint histogram)"));
  const double dtdw = double(B - 4) * w_inv;
  FinalizeKernel<<<1, kFinalizeThreads, 0, s>>>(joint, B, dtdw, table, result);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("FinalizeKernel");
  if (grad != nullptr) {
    TESSERA_RETURN_IF_ERROR(reserve(tables_[2], table_bytes));
    TESSERA_RETURN_IF_ERROR(reserve(tables_[3], table_bytes));
    Buffer* d_psi_w = tables_[2].get();
    Buffer* deriv = tables_[3].get();
    // dLoss/dPsi_W (k, b) = sum_a Psi_F(k, a) T(a, b); T stored a * B + b is T^T in column-major.
    TESSERA_RETURN_IF_ERROR(CublasStatus(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, int(n), B, B, &one, Fp, int(n),
                                                     table, B, &zero, static_cast<float*>(d_psi_w->data()),
                                                     int(n)),
                                         "cublasSgemm (dLoss/dPsi_W)"));
    DerivTableKernel<<<GridFor(n), kThreads, 0, s>>>(warped.data<float>(), M, n, B, options.warped_min, w_inv,
                                                     static_cast<float*>(deriv->data()));
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("DerivTableKernel");
    RowDotKernel<<<GridFor(n), kThreads, 0, s>>>(static_cast<const float*>(d_psi_w->data()),
                                                 static_cast<const float*>(deriv->data()), n, B,
                                                 grad->data<float>());
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("RowDotKernel");
  }
  Result host;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&host, result, sizeof(host), cudaMemcpyDeviceToHost, s));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  MattesMiResult out;
  out.mutual_information = host.mi;
  out.loss = -host.mi;
  out.total_weight = host.total;
  return out;
}

}  // namespace registration
}  // namespace tessera

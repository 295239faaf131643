// CUDA backend of the Toeplitz operator: kernel by the CUDA NUFFT, batched
// cuFFT on the 2N grid; pad, multiply and crop are one pass each.
#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/reconstruction/nufft/cufft_plan.h"
#include "kernels/reconstruction/nufft/toeplitz_backend.h"

namespace tessera {
namespace recon {
namespace nufft {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxBatchBytes = size_t{2} << 30;

cudaStream_t Native(const Stream& s) { return static_cast<cudaStream_t>(s.native()); }
int BlocksFor(long long n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

struct Dims {
  int n[3];  // N
  int p[3];  // 2N (1 on axis 3 in 2-D)
};

template <typename T>
__global__ void WeightsKernel(int m, const T* __restrict__ weights, typename Vec2<T>::type* __restrict__ c,
                              unsigned long long* __restrict__ first_bad) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= m) return;
  T v = T(1);
  if (weights != nullptr) {
    v = weights[j];
    if (!isfinite(v)) atomicMin(first_bad, static_cast<unsigned long long>(j));
  }
  c[j] = typename Vec2<T>::type{v, T(0)};
}

__device__ __forceinline__ int CirculantIndexDev(int q, int two_n) {
  const int n = two_n / 2;
  if (q == 0 && two_n > 1) return -1;
  const int d = q - n;
  return d < 0 ? d + two_n : d;
}

// kernel[circulant index of q] = h[q] * scale; the kernel was zeroed before.
template <typename T>
__global__ void EmbedKernel(Dims d, const typename Vec2<T>::type* __restrict__ h, T scale,
                            typename Vec2<T>::type* __restrict__ kernel) {
  const long long q = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const long long size = static_cast<long long>(d.p[0]) * d.p[1] * d.p[2];
  if (q >= size) return;
  const int q0 = static_cast<int>(q % d.p[0]), q1 = static_cast<int>((q / d.p[0]) % d.p[1]);
  const int q2 = static_cast<int>(q / (static_cast<long long>(d.p[0]) * d.p[1]));
  const int i0 = CirculantIndexDev(q0, d.p[0]), i1 = CirculantIndexDev(q1, d.p[1]), i2 = CirculantIndexDev(q2, d.p[2]);
  if (i0 < 0 || i1 < 0 || i2 < 0) return;
  const typename Vec2<T>::type v = h[q];
  kernel[(static_cast<long long>(i2) * d.p[1] + i1) * d.p[0] + i0] = typename Vec2<T>::type{v.x * scale, v.y * scale};
}

// Writes every cell of `count` padded grids: the image where it fits, else 0.
template <typename T>
__global__ void PadKernel(Dims d, const typename Vec2<T>::type* __restrict__ in, typename Vec2<T>::type* __restrict__ w) {
  const long long q = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const long long size = static_cast<long long>(d.p[0]) * d.p[1] * d.p[2];
  if (q >= size) return;
  const int t = blockIdx.y;
  const int i0 = static_cast<int>(q % d.p[0]), i1 = static_cast<int>((q / d.p[0]) % d.p[1]);
  const int i2 = static_cast<int>(q / (static_cast<long long>(d.p[0]) * d.p[1]));
  typename Vec2<T>::type v{T(0), T(0)};
  if (i0 < d.n[0] && i1 < d.n[1] && i2 < d.n[2]) {
    const long long nm = static_cast<long long>(d.n[0]) * d.n[1] * d.n[2];
    v = in[t * nm + (static_cast<long long>(i2) * d.n[1] + i1) * d.n[0] + i0];
  }
  w[t * size + q] = v;
}

template <typename T>
__global__ void MultiplyKernel(long long size, const typename Vec2<T>::type* __restrict__ kernel,
                               typename Vec2<T>::type* __restrict__ w) {
  const long long q = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (q >= size) return;
  const typename Vec2<T>::type k = kernel[q];
  typename Vec2<T>::type& v = w[blockIdx.y * size + q];
  v = typename Vec2<T>::type{v.x * k.x - v.y * k.y, v.x * k.y + v.y * k.x};
}

template <typename T>
__global__ void CropKernel(Dims d, const typename Vec2<T>::type* __restrict__ w, typename Vec2<T>::type* __restrict__ out) {
  const long long q = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const long long nm = static_cast<long long>(d.n[0]) * d.n[1] * d.n[2];
  if (q >= nm) return;
  const int t = blockIdx.y;
  const int i0 = static_cast<int>(q % d.n[0]), i1 = static_cast<int>((q / d.n[0]) % d.n[1]);
  const int i2 = static_cast<int>(q / (static_cast<long long>(d.n[0]) * d.n[1]));
  const long long size = static_cast<long long>(d.p[0]) * d.p[1] * d.p[2];
  out[t * nm + q] = w[t * size + (static_cast<long long>(i2) * d.p[1] + i1) * d.p[0] + i0];
}

template <typename T>
class CudaToeplitz final : public ToeplitzOperator<T> {
  using C = typename Vec2<T>::type;

 public:
  CudaToeplitz(const ToeplitzSetup& setup, const Stream& stream) : setup_(setup), stream_(stream) {
    for (int a = 0; a < 3; ++a) {
      dims_.n[a] = static_cast<int>(setup.modes[a]);
      dims_.p[a] = static_cast<int>(setup.padded[a]);
    }
  }

  absl::Status Init(int64_t m, const T* x, const T* y, const T* z, const T* weights) {
    TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream_.ordinal()));
    if (m > std::numeric_limits<int>::max() - 1) {
      return absl::InvalidArgumentError(absl::StrCat("toeplitz: number of points must be < 2^31 on CUDA, got ", m));
    }
    cudaStream_t s = Native(stream_);
    const long long size = setup_.padded_size();
    TESSERA_ASSIGN_OR_RETURN(auto c, Alloc(sizeof(C) * m));
    TESSERA_ASSIGN_OR_RETURN(auto bad, Alloc(sizeof(unsigned long long)));
    auto* first_bad = static_cast<unsigned long long*>(bad->data());
    TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(first_bad, 0xff, sizeof(unsigned long long), s));
    if (m > 0) {
      WeightsKernel<T><<<BlocksFor(m), kThreads, 0, s>>>(static_cast<int>(m), weights, static_cast<C*>(c->data()),
                                                         first_bad);
      TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("WeightsKernel");
    }
    unsigned long long bad_index = 0;
    TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&bad_index, first_bad, sizeof(bad_index), cudaMemcpyDeviceToHost, s));
    TESSERA_RETURN_IF_ERROR(stream_.Synchronize());
    if (bad_index != std::numeric_limits<unsigned long long>::max()) {
      T v;
      TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpy(&v, weights + bad_index, sizeof(T), cudaMemcpyDeviceToHost));
      return absl::InvalidArgumentError(
          absl::StrCat("toeplitz: weights[", bad_index, "] = ", static_cast<double>(v), " is not finite"));
    }
    TESSERA_ASSIGN_OR_RETURN(kernel_, Alloc(sizeof(C) * size));
    {
      TESSERA_ASSIGN_OR_RETURN(auto h, Alloc(sizeof(C) * size));
      TESSERA_ASSIGN_OR_RETURN(auto plan,
                               NufftPlan<T>::Create(stream_, NufftType::kType1, setup_.padded, setup_.kernel_nufft));
      TESSERA_RETURN_IF_ERROR(plan->SetPoints(m, x, y, z));
      TESSERA_RETURN_IF_ERROR(
          plan->Execute(static_cast<std::complex<T>*>(c->data()), static_cast<std::complex<T>*>(h->data())));
      TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(kernel_->data(), 0, sizeof(C) * size, s));
      EmbedKernel<T><<<BlocksFor(size), kThreads, 0, s>>>(dims_, static_cast<const C*>(h->data()),
                                                          static_cast<T>(1.0 / static_cast<double>(size)),
                                                          static_cast<C*>(kernel_->data()));
      TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("EmbedKernel");
      TESSERA_ASSIGN_OR_RETURN(auto one, CufftBatchPlan<T>::Create(setup_.padded, 1, stream_));
      TESSERA_RETURN_IF_ERROR(one->Execute(static_cast<std::complex<T>*>(kernel_->data()), -1));
      TESSERA_RETURN_IF_ERROR(stream_.Synchronize());  // before h, the plan and its work area go
    }
    const int nt = setup_.options.ntransforms;
    batch_ = static_cast<int>(
        std::max<size_t>(1, std::min<size_t>(nt, kMaxBatchBytes / (sizeof(C) * static_cast<size_t>(size)))));
    TESSERA_ASSIGN_OR_RETURN(work_, Alloc(sizeof(C) * size * batch_));
    TESSERA_ASSIGN_OR_RETURN(fft_, CufftBatchPlan<T>::Create(setup_.padded, batch_, stream_));
    if (nt % batch_ != 0) {
      TESSERA_ASSIGN_OR_RETURN(fft_tail_, CufftBatchPlan<T>::Create(setup_.padded, nt % batch_, stream_));
    }
    return stream_.Synchronize();
  }

  absl::Status Apply(const std::complex<T>* in, std::complex<T>* out) override {
    if (in == nullptr || out == nullptr) return absl::InvalidArgumentError("toeplitz: Apply got a null array");
    TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream_.ordinal()));
    cudaStream_t s = Native(stream_);
    const long long size = setup_.padded_size(), nm = setup_.num_modes();
    const int nt = setup_.options.ntransforms;
    C* w = static_cast<C*>(work_->data());
    const C* k = static_cast<const C*>(kernel_->data());
    for (int t0 = 0; t0 < nt; t0 += batch_) {
      const int count = std::min(batch_, nt - t0);
      const CufftBatchPlan<T>& fft = count == batch_ ? *fft_ : *fft_tail_;
      const C* src = reinterpret_cast<const C*>(in + t0 * nm);
      C* dst = reinterpret_cast<C*>(out + t0 * nm);
      PadKernel<T><<<dim3(BlocksFor(size), count), kThreads, 0, s>>>(dims_, src, w);
      TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("PadKernel");
      TESSERA_RETURN_IF_ERROR(fft.Execute(reinterpret_cast<std::complex<T>*>(w), -1));
      MultiplyKernel<T><<<dim3(BlocksFor(size), count), kThreads, 0, s>>>(size, k, w);
      TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("MultiplyKernel");
      TESSERA_RETURN_IF_ERROR(fft.Execute(reinterpret_cast<std::complex<T>*>(w), +1));
      CropKernel<T><<<dim3(BlocksFor(nm), count), kThreads, 0, s>>>(dims_, w, dst);
      TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("CropKernel");
    }
    return absl::OkStatus();
  }

  std::array<int64_t, 3> modes() const override { return setup_.modes; }
  const ToeplitzOptions& options() const override { return setup_.options; }

 private:
  absl::StatusOr<std::shared_ptr<Buffer>> Alloc(size_t bytes) {
    return Buffer::Allocate(MemoryKind::kDevice, std::max<size_t>(bytes, 1), stream_.ordinal());
  }

  ToeplitzSetup setup_;
  const Stream& stream_;
  Dims dims_;
  int batch_ = 1;
  std::shared_ptr<Buffer> kernel_, work_;
  std::unique_ptr<CufftBatchPlan<T>> fft_, fft_tail_;
};

}  // namespace

template <typename T>
absl::StatusOr<std::unique_ptr<ToeplitzOperator<T>>> MakeToeplitz(const ToeplitzSetup& setup, const Stream& stream,
                                                                  int64_t m, const T* x, const T* y, const T* z,
                                                                  const T* weights) {
  std::unique_ptr<CudaToeplitz<T>> op(new CudaToeplitz<T>(setup, stream));
  TESSERA_RETURN_IF_ERROR(op->Init(m, x, y, z, weights));
  return std::unique_ptr<ToeplitzOperator<T>>(std::move(op));
}

template absl::StatusOr<std::unique_ptr<ToeplitzOperator<float>>> MakeToeplitz<float>(
    const ToeplitzSetup&, const Stream&, int64_t, const float*, const float*, const float*, const float*);
template absl::StatusOr<std::unique_ptr<ToeplitzOperator<double>>> MakeToeplitz<double>(
    const ToeplitzSetup&, const Stream&, int64_t, const double*, const double*, const double*, const double*);

}  // namespace cuda
}  // namespace nufft
}  // namespace recon
}  // namespace tessera

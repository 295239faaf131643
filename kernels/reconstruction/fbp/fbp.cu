// CUDA backend of FBP/FDK.
//
// Per batch of views: a pre-weighting kernel writes each detector row,
// weighted and zero-padded, into a row of the in-place FFT buffer; batched
// cuFFT R2C, a kernel multiplying by the filter spectrum, batched C2R; then
// the filtered rows go either into a layered texture (cudaArray, hardware
// bilinear filtering, zero border) or into a zero-bordered padded store
// (exact interpolation); and the back projection accumulates the batch into
// the volume.
//
// Back projection: one thread per (x, y) column of kZ voxels along z, a
// block of 32 x 8 threads; the batch's per-view constants are staged in
// shared memory 32 views at a time (every thread reads the same entry, a
// broadcast), and each thread keeps its kZ sums in registers over all views
// of the batch, writing the volume once per batch. A warp covers 32
// neighbouring voxels along x, which land on neighbouring detector columns,
// so its reads are contiguous. When a view's detector column and
// magnification do not change along z (a circular orbit about z with
// detector rows along z, the usual case), they are computed once per
// column of kZ voxels. Sums run over the views in order: deterministic.
#include <cuda_runtime.h>
#include <cufft.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/cuda_check.h"
#include "common/parallel.h"
#include "common/status.h"
#include "kernels/reconstruction/fbp/fbp_backend.h"
#include "kernels/reconstruction/fbp/fbp_math.h"

namespace tessera {
namespace recon {
namespace fbp {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kBlockX = 32, kBlockY = 8;
constexpr int kViewChunk = 32;  // views staged in shared memory at a time
constexpr int kMaxGridY = 65535;

cudaStream_t Native(const Stream& s) { return static_cast<cudaStream_t>(s.native()); }

absl::Status CufftStatus(cufftResult r, const char* what) {
  if (r == CUFFT_SUCCESS) return absl::OkStatus();
  const absl::StatusCode code =
      r == CUFFT_ALLOC_FAILED ? absl::StatusCode::kResourceExhausted : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat(what, ": cuFFT error ", static_cast<int>(r)));
}

#define TESSERA_CUFFT_RETURN_IF_ERROR(expr) TESSERA_RETURN_IF_ERROR(CufftStatus((expr), #expr))

// work[row][c] = sino[row][c - col0] * weight for c < cols, 0 up to
// `padded`; sinogram rows have in_cols columns (an offset detector's widened
// columns outside [col0, col0 + in_cols) read 0), `rows` of them per view
// (detector rows row0 ..) `view_stride` apart. `column_weights` (views x
// cols, the batch's first view first; null: none) are the Parker /
// offset-detector weights (redundancy_weights.h).
__global__ void WeightPadKernel(const float* __restrict__ sino, int64_t view_stride,
                                const PreWeightView* __restrict__ pre, const float* __restrict__ column_weights,
                                int cols, int in_cols, int col0, int rows, int row0, int padded, int64_t stride,
                                int num_rows, float oc, float orow, float* __restrict__ work) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= padded) return;
  for (int row = blockIdx.y; row < num_rows; row += gridDim.y) {
    float value = 0.0f;
    if (c >= col0 && c < col0 + in_cols) {
      const int t = row / rows, r = row - t * rows;
      value = __ldg(sino + t * view_stride + static_cast<int64_t>(r) * in_cols + (c - col0)) *
              PreWeight(pre[t], static_cast<float>(c) - oc, static_cast<float>(r + row0) - orow);
      if (column_weights != nullptr) value *= __ldg(column_weights + static_cast<int64_t>(t) * cols + c);
    }
    work[static_cast<int64_t>(row) * stride + c] = value;
  }
}

// Each row's complex spectrum (half + 1 entries) times the filter.
__global__ void SpectrumKernel(cufftComplex* __restrict__ z, const float* __restrict__ spectrum, int half_plus_one,
                               int num_rows) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= half_plus_one) return;
  const float s = __ldg(spectrum + k);
  for (int row = blockIdx.y; row < num_rows; row += gridDim.y) {
    cufftComplex& v = z[static_cast<int64_t>(row) * half_plus_one + k];
    v.x *= s;
    v.y *= s;
  }
}

// The derivative short-scan method (short_scan_derivative.h): the two rows
// of DerivativeTerms for views [v0, v0 + n), x into `work_x` and y into
// `work_y` (zero-padded to `padded`); `views` is the whole sinogram.
__global__ void DerivativeTermsKernel(const float* __restrict__ views, int64_t view_stride,
                                      const DerivativeView* __restrict__ dviews, int v0, int cols, int rows, int padded,
                                      int64_t stride, int num_rows, float* __restrict__ work_x,
                                      float* __restrict__ work_y) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= padded) return;
  for (int row = blockIdx.y; row < num_rows; row += gridDim.y) {
    float x = 0.0f, y = 0.0f;
    if (c < cols) {
      const int t = row / rows, r = row - t * rows;
      const DerivativeView w = dviews[v0 + t];
      DerivativeTerms(w, views + w.view_prev * view_stride, views + (v0 + t) * view_stride,
                      views + w.view_next * view_stride, cols, rows, c, r, &x, &y);
    }
    work_x[static_cast<int64_t>(row) * stride + c] = x;
    work_y[static_cast<int64_t>(row) * stride + c] = y;
  }
}

// zx = zx (-i hilbert) + zy ramp (filter.h HilbertSpectrum, FilterSpectrum).
__global__ void CombineSpectraKernel(cufftComplex* __restrict__ zx, const cufftComplex* __restrict__ zy,
                                     const float* __restrict__ hilbert, const float* __restrict__ ramp,
                                     int half_plus_one, int num_rows) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= half_plus_one) return;
  const float h = __ldg(hilbert + k), s = __ldg(ramp + k);
  for (int row = blockIdx.y; row < num_rows; row += gridDim.y) {
    const int64_t i = static_cast<int64_t>(row) * half_plus_one + k;
    const cufftComplex a = zx[i], b = zy[i];
    zx[i] = make_cuFloatComplex(h * a.y + s * b.x, -h * a.x + s * b.y);
  }
}

// The derivative method's weights after the filter (views x cols, the
// batch's first view first), in place.
__global__ void PostWeightKernel(float* __restrict__ work, int64_t stride, const float* __restrict__ weights, int cols,
                                 int rows, int num_rows) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  for (int row = blockIdx.y; row < num_rows; row += gridDim.y) {
    const int t = row / rows;
    work[static_cast<int64_t>(row) * stride + c] *= __ldg(weights + static_cast<int64_t>(t) * cols + c);
  }
}

// Filtered rows into the zero-bordered store (fbp_math.h layout).
__global__ void StoreKernel(const float* __restrict__ work, int64_t stride, int cols, int rows, int num_rows,
                            float* __restrict__ store) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const int64_t pitch = cols + 2, view_size = pitch * (rows + 2);
  for (int row = blockIdx.y; row < num_rows; row += gridDim.y) {
    const int t = row / rows, r = row - t * rows;
    store[t * view_size + (r + 1) * pitch + c + 1] = work[static_cast<int64_t>(row) * stride + c];
  }
}

struct BackprojectArgs {
  const float* store;           // exact: padded views of the batch
  cudaTextureObject_t texture;  // texture: layered array of the batch
  const BackprojectView* views; // the batch's views
  int num_views;
  int cols, rows;  // rows: the store's (a row window's height out of core)
  int nx, ny, nz;  // nz: the slab's planes
  int k0;          // the slab's first plane
  float row0;      // the store's first detector row
  bool accumulate;
  float* volume;
};

template <bool kTexture>
__device__ __forceinline__ float Sample(const BackprojectArgs& p, int view, float a, float b) {
  b = __fsub_rn(b, p.row0);  // exact (a whole row at or below b), never fused
  if (kTexture) return tex2DLayered<float>(p.texture, a + 0.5f, b + 0.5f, view);
  const int64_t pitch = p.cols + 2;
  return SamplePadded(p.store + view * pitch * (p.rows + 2), pitch, a, b, static_cast<float>(p.cols),
                      static_cast<float>(p.rows));
}

// A sample times the back projection weight: 1 / D^2 (FDK, as (q inv) inv),
// or 1 / D (the derivative short-scan method).
template <bool kLinear>
__device__ __forceinline__ float Weighted(float q, float inv) {
  return kLinear ? q * inv : q * inv * inv;
}

template <int kZ, bool kTexture, bool kLinear>
__global__ void __launch_bounds__(kBlockX* kBlockY) BackprojectKernel(BackprojectArgs p) {
  __shared__ BackprojectView views[kViewChunk];
  const int i = blockIdx.x * kBlockX + threadIdx.x;
  const int j = blockIdx.y * kBlockY + threadIdx.y;
  const int k0 = p.k0 + blockIdx.z * kZ;  // global plane: the resident volume's sums
  const bool inside = i < p.nx && j < p.ny;
  const float fi = static_cast<float>(i), fj = static_cast<float>(j), fk0 = static_cast<float>(k0);
  const int tid = threadIdx.y * kBlockX + threadIdx.x;
  float acc[kZ];
#pragma unroll
  for (int kk = 0; kk < kZ; ++kk) acc[kk] = 0.0f;

  for (int c0 = 0; c0 < p.num_views; c0 += kViewChunk) {
    const int n = min(kViewChunk, p.num_views - c0);
    __syncthreads();  // the previous chunk is no longer read
    const float* src = reinterpret_cast<const float*>(p.views + c0);
    float* dst = reinterpret_cast<float*>(views);
    for (int e = tid; e < n * 12; e += kBlockX * kBlockY) dst[e] = __ldg(src + e);
    __syncthreads();
    if (!inside) continue;
    for (int t = 0; t < n; ++t) {
      const BackprojectView& w = views[t];
      const float a0 = w.a[0] * fi + w.a[1] * fj + w.a[3] + w.a[2] * fk0;
      const float b0 = w.b[0] * fi + w.b[1] * fj + w.b[3] + w.b[2] * fk0;
      const float d0 = w.d[0] * fi + w.d[1] * fj + w.d[3] + w.d[2] * fk0;
      const int view = c0 + t;
      if (w.a[2] == 0.0f && w.d[2] == 0.0f) {
        // Same column and magnification for the whole column of voxels.
        const float inv = __frcp_rn(d0);
        const float a = a0 * inv, weight = kLinear ? inv : inv * inv, db = w.b[2] * inv;
        const float bs = b0 * inv;
#pragma unroll
        for (int kk = 0; kk < kZ; ++kk) acc[kk] += Sample<kTexture>(p, view, a, bs + kk * db) * weight;
      } else {
#pragma unroll
        for (int kk = 0; kk < kZ; ++kk) {
          const float fk = static_cast<float>(kk);
          const float inv = __frcp_rn(d0 + w.d[2] * fk);
          acc[kk] += Weighted<kLinear>(Sample<kTexture>(p, view, (a0 + w.a[2] * fk) * inv, (b0 + w.b[2] * fk) * inv), inv);
        }
      }
    }
  }
  if (!inside) return;
#pragma unroll
  for (int kk = 0; kk < kZ; ++kk) {
    const int k = blockIdx.z * kZ + kk;  // in the slab
    if (k >= p.nz) break;
    const int64_t idx = i + static_cast<int64_t>(p.nx) * (j + static_cast<int64_t>(p.ny) * k);
    p.volume[idx] = p.accumulate ? p.volume[idx] + acc[kk] : acc[kk];
  }
}

template <int kZ>
void LaunchBackproject(const BackprojectArgs& args, bool texture, bool linear, cudaStream_t stream) {
  const dim3 block(kBlockX, kBlockY);
  const dim3 grid((args.nx + kBlockX - 1) / kBlockX, (args.ny + kBlockY - 1) / kBlockY, (args.nz + kZ - 1) / kZ);
  if (linear) {
    if (texture) {
      BackprojectKernel<kZ, true, true><<<grid, block, 0, stream>>>(args);
    } else {
      BackprojectKernel<kZ, false, true><<<grid, block, 0, stream>>>(args);
    }
  } else if (texture) {
    BackprojectKernel<kZ, true, false><<<grid, block, 0, stream>>>(args);
  } else {
    BackprojectKernel<kZ, false, false><<<grid, block, 0, stream>>>(args);
  }
}

absl::StatusOr<std::shared_ptr<Buffer>> DeviceBuffer(size_t bytes, int ordinal) {
  return Buffer::Allocate(MemoryKind::kDevice, bytes, ordinal);
}

class CudaBackend : public FbpBackend {
 public:
  explicit CudaBackend(FbpBackendConfig config)
      : c_(std::move(config)),
        stream_(*c_.stream),
        cols_(c_.geometry.projection.det_cols),
        rows_(c_.window_rows),
        in_cols_(c_.setup.input_cols),
        col0_(c_.setup.col0),
        stride_(c_.padded + 2),
        texture_(c_.options.interpolation == FbpInterpolation::kTexture),
        derivative_(!c_.setup.derivative.empty()) {}

  ~CudaBackend() override {
    cudaSetDevice(stream_.ordinal());
    if (tex_ != 0) cudaDestroyTextureObject(tex_);
    if (array_ != nullptr) cudaFreeArray(array_);
    if (array_tracker_) array_tracker_->Release(array_bytes_);
    for (const FftPlan* plan : {&forward_, &inverse_, &forward_tail_, &inverse_tail_}) {
      if (plan->valid) cufftDestroy(plan->handle);
    }
    for (cudaEvent_t e : {uploaded_[0], uploaded_[1], consumed_[0], consumed_[1]}) {
      if (e != nullptr) cudaEventDestroy(e);
    }
  }

  absl::Status Init() {
    TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream_.ordinal()));
    const int64_t views = c_.geometry.projection.num_views();
    const size_t view_bytes = static_cast<size_t>(views) * 12 * sizeof(float);
    TESSERA_ASSIGN_OR_RETURN(pre_, DeviceBuffer(view_bytes, stream_.ordinal()));
    TESSERA_ASSIGN_OR_RETURN(back_, DeviceBuffer(view_bytes, stream_.ordinal()));
    TESSERA_ASSIGN_OR_RETURN(spectrum_, DeviceBuffer(c_.spectrum.size() * sizeof(float), stream_.ordinal()));
    TESSERA_RETURN_IF_ERROR(
        CopyBytes(pre_->data(), MemoryKind::kDevice, c_.setup.pre.data(), MemoryKind::kHost, view_bytes, stream_));
    TESSERA_RETURN_IF_ERROR(
        CopyBytes(back_->data(), MemoryKind::kDevice, c_.setup.back.data(), MemoryKind::kHost, view_bytes, stream_));
    TESSERA_RETURN_IF_ERROR(CopyBytes(spectrum_->data(), MemoryKind::kDevice, c_.spectrum.data(), MemoryKind::kHost,
                                      c_.spectrum.size() * sizeof(float), stream_));
    if (derivative_) {
      // The derivative method: its per-view constants, weights, Hilbert
      // spectrum and a second FFT buffer for the ramp-filtered row.
      const size_t dv_bytes = c_.setup.derivative.size() * sizeof(DerivativeView);
      const size_t pw_bytes = c_.setup.post_weights.size() * sizeof(float);
      const size_t h_bytes = c_.hilbert.size() * sizeof(float);
      TESSERA_ASSIGN_OR_RETURN(derivative_views_, DeviceBuffer(dv_bytes, stream_.ordinal()));
      TESSERA_ASSIGN_OR_RETURN(post_weights_, DeviceBuffer(pw_bytes, stream_.ordinal()));
      TESSERA_ASSIGN_OR_RETURN(hilbert_, DeviceBuffer(h_bytes, stream_.ordinal()));
      TESSERA_RETURN_IF_ERROR(CopyBytes(derivative_views_->data(), MemoryKind::kDevice, c_.setup.derivative.data(),
                                        MemoryKind::kHost, dv_bytes, stream_));
      TESSERA_RETURN_IF_ERROR(CopyBytes(post_weights_->data(), MemoryKind::kDevice, c_.setup.post_weights.data(),
                                        MemoryKind::kHost, pw_bytes, stream_));
      TESSERA_RETURN_IF_ERROR(
          CopyBytes(hilbert_->data(), MemoryKind::kDevice, c_.hilbert.data(), MemoryKind::kHost, h_bytes, stream_));
      const size_t work_bytes = static_cast<size_t>(c_.batch * rows_ * stride_) * sizeof(float);
      TESSERA_ASSIGN_OR_RETURN(work_y_, DeviceBuffer(work_bytes, stream_.ordinal()));
    }
    if (!c_.setup.column_weights.empty()) {
      const size_t bytes = c_.setup.column_weights.size() * sizeof(float);
      TESSERA_ASSIGN_OR_RETURN(column_weights_, DeviceBuffer(bytes, stream_.ordinal()));
      TESSERA_RETURN_IF_ERROR(CopyBytes(column_weights_->data(), MemoryKind::kDevice, c_.setup.column_weights.data(),
                                        MemoryKind::kHost, bytes, stream_));
    }
    // In-place FFT rows: padded reals in stride = 2 (padded / 2 + 1) floats.
    const int64_t batch_rows = c_.batch * rows_;
    TESSERA_ASSIGN_OR_RETURN(work_, DeviceBuffer(static_cast<size_t>(batch_rows * stride_) * sizeof(float),
                                                 stream_.ordinal()));
    TESSERA_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(work_->data(), 0, static_cast<size_t>(batch_rows * stride_) * sizeof(float), Native(stream_)));
    size_t work_area = 0;
    TESSERA_RETURN_IF_ERROR(MakePlans(batch_rows, &forward_, &inverse_, &work_area));
    const int64_t tail = views % c_.batch;
    if (tail != 0) TESSERA_RETURN_IF_ERROR(MakePlans(tail * rows_, &forward_tail_, &inverse_tail_, &work_area));
    TESSERA_ASSIGN_OR_RETURN(fft_area_, DeviceBuffer(std::max<size_t>(work_area, 1), stream_.ordinal()));
    for (const FftPlan* plan : {&forward_, &inverse_, &forward_tail_, &inverse_tail_}) {
      if (!plan->valid) continue;
      TESSERA_CUFFT_RETURN_IF_ERROR(cufftSetWorkArea(plan->handle, fft_area_->data()));
      TESSERA_CUFFT_RETURN_IF_ERROR(cufftSetStream(plan->handle, Native(stream_)));
    }
    if (texture_) {
      TESSERA_RETURN_IF_ERROR(MakeTexture());
    } else {
      const size_t bytes = static_cast<size_t>(c_.batch * PaddedViewSize(cols_, rows_)) * sizeof(float);
      TESSERA_ASSIGN_OR_RETURN(store_, DeviceBuffer(bytes, stream_.ordinal()));
      // Borders stay zero for good: StoreKernel writes interiors only.
      TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(store_->data(), 0, bytes, Native(stream_)));
    }
    if (c_.slab_planes > 0) TESSERA_RETURN_IF_ERROR(EnsureOutOfCore(c_.slab_planes));
    return stream_.Synchronize();
  }

  absl::Status FilterBatch(const float* views, int64_t view_stride, int64_t v0, int64_t n, int64_t row0) override {
    TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream_.ordinal()));
    const int num_rows = static_cast<int>(n * rows_);
    const int padded = static_cast<int>(c_.padded), half_plus_one = padded / 2 + 1;
    const float oc = 0.5f * static_cast<float>(cols_ - 1);
    const float orow = 0.5f * static_cast<float>(c_.geometry.projection.det_rows - 1);
    float* work = static_cast<float*>(work_->data());
    const dim3 block(kThreads);
    const unsigned grid_y = static_cast<unsigned>(std::min(num_rows, kMaxGridY));
    if (derivative_) return FilterDerivative(views, view_stride, v0, n);
    WeightPadKernel<<<dim3((padded + kThreads - 1) / kThreads, grid_y), block, 0, Native(stream_)>>>(
        views, view_stride, static_cast<const PreWeightView*>(pre_->data()) + v0,
        column_weights_ ? static_cast<const float*>(column_weights_->data()) + v0 * cols_ : nullptr,
        static_cast<int>(cols_), static_cast<int>(in_cols_), static_cast<int>(col0_),
        static_cast<int>(rows_), static_cast<int>(row0), padded, stride_, num_rows, oc, orow, work);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("fbp weight/pad");
    const bool tail = n != c_.batch;
    cufftComplex* z = reinterpret_cast<cufftComplex*>(work);
    TESSERA_CUFFT_RETURN_IF_ERROR(cufftExecR2C(tail ? forward_tail_.handle : forward_.handle, work, z));
    SpectrumKernel<<<dim3((half_plus_one + kThreads - 1) / kThreads, grid_y), block, 0, Native(stream_)>>>(
        z, static_cast<const float*>(spectrum_->data()), half_plus_one, num_rows);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("fbp spectrum");
    TESSERA_CUFFT_RETURN_IF_ERROR(cufftExecC2R(tail ? inverse_tail_.handle : inverse_.handle, z, work));
    return StoreBatch(n, grid_y);
  }

  // The filtered rows in work_ into the texture array or the padded store.
  absl::Status StoreBatch(int64_t n, unsigned grid_y) {
    const int num_rows = static_cast<int>(n * rows_);
    float* work = static_cast<float*>(work_->data());
    const dim3 block(kThreads);
    if (texture_) {
      cudaMemcpy3DParms copy = {};
      copy.srcPtr = make_cudaPitchedPtr(work, static_cast<size_t>(stride_) * sizeof(float), cols_, rows_);
      copy.dstArray = array_;
      copy.extent = make_cudaExtent(cols_, rows_, n);
      copy.kind = cudaMemcpyDeviceToDevice;
      TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpy3DAsync(&copy, Native(stream_)));
    } else {
      StoreKernel<<<dim3((static_cast<int>(cols_) + kThreads - 1) / kThreads, grid_y), block, 0, Native(stream_)>>>(
          work, stride_, static_cast<int>(cols_), static_cast<int>(rows_), num_rows, static_cast<float*>(store_->data()));
      TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("fbp store");
    }
    return absl::OkStatus();
  }

  absl::Status ExportBatch(int64_t v0, int64_t n, float* filtered) override {
    TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream_.ordinal()));
    TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(
        filtered + v0 * rows_ * in_cols_, in_cols_ * sizeof(float), static_cast<const float*>(work_->data()) + col0_,
        stride_ * sizeof(float), in_cols_ * sizeof(float), n * rows_, cudaMemcpyDeviceToDevice, Native(stream_)));
    return absl::OkStatus();
  }

  absl::Status BackprojectBatch(int64_t v0, int64_t n, const FbpWindow& window, bool accumulate,
                                float* volume) override {
    TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream_.ordinal()));
    const VolumeGeometry& vol = c_.geometry.volume;
    BackprojectArgs args;
    args.store = store_ ? static_cast<const float*>(store_->data()) : nullptr;
    args.texture = tex_;
    args.views = static_cast<const BackprojectView*>(back_->data()) + v0;
    args.num_views = static_cast<int>(n);
    args.cols = static_cast<int>(cols_);
    args.rows = static_cast<int>(rows_);
    args.nx = static_cast<int>(vol.nx);
    args.ny = static_cast<int>(vol.ny);
    args.nz = static_cast<int>(window.nz < 0 ? vol.nz : window.nz);
    args.k0 = static_cast<int>(window.k0);
    args.row0 = static_cast<float>(window.row0);
    args.accumulate = accumulate;
    args.volume = volume;
    // Voxels per thread along z: registers hold the sums; fewer when thin
    // (the whole volume's nz decides, so slabs group planes as it does).
    const bool linear = derivative_;
    if (vol.nz == 1) {
      LaunchBackproject<1>(args, texture_, linear, Native(stream_));
    } else if (vol.nz < 16) {
      LaunchBackproject<4>(args, texture_, linear, Native(stream_));
    } else {
      LaunchBackproject<8>(args, texture_, linear, Native(stream_));
    }
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("fbp back projection");
    return absl::OkStatus();
  }

  absl::Status Synchronize() override { return stream_.Synchronize(); }

  absl::StatusOr<const float*> StageViews(const float* sinogram, int64_t v0, int64_t n, int64_t row0,
                                          int64_t* view_stride) override {
    TESSERA_RETURN_IF_ERROR(EnsureOutOfCore(c_.geometry.volume.nz));
    TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream_.ordinal()));
    if (n > c_.batch) return absl::InternalError("fbp: more views staged than a batch holds");
    // The slot staged last is free once the work queued after it so far ends.
    if (last_slot_ >= 0) TESSERA_CUDA_RETURN_IF_ERROR(cudaEventRecord(consumed_[last_slot_], Native(stream_)));
    const int slot = last_slot_ = (last_slot_ + 1) % 2;
    // The pinned slot's previous upload must be done before it is refilled.
    TESSERA_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(uploaded_[slot]));
    const int64_t det_rows = c_.geometry.projection.det_rows, row_floats = in_cols_;
    const int64_t chunk_view = rows_ * row_floats;
    float* pinned = static_cast<float*>(pinned_[slot]->data());
    ParallelFor(n, [&](int64_t begin, int64_t end, int) {
      for (int64_t t = begin; t < end; ++t) {
        std::memcpy(pinned + t * chunk_view, sinogram + ((v0 + t) * det_rows + row0) * row_floats,
                    sizeof(float) * chunk_view);
      }
    });
    float* device = static_cast<float*>(slots_[slot]->data());
    const cudaStream_t copy = Native(*copy_stream_);
    TESSERA_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy, consumed_[slot], 0));
    TESSERA_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(device, pinned, sizeof(float) * n * chunk_view, cudaMemcpyHostToDevice, copy));
    TESSERA_CUDA_RETURN_IF_ERROR(cudaEventRecord(uploaded_[slot], copy));
    TESSERA_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(Native(stream_), uploaded_[slot], 0));
    *view_stride = chunk_view;
    return device;
  }

  absl::StatusOr<float*> SlabVolume(float* /*host_slab*/, int64_t planes) override {
    TESSERA_RETURN_IF_ERROR(EnsureOutOfCore(c_.geometry.volume.nz));
    if (planes > slab_planes_) return absl::InternalError("fbp: slab larger than planned");
    return static_cast<float*>(slab_->data());
  }

  absl::Status FinishSlab(float* host_slab, int64_t planes) override {
    TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream_.ordinal()));
    const VolumeGeometry& vol = c_.geometry.volume;
    TESSERA_RETURN_IF_ERROR(CopyBytes(host_slab, MemoryKind::kHost, slab_->data(), MemoryKind::kDevice,
                                      sizeof(float) * vol.nx * vol.ny * planes, stream_));
    return stream_.Synchronize();
  }

 private:
  // Views [v0, v0 + n) by the derivative method: DerivativeTerms' two rows,
  // both forward transforms, Hilbert(x) + Ramp(y), the inverse, the weights
  // after the filter, then the store as FDK's.
  absl::Status FilterDerivative(const float* views, int64_t view_stride, int64_t v0, int64_t n) {
    const int num_rows = static_cast<int>(n * rows_);
    const int padded = static_cast<int>(c_.padded), half_plus_one = padded / 2 + 1;
    float* work = static_cast<float*>(work_->data());
    float* work_y = static_cast<float*>(work_y_->data());
    const dim3 block(kThreads);
    const unsigned grid_y = static_cast<unsigned>(std::min(num_rows, kMaxGridY));
    DerivativeTermsKernel<<<dim3((padded + kThreads - 1) / kThreads, grid_y), block, 0, Native(stream_)>>>(
        views, view_stride, static_cast<const DerivativeView*>(derivative_views_->data()), static_cast<int>(v0),
        static_cast<int>(cols_), static_cast<int>(rows_), padded, stride_, num_rows, work, work_y);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("fbp derivative terms");
    const bool tail = n != c_.batch;
    cufftComplex* zx = reinterpret_cast<cufftComplex*>(work);
    cufftComplex* zy = reinterpret_cast<cufftComplex*>(work_y);
    const cufftHandle forward = tail ? forward_tail_.handle : forward_.handle;
    TESSERA_CUFFT_RETURN_IF_ERROR(cufftExecR2C(forward, work, zx));
    TESSERA_CUFFT_RETURN_IF_ERROR(cufftExecR2C(forward, work_y, zy));
    CombineSpectraKernel<<<dim3((half_plus_one + kThreads - 1) / kThreads, grid_y), block, 0, Native(stream_)>>>(
        zx, zy, static_cast<const float*>(hilbert_->data()), static_cast<const float*>(spectrum_->data()),
        half_plus_one, num_rows);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("fbp combine spectra");
    TESSERA_CUFFT_RETURN_IF_ERROR(cufftExecC2R(tail ? inverse_tail_.handle : inverse_.handle, zx, work));
    PostWeightKernel<<<dim3((static_cast<int>(cols_) + kThreads - 1) / kThreads, grid_y), block, 0,
                       Native(stream_)>>>(work, stride_, static_cast<const float*>(post_weights_->data()) + v0 * cols_,
                                          static_cast<int>(cols_), static_cast<int>(rows_), num_rows);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("fbp post weights");
    return StoreBatch(n, grid_y);
  }

  // The out-of-core buffers: a slab of `planes` planes, two device and two
  // pinned upload slots of a batch of window rows, the copy stream, events.
  absl::Status EnsureOutOfCore(int64_t planes) {
    if (slab_ != nullptr) return absl::OkStatus();
    TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream_.ordinal()));
    const VolumeGeometry& vol = c_.geometry.volume;
    const size_t slot_bytes = sizeof(float) * static_cast<size_t>(c_.batch * rows_ * in_cols_);
    for (int s = 0; s < 2; ++s) {
      TESSERA_ASSIGN_OR_RETURN(slots_[s], DeviceBuffer(slot_bytes, stream_.ordinal()));
      TESSERA_ASSIGN_OR_RETURN(pinned_[s], Buffer::Allocate(MemoryKind::kPinned, slot_bytes, stream_.ordinal()));
      TESSERA_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&uploaded_[s], cudaEventDisableTiming));
      TESSERA_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&consumed_[s], cudaEventDisableTiming));
    }
    TESSERA_ASSIGN_OR_RETURN(Stream copy, Stream::Create(Backend::kCuda, stream_.ordinal()));
    copy_stream_ = std::make_unique<Stream>(std::move(copy));
    TESSERA_ASSIGN_OR_RETURN(slab_, DeviceBuffer(sizeof(float) * static_cast<size_t>(vol.nx * vol.ny * planes),
                                                 stream_.ordinal()));
    slab_planes_ = planes;
    return absl::OkStatus();
  }

  // cufftHandle has no "none" value, hence the flag.
  struct FftPlan {
    cufftHandle handle = 0;
    bool valid = false;
  };

  absl::Status MakePlans(int64_t batch_rows, FftPlan* forward, FftPlan* inverse, size_t* work_area) {
    int n[1] = {static_cast<int>(c_.padded)};
    int real_embed[1] = {static_cast<int>(stride_)};
    int complex_embed[1] = {static_cast<int>(c_.padded / 2 + 1)};
    const int batch = static_cast<int>(batch_rows);
    size_t size = 0;
    TESSERA_CUFFT_RETURN_IF_ERROR(cufftCreate(&forward->handle));
    forward->valid = true;
    TESSERA_CUFFT_RETURN_IF_ERROR(cufftSetAutoAllocation(forward->handle, 0));
    TESSERA_CUFFT_RETURN_IF_ERROR(cufftMakePlanMany(forward->handle, 1, n, real_embed, 1, real_embed[0], complex_embed, 1,
                                                    complex_embed[0], CUFFT_R2C, batch, &size));
    *work_area = std::max(*work_area, size);
    TESSERA_CUFFT_RETURN_IF_ERROR(cufftCreate(&inverse->handle));
    inverse->valid = true;
    TESSERA_CUFFT_RETURN_IF_ERROR(cufftSetAutoAllocation(inverse->handle, 0));
    TESSERA_CUFFT_RETURN_IF_ERROR(cufftMakePlanMany(inverse->handle, 1, n, complex_embed, 1, complex_embed[0], real_embed, 1,
                                                    real_embed[0], CUFFT_C2R, batch, &size));
    *work_area = std::max(*work_area, size);
    return absl::OkStatus();
  }

  absl::Status MakeTexture() {
    int max_layers = 0, max_width = 0, max_height = 0;
    TESSERA_CUDA_RETURN_IF_ERROR(
        cudaDeviceGetAttribute(&max_layers, cudaDevAttrMaxTexture2DLayeredLayers, stream_.ordinal()));
    TESSERA_CUDA_RETURN_IF_ERROR(
        cudaDeviceGetAttribute(&max_width, cudaDevAttrMaxTexture2DLayeredWidth, stream_.ordinal()));
    TESSERA_CUDA_RETURN_IF_ERROR(
        cudaDeviceGetAttribute(&max_height, cudaDevAttrMaxTexture2DLayeredHeight, stream_.ordinal()));
    if (c_.batch > max_layers || cols_ > max_width || rows_ > max_height) {
      return absl::InvalidArgumentError(absl::StrCat(
          "fbp: texture interpolation needs views_per_batch <= ", max_layers, " and a detector of at most ", max_width,
          " x ", max_height, " (got ", c_.batch, " views of ", cols_, " x ", rows_, "); use exact interpolation"));
    }
    const cudaChannelFormatDesc desc = cudaCreateChannelDesc<float>();
    TESSERA_CUDA_RETURN_IF_ERROR(
        cudaMalloc3DArray(&array_, &desc, make_cudaExtent(cols_, rows_, c_.batch), cudaArrayLayered));
    // cudaArrays bypass Buffer: charge the job's tracker by hand.
    array_bytes_ = static_cast<size_t>(cols_ * rows_ * c_.batch) * sizeof(float);
    array_tracker_ = CurrentDeviceMemoryTracker();
    if (array_tracker_) array_tracker_->Charge(array_bytes_);
    cudaResourceDesc res = {};
    res.resType = cudaResourceTypeArray;
    res.res.array.array = array_;
    cudaTextureDesc tex = {};  // border colour 0
    tex.addressMode[0] = tex.addressMode[1] = tex.addressMode[2] = cudaAddressModeBorder;
    tex.filterMode = cudaFilterModeLinear;
    tex.readMode = cudaReadModeElementType;
    tex.normalizedCoords = 0;
    TESSERA_CUDA_RETURN_IF_ERROR(cudaCreateTextureObject(&tex_, &res, &tex, nullptr));
    return absl::OkStatus();
  }

  FbpBackendConfig c_;
  const Stream& stream_;
  const int64_t cols_, rows_, in_cols_, col0_, stride_;
  const bool texture_;
  const bool derivative_;  // ShortScanMethod::kDerivative (short_scan_derivative.h)
  std::shared_ptr<Buffer> pre_, back_, spectrum_, work_, fft_area_, store_;
  std::shared_ptr<Buffer> derivative_views_, post_weights_, hilbert_, work_y_;  // derivative method only
  std::shared_ptr<Buffer> column_weights_;  // null when the setup has none
  FftPlan forward_, inverse_, forward_tail_, inverse_tail_;
  cudaArray_t array_ = nullptr;
  cudaTextureObject_t tex_ = 0;
  size_t array_bytes_ = 0;
  std::shared_ptr<DeviceMemoryTracker> array_tracker_;
  // Out of core (EnsureOutOfCore).
  std::shared_ptr<Buffer> slab_, slots_[2], pinned_[2];
  int64_t slab_planes_ = 0;
  std::unique_ptr<Stream> copy_stream_;
  cudaEvent_t uploaded_[2] = {nullptr, nullptr}, consumed_[2] = {nullptr, nullptr};
  int last_slot_ = -1;
};

}  // namespace

absl::StatusOr<std::unique_ptr<FbpBackend>> MakeBackend(FbpBackendConfig config) {
  auto backend = std::make_unique<CudaBackend>(std::move(config));
  TESSERA_RETURN_IF_ERROR(backend->Init());
  return std::unique_ptr<FbpBackend>(std::move(backend));
}

}  // namespace cuda
}  // namespace fbp
}  // namespace recon
}  // namespace tessera

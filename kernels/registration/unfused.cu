// Unfused baselines (see unfused.h): one kernel or library call per tensor
// operation, every intermediate in device memory.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/registration/reduce.cuh"
#include "kernels/registration/sampler_math.h"
#include "kernels/registration/unfused.h"

namespace tessera {
namespace registration {
namespace unfused {
namespace {

constexpr int kThreads = 256;

absl::Status CublasStatus(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": cuBLAS status ", static_cast<int>(s)));
}

unsigned Blocks(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

absl::StatusOr<std::shared_ptr<Buffer>> DeviceFloats(const Stream& stream, int64_t n) {
  return Buffer::Allocate(MemoryKind::kDevice, sizeof(float) * n, stream.ordinal());
}

float* F(const std::shared_ptr<Buffer>& b) { return static_cast<float*>(b->data()); }

// ---- sampler ----------------------------------------------------------------

__global__ void BaseGridKernel(SamplerGeometry<float> g, float* __restrict__ base) {
  const Dims3 od = g.out_dims;
  const int64_t v = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  if (v >= od.size()) return;
  const int64_t i = v % od.nx, j = (v / od.nx) % od.ny, k = v / (od.nx * od.ny);
  float x[3];
  OutputCoord(g, i, j, k, x);
  base[4 * v + 0] = x[0];
  base[4 * v + 1] = x[1];
  base[4 * v + 2] = x[2];
  base[4 * v + 3] = 1.0f;
}

__global__ void AddDispKernel(const float* __restrict__ disp, int64_t n, float* __restrict__ grid) {
  const int64_t v = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  if (v >= n) return;
  grid[3 * v + 0] += disp[v];
  grid[3 * v + 1] += disp[v + n];
  grid[3 * v + 2] += disp[v + 2 * n];
}

struct GridCell {
  int64_t i0[3];
  float f[3];
  float dclamp[3];
};

// PyTorch's grid_sampler_compute_source_index (align_corners=True).
__device__ bool SourceCell(const float* __restrict__ grid, int64_t v, const Dims3& id, Padding padding,
                           GridCell& cell) {
  const int64_t m[3] = {id.nx, id.ny, id.nz};
  for (int c = 0; c < 3; ++c) {
    float ix = ((grid[3 * v + c] + 1.0f) / 2.0f) * static_cast<float>(m[c] - 1);
    cell.dclamp[c] = 1.0f;
    if (padding == Padding::kBorder) {
      ix = ClampCoord(ix, m[c], &cell.dclamp[c]);
    } else if (!(ix > -1.0f && ix < static_cast<float>(m[c]))) {
      return false;
    }
    const float fl = floorf(ix);
    cell.i0[c] = static_cast<int64_t>(fl);
    cell.f[c] = ix - fl;
  }
  return true;
}

__device__ float Corner(const float* __restrict__ image, const Dims3& id, int64_t i, int64_t j, int64_t k) {
  if (i < 0 || j < 0 || k < 0 || i >= id.nx || j >= id.ny || k >= id.nz) return 0.0f;
  return image[i + id.nx * (j + id.ny * k)];
}

__global__ void GridSampleKernel(const float* __restrict__ image, Dims3 id, const float* __restrict__ grid,
                                 int64_t n, Padding padding, float* __restrict__ out) {
  const int64_t v = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  if (v >= n) return;
  GridCell cell;
  float value = 0.0f;
  if (SourceCell(grid, v, id, padding, cell)) {
    for (int c = 0; c < 2; ++c) {
      for (int b = 0; b < 2; ++b) {
        for (int a = 0; a < 2; ++a) {
          const float w = (a ? cell.f[0] : 1 - cell.f[0]) * (b ? cell.f[1] : 1 - cell.f[1]) *
                          (c ? cell.f[2] : 1 - cell.f[2]);
          value += w * Corner(image, id, cell.i0[0] + a, cell.i0[1] + b, cell.i0[2] + c);
        }
      }
    }
  }
  out[v] = value;
}

__global__ void GridSampleBackwardKernel(const float* __restrict__ image, Dims3 id, const float* __restrict__ grid,
                                         int64_t n, Padding padding, const float* __restrict__ grad_out,
                                         float* __restrict__ grad_grid) {
  const int64_t v = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  if (v >= n) return;
  GridCell cell;
  float gx = 0, gy = 0, gz = 0;
  if (SourceCell(grid, v, id, padding, cell)) {
    float c8[2][2][2];
    for (int c = 0; c < 2; ++c)
      for (int b = 0; b < 2; ++b)
        for (int a = 0; a < 2; ++a) c8[c][b][a] = Corner(image, id, cell.i0[0] + a, cell.i0[1] + b, cell.i0[2] + c);
    const float wx[2] = {1 - cell.f[0], cell.f[0]}, wy[2] = {1 - cell.f[1], cell.f[1]},
                wz[2] = {1 - cell.f[2], cell.f[2]};
    for (int c = 0; c < 2; ++c) {
      for (int b = 0; b < 2; ++b) {
        gx += wy[b] * wz[c] * (c8[c][b][1] - c8[c][b][0]);
        gy += wx[b] * wz[c] * (c8[c][1][b] - c8[c][0][b]);
        gz += wx[b] * wy[c] * (c8[1][c][b] - c8[0][c][b]);
      }
    }
    const float go = grad_out[v];
    gx *= go * cell.dclamp[0] * 0.5f * static_cast<float>(id.nx - 1);
    gy *= go * cell.dclamp[1] * 0.5f * static_cast<float>(id.ny - 1);
    gz *= go * cell.dclamp[2] * 0.5f * static_cast<float>(id.nz - 1);
  }
  grad_grid[3 * v + 0] = gx;
  grad_grid[3 * v + 1] = gy;
  grad_grid[3 * v + 2] = gz;
}

// ---- LNCC -------------------------------------------------------------------

__global__ void ProductKernel(const float* __restrict__ a, const float* __restrict__ b, int64_t n,
                              float* __restrict__ out) {
  const int64_t v = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  if (v < n) out[v] = a[v] * b[v];
}

// One 1-D box convolution (w taps, zero padding) along `axis`, out of place.
__global__ void Conv1dKernel(const float* __restrict__ in, Dims3 d, int axis, int r, float* __restrict__ out) {
  const int64_t v = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  if (v >= d.size()) return;
  const int64_t i = v % d.nx, j = (v / d.nx) % d.ny, k = v / (d.nx * d.ny);
  const int64_t pos = axis == 0 ? i : (axis == 1 ? j : k);
  const int64_t len = axis == 0 ? d.nx : (axis == 1 ? d.ny : d.nz);
  const int64_t stride = axis == 0 ? 1 : (axis == 1 ? d.nx : d.nx * d.ny);
  float sum = 0.0f;
  for (int t = -r; t <= r; ++t) {
    const int64_t p = pos + t;
    if (p >= 0 && p < len) sum += in[v + t * stride];
  }
  out[v] = sum;
}

__global__ void CcKernel(const float* __restrict__ sf, const float* __restrict__ sw, const float* __restrict__ sff,
                         const float* __restrict__ sww, const float* __restrict__ sfw, int64_t n, float inv_n,
                         float eps, float* __restrict__ cc) {
  const int64_t v = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  if (v >= n) return;
  const float cross = sfw[v] - sf[v] * sw[v] * inv_n;
  const float vf = fmaxf(sff[v] - sf[v] * sf[v] * inv_n, 0.0f);
  const float vw = fmaxf(sww[v] - sw[v] * sw[v] * inv_n, 0.0f);
  cc[v] = cross * cross / (vf * vw + eps);
}

__global__ void SumKernel(const float* __restrict__ x, int64_t n, double* __restrict__ partials) {
  __shared__ double scratch[32];
  double s[1] = {0.0};
  for (int64_t v = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; v < n;
       v += static_cast<int64_t>(gridDim.x) * kThreads) {
    s[0] += x[v];
  }
  cuda_detail::BlockSum<1>(s, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = s[0];
}

__global__ void AbcKernel(const float* __restrict__ sf, const float* __restrict__ sw, const float* __restrict__ sff,
                          const float* __restrict__ sww, const float* __restrict__ sfw, int64_t n, float inv_n,
                          float eps, float* __restrict__ a, float* __restrict__ b, float* __restrict__ c) {
  const int64_t v = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  if (v >= n) return;
  const float cross = sfw[v] - sf[v] * sw[v] * inv_n;
  const float vf = fmaxf(sff[v] - sf[v] * sf[v] * inv_n, 0.0f);
  const float vw = fmaxf(sww[v] - sw[v] * sw[v] * inv_n, 0.0f);
  const float inv_d = 1.0f / (vf * vw + eps);
  const float av = 2.0f * cross * inv_d;
  const float bv = -cross * cross * vf * inv_d * inv_d;
  a[v] = av;
  b[v] = bv;
  c[v] = -(av * sf[v] + 2.0f * bv * sw[v]) * inv_n;
}

__global__ void CombineKernel(const float* __restrict__ f, const float* __restrict__ w, const float* __restrict__ ba,
                              const float* __restrict__ bb, const float* __restrict__ bc, int64_t n, float scale,
                              float* __restrict__ grad) {
  const int64_t v = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  if (v < n) grad[v] = scale * (f[v] * ba[v] + 2.0f * w[v] * bb[v] + bc[v]);
}

__global__ void FillKernel(float* __restrict__ data, int64_t n, uint32_t seed, float lo, float hi) {
  const int64_t v = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  if (v >= n) return;
  uint32_t h = static_cast<uint32_t>(v) * 2654435761u ^ (static_cast<uint32_t>(v >> 32) + seed * 0x9E3779B9u);
  h ^= h >> 16;
  h *= 0x7feb352du;
  h ^= h >> 15;
  h *= 0x846ca68bu;
  h ^= h >> 16;
  data[v] = lo + (hi - lo) * (static_cast<float>(h >> 8) * (1.0f / 16777216.0f));
}

}  // namespace

// ---- UnfusedSampler -----------------------------------------------------------

struct UnfusedSampler::Impl {
  const Stream* stream = nullptr;
  Dims3 out_dims;
  cublasHandle_t handle = nullptr;
  std::shared_ptr<Buffer> base, grid, grad_grid;
  ~Impl() {
    if (handle != nullptr) cublasDestroy(handle);
  }
};

UnfusedSampler::UnfusedSampler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UnfusedSampler::~UnfusedSampler() = default;

absl::StatusOr<std::unique_ptr<UnfusedSampler>> UnfusedSampler::Create(const Stream& stream, Dims3 out_dims,
                                                                       bool with_backward) {
  if (stream.backend() != Backend::kCuda) return absl::InvalidArgumentError("unfused sampler needs a CUDA stream");
  auto impl = std::make_unique<Impl>();
  impl->stream = &stream;
  impl->out_dims = out_dims;
  const int64_t n = out_dims.size();
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  TESSERA_RETURN_IF_ERROR(CublasStatus(cublasCreate(&impl->handle), "cublasCreate"));
  TESSERA_RETURN_IF_ERROR(
      CublasStatus(cublasSetStream(impl->handle, static_cast<cudaStream_t>(stream.native())), "cublasSetStream"));
  TESSERA_ASSIGN_OR_RETURN(impl->base, DeviceFloats(stream, 4 * n));
  TESSERA_ASSIGN_OR_RETURN(impl->grid, DeviceFloats(stream, 3 * n));
  if (with_backward) {
    TESSERA_ASSIGN_OR_RETURN(impl->grad_grid, DeviceFloats(stream, 3 * n));
  }
  const double lo[3] = {-1, -1, -1}, hi[3] = {1, 1, 1};
  const SamplerGeometry<float> g = MakeSamplerGeometry<float>(out_dims, out_dims, lo, hi, Padding::kZeros);
  BaseGridKernel<<<Blocks(n), kThreads, 0, static_cast<cudaStream_t>(stream.native())>>>(g, F(impl->base));
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("unfused base grid");
  return std::unique_ptr<UnfusedSampler>(new UnfusedSampler(std::move(impl)));
}

absl::Status UnfusedSampler::Forward(const GridSampleArgs& args, float* out) {
  Impl& m = *impl_;
  if (args.out_dims != m.out_dims || args.affine == nullptr) {
    return absl::InvalidArgumentError("unfused sampler: wrong output dims or no affine");
  }
  cudaStream_t s = static_cast<cudaStream_t>(m.stream->native());
  const int64_t n = m.out_dims.size();
  const float one = 1.0f, zero = 0.0f;
  // grid (3 x N, column-major) = theta (3 x 4) * base (4 x N).
  TESSERA_RETURN_IF_ERROR(CublasStatus(cublasSgemm(m.handle, CUBLAS_OP_T, CUBLAS_OP_N, 3, static_cast<int>(n), 4,
                                                   &one, args.affine, 4, F(m.base), 4, &zero, F(m.grid), 3),
                                       "affine grid GEMM"));
  if (args.disp != nullptr) {
    AddDispKernel<<<Blocks(n), kThreads, 0, s>>>(args.disp, n, F(m.grid));
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("unfused add disp");
  }
  GridSampleKernel<<<Blocks(n), kThreads, 0, s>>>(args.image, args.image_dims, F(m.grid), n, args.padding, out);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("unfused grid sample");
  return absl::OkStatus();
}

absl::Status UnfusedSampler::Backward(const GridSampleArgs& args, const float* grad_out, float* grad_affine) {
  Impl& m = *impl_;
  if (m.grad_grid == nullptr) return absl::FailedPreconditionError("unfused sampler created without backward");
  cudaStream_t s = static_cast<cudaStream_t>(m.stream->native());
  const int64_t n = m.out_dims.size();
  GridSampleBackwardKernel<<<Blocks(n), kThreads, 0, s>>>(args.image, args.image_dims, F(m.grid), n, args.padding,
                                                          grad_out, F(m.grad_grid));
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("unfused grid sample backward");
  const float one = 1.0f, zero = 0.0f;
  // dtheta (4 x 3 column-major = 3 x 4 row-major) = base (4 x N) * grad_grid^T (N x 3).
  TESSERA_RETURN_IF_ERROR(CublasStatus(cublasSgemm(m.handle, CUBLAS_OP_N, CUBLAS_OP_T, 4, 3, static_cast<int>(n),
                                                   &one, F(m.base), 4, F(m.grad_grid), 3, &zero, grad_affine, 4),
                                       "affine gradient GEMM"));
  return absl::OkStatus();
}

const float* UnfusedSampler::grad_grid() const { return impl_->grad_grid ? F(impl_->grad_grid) : nullptr; }

size_t UnfusedSampler::device_bytes() const {
  size_t b = impl_->base->size() + impl_->grid->size();
  if (impl_->grad_grid) b += impl_->grad_grid->size();
  return b;
}

// ---- UnfusedLncc --------------------------------------------------------------

struct UnfusedLncc::Impl {
  const Stream* stream = nullptr;
  Dims3 dims;
  int window = 0;
  bool with_backward = false;
  // ff, ww, fw; sums[5] (f, w, ff, ww, fw); tmp1, tmp2; cc; a, b, c; box a, b, c.
  std::vector<std::shared_ptr<Buffer>> volumes;
  std::shared_ptr<Buffer> partials;
  int64_t partial_blocks = 0;
};

UnfusedLncc::UnfusedLncc(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UnfusedLncc::~UnfusedLncc() = default;

absl::StatusOr<std::unique_ptr<UnfusedLncc>> UnfusedLncc::Create(const Stream& stream, Dims3 dims, int window,
                                                                 bool with_backward) {
  if (stream.backend() != Backend::kCuda) return absl::InvalidArgumentError("unfused lncc needs a CUDA stream");
  auto impl = std::make_unique<Impl>();
  impl->stream = &stream;
  impl->dims = dims;
  impl->window = window;
  impl->with_backward = with_backward;
  const int count = with_backward ? 17 : 11;
  for (int i = 0; i < count; ++i) {
    TESSERA_ASSIGN_OR_RETURN(auto b, DeviceFloats(stream, dims.size()));
    impl->volumes.push_back(std::move(b));
  }
  impl->partial_blocks = 1024;
  TESSERA_ASSIGN_OR_RETURN(impl->partials,
                           Buffer::Allocate(MemoryKind::kDevice, sizeof(double) * impl->partial_blocks, stream.ordinal()));
  return std::unique_ptr<UnfusedLncc>(new UnfusedLncc(std::move(impl)));
}

absl::Status UnfusedLncc::Run(const float* fixed, const float* warped, double eps, float* loss, float* grad) {
  Impl& m = *impl_;
  cudaStream_t s = static_cast<cudaStream_t>(m.stream->native());
  const Dims3 d = m.dims;
  const int64_t n = d.size();
  const int r = m.window / 2;
  const float inv_n = 1.0f / static_cast<float>(m.window * m.window * m.window);
  auto vol = [&](int i) { return F(m.volumes[i]); };
  float *ff = vol(0), *ww = vol(1), *fw = vol(2);
  float* sums[5] = {vol(3), vol(4), vol(5), vol(6), vol(7)};
  float *tmp1 = vol(8), *tmp2 = vol(9), *cc = vol(10);
  ProductKernel<<<Blocks(n), kThreads, 0, s>>>(fixed, fixed, n, ff);
  ProductKernel<<<Blocks(n), kThreads, 0, s>>>(warped, warped, n, ww);
  ProductKernel<<<Blocks(n), kThreads, 0, s>>>(fixed, warped, n, fw);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("unfused products");
  auto box = [&](const float* in, float* out) -> absl::Status {
    Conv1dKernel<<<Blocks(n), kThreads, 0, s>>>(in, d, 0, r, tmp1);
    Conv1dKernel<<<Blocks(n), kThreads, 0, s>>>(tmp1, d, 1, r, tmp2);
    Conv1dKernel<<<Blocks(n), kThreads, 0, s>>>(tmp2, d, 2, r, out);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("unfused box filter");
    return absl::OkStatus();
  };
  const float* inputs[5] = {fixed, warped, ff, ww, fw};
  for (int q = 0; q < 5; ++q) TESSERA_RETURN_IF_ERROR(box(inputs[q], sums[q]));
  CcKernel<<<Blocks(n), kThreads, 0, s>>>(sums[0], sums[1], sums[2], sums[3], sums[4], n, inv_n,
                                          static_cast<float>(eps), cc);
  SumKernel<<<m.partial_blocks, kThreads, 0, s>>>(cc, n, static_cast<double*>(m.partials->data()));
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("unfused cc");
  if (loss != nullptr) {
    TESSERA_CUDA_RETURN_IF_ERROR(cuda_detail::FinishPartials(static_cast<double*>(m.partials->data()),
                                                             m.partial_blocks, 1, -1.0 / n, loss, s));
  }
  if (grad == nullptr) return absl::OkStatus();
  if (!m.with_backward) return absl::FailedPreconditionError("unfused lncc created without backward");
  float *a = vol(11), *b = vol(12), *c = vol(13), *ba = vol(14), *bb = vol(15), *bc = vol(16);
  AbcKernel<<<Blocks(n), kThreads, 0, s>>>(sums[0], sums[1], sums[2], sums[3], sums[4], n, inv_n,
                                           static_cast<float>(eps), a, b, c);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("unfused abc");
  TESSERA_RETURN_IF_ERROR(box(a, ba));
  TESSERA_RETURN_IF_ERROR(box(b, bb));
  TESSERA_RETURN_IF_ERROR(box(c, bc));
  CombineKernel<<<Blocks(n), kThreads, 0, s>>>(fixed, warped, ba, bb, bc, n, -1.0f / static_cast<float>(n), grad);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("unfused combine");
  return absl::OkStatus();
}

size_t UnfusedLncc::device_bytes() const {
  size_t b = impl_->partials->size();
  for (const auto& v : impl_->volumes) b += v->size();
  return b;
}

absl::Status FillUniform(const Stream& stream, float* data, int64_t n, uint32_t seed, float lo, float hi) {
  FillKernel<<<Blocks(n), kThreads, 0, static_cast<cudaStream_t>(stream.native())>>>(data, n, seed, lo, hi);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("fill uniform");
  return absl::OkStatus();
}

}  // namespace unfused
}  // namespace registration
}  // namespace tessera

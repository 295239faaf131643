// CUDA centred FFT: a gather pass into cuFFT's order (ifftshift), the batched
// in-place cuFFT, and the same pass back (fftshift).
#include <cuda_runtime.h>

#include "common/buffer.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/reconstruction/mri/centered_fft.h"
#include "kernels/reconstruction/nufft/cufft_plan.h"

namespace tessera {
namespace recon {
namespace mri {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 8192;

int Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

__device__ inline int64_t Mod(int64_t a, int64_t n) { return ((a % n) + n) % n; }

// to_fft: fft[shift(p)] = centred[p]; else centred[p] = fft[shift(p)], where
// shift moves each axis index u to (u - N/2) mod N.
__global__ void ShiftKernel(int64_t nx, int64_t ny, int64_t nz, int64_t total, bool to_fft,
                            float2* __restrict__ centred, float2* __restrict__ fft) {
  const int64_t npix = nx * ny * nz;
  for (int64_t p = blockIdx.x * int64_t{kThreads} + threadIdx.x; p < total; p += int64_t{gridDim.x} * kThreads) {
    const int64_t b = p / npix, q = p % npix;
    const int64_t i = q % nx, j = (q / nx) % ny, l = q / (nx * ny);
    const int64_t s = b * npix + Mod(i - nx / 2, nx) + nx * (Mod(j - ny / 2, ny) + ny * Mod(l - nz / 2, nz));
    if (to_fft) {
      fft[s] = centred[p];
    } else {
      centred[p] = fft[s];
    }
  }
}

class CufftCenteredFft : public CenteredFft {
 public:
  CufftCenteredFft(const Stream& stream, std::array<int64_t, 3> dims, int batch)
      : stream_(stream), dims_(dims), batch_(batch) {}

  absl::Status Init() {
    TESSERA_ASSIGN_OR_RETURN(plan_, nufft::CufftBatchPlan<float>::Create(dims_, batch_, stream_));
    const int64_t total = dims_[0] * dims_[1] * dims_[2] * batch_;
    TESSERA_ASSIGN_OR_RETURN(work_, Buffer::Allocate(MemoryKind::kDevice, total * sizeof(float2), stream_.ordinal()));
    return absl::OkStatus();
  }

  absl::Status Execute(std::complex<float>* data, int sign) override {
    const int64_t total = dims_[0] * dims_[1] * dims_[2] * batch_;
    auto* centred = reinterpret_cast<float2*>(data);
    auto* work = static_cast<float2*>(work_->data());
    const cudaStream_t native = static_cast<cudaStream_t>(stream_.native());
    TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream_.ordinal()));
    ShiftKernel<<<Blocks(total), kThreads, 0, native>>>(dims_[0], dims_[1], dims_[2], total, true, centred, work);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("ShiftKernel");
    TESSERA_RETURN_IF_ERROR(plan_->Execute(static_cast<std::complex<float>*>(work_->data()), sign));
    ShiftKernel<<<Blocks(total), kThreads, 0, native>>>(dims_[0], dims_[1], dims_[2], total, false, centred, work);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("ShiftKernel");
    return absl::OkStatus();
  }

 private:
  const Stream& stream_;
  std::array<int64_t, 3> dims_;
  int batch_;
  std::unique_ptr<nufft::CufftBatchPlan<float>> plan_;
  std::shared_ptr<Buffer> work_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CenteredFft>> CreateCenteredFft(const Stream& stream, std::array<int64_t, 3> dims,
                                                               int batch) {
  auto fft = std::make_unique<CufftCenteredFft>(stream, dims, batch);
  TESSERA_RETURN_IF_ERROR(fft->Init());
  return std::unique_ptr<CenteredFft>(std::move(fft));
}

}  // namespace cuda
}  // namespace mri
}  // namespace recon
}  // namespace tessera

// CPU reference of the centred FFT (FFTW) and backend dispatch.
#include "kernels/reconstruction/mri/centered_fft.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status.h"
#include "kernels/reconstruction/nufft/fftw_util.h"

namespace tessera {
namespace recon {
namespace mri {
namespace cpu {
namespace {

int64_t Mod(int64_t a, int64_t n) { return ((a % n) + n) % n; }

class FftwCenteredFft : public CenteredFft {
 public:
  FftwCenteredFft(std::array<int64_t, 3> dims, int batch) : dims_(dims), batch_(batch) {}

  absl::Status Init() {
    TESSERA_ASSIGN_OR_RETURN(forward_, nufft::FftwPlan<float>::Create(dims_, -1));
    TESSERA_ASSIGN_OR_RETURN(inverse_, nufft::FftwPlan<float>::Create(dims_, +1));
    for (int b = 0; b < batch_; ++b) {
      work_.push_back(nufft::AllocFftwArray<float>(forward_->grid().elements()));
      if (work_.back() == nullptr) return absl::ResourceExhaustedError("centred FFT: out of memory");
    }
    return absl::OkStatus();
  }

  absl::Status Execute(std::complex<float>* data, int sign) override {
    const nufft::FftwPlan<float>& plan = sign > 0 ? *inverse_ : *forward_;
    const nufft::FftwGrid& layout = plan.grid();
    const int64_t nx = dims_[0], ny = dims_[1], nz = dims_[2], npix = nx * ny * nz;
    ParallelFor(batch_, [&](int64_t begin, int64_t end, int) {
      for (int64_t b = begin; b < end; ++b) {
        std::complex<float>* grid = data + b * npix;
        std::complex<float>* work = work_[b].get();
        // ifftshift: element u + c goes to u mod N; the DFT; fftshift back.
        for (int64_t l = 0; l < nz; ++l) {
          for (int64_t j = 0; j < ny; ++j) {
            const int64_t row = layout.Index(0, Mod(j - ny / 2, ny), Mod(l - nz / 2, nz));
            const std::complex<float>* in = grid + nx * (j + ny * l);
            for (int64_t i = 0; i < nx; ++i) work[row + Mod(i - nx / 2, nx)] = in[i];
          }
        }
        plan.Execute(work);
        for (int64_t l = 0; l < nz; ++l) {
          for (int64_t j = 0; j < ny; ++j) {
            const int64_t row = layout.Index(0, Mod(j - ny / 2, ny), Mod(l - nz / 2, nz));
            std::complex<float>* out = grid + nx * (j + ny * l);
            for (int64_t i = 0; i < nx; ++i) out[i] = work[row + Mod(i - nx / 2, nx)];
          }
        }
      }
    }, 1);
    return absl::OkStatus();
  }

 private:
  std::array<int64_t, 3> dims_;
  int batch_;
  std::unique_ptr<nufft::FftwPlan<float>> forward_, inverse_;
  std::vector<nufft::FftwArray<float>> work_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CenteredFft>> CreateCenteredFft(std::array<int64_t, 3> dims, int batch) {
  auto fft = std::make_unique<FftwCenteredFft>(dims, batch);
  TESSERA_RETURN_IF_ERROR(fft->Init());
  return std::unique_ptr<CenteredFft>(std::move(fft));
}

}  // namespace cpu

absl::StatusOr<std::unique_ptr<CenteredFft>> CenteredFft::Create(const Stream& stream, std::array<int64_t, 3> dims,
                                                                 int batch) {
  for (int d = 0; d < 3; ++d) {
    if (dims[d] < 1) return absl::InvalidArgumentError(absl::StrCat("centred FFT: dimension ", d, " is ", dims[d]));
  }
  if (batch < 1) return absl::InvalidArgumentError(absl::StrCat("centred FFT: batch = ", batch, " < 1"));
  if (stream.backend() == Backend::kCpu) return cpu::CreateCenteredFft(dims, batch);
#if TESSERA_WITH_CUDA
  return cuda::CreateCenteredFft(stream, dims, batch);
#else
  return absl::FailedPreconditionError(
      absl::StrCat("centred FFT: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

}  // namespace mri
}  // namespace recon
}  // namespace tessera

// CPU reference of the coil operations and backend dispatch.
#include "kernels/reconstruction/mri/coil_ops.h"

#include "absl/strings/str_cat.h"
#include "common/parallel.h"

namespace tessera {
namespace recon {
namespace mri {
namespace cpu {

void ExpandCoils(int coils, int64_t npix, const std::complex<float>* maps, const std::complex<float>* x,
                 std::complex<float>* out) {
  ParallelFor(npix, [&](int64_t begin, int64_t end, int) {
    for (int c = 0; c < coils; ++c) {
      for (int64_t p = begin; p < end; ++p) out[c * npix + p] = maps[c * npix + p] * x[p];
    }
  }, 4096);
}

void CombineCoils(int coils, int64_t npix, const std::complex<float>* maps, const std::complex<float>* in,
                  std::complex<float>* x) {
  ParallelFor(npix, [&](int64_t begin, int64_t end, int) {
    for (int64_t p = begin; p < end; ++p) {
      std::complex<float> sum = 0;
      for (int c = 0; c < coils; ++c) sum += std::conj(maps[c * npix + p]) * in[c * npix + p];
      x[p] = sum;
    }
  }, 4096);
}

void WeightSamples(int coils, int64_t m, const float* weights, std::complex<float>* data) {
  ParallelFor(m, [&](int64_t begin, int64_t end, int) {
    for (int c = 0; c < coils; ++c) {
      for (int64_t j = begin; j < end; ++j) data[c * m + j] *= weights[j];
    }
  }, 4096);
}

}  // namespace cpu

namespace {

absl::Status NoCuda(const char* what) {
  return absl::FailedPreconditionError(
      absl::StrCat(what, ": CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
}

}  // namespace

absl::Status ExpandCoils(const Stream& stream, int coils, int64_t npix, const std::complex<float>* maps,
                         const std::complex<float>* x, std::complex<float>* out) {
  if (stream.backend() == Backend::kCpu) {
    cpu::ExpandCoils(coils, npix, maps, x, out);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::ExpandCoils(stream, coils, npix, maps, x, out);
#else
  return NoCuda("ExpandCoils");
#endif
}

absl::Status CombineCoils(const Stream& stream, int coils, int64_t npix, const std::complex<float>* maps,
                          const std::complex<float>* in, std::complex<float>* x) {
  if (stream.backend() == Backend::kCpu) {
    cpu::CombineCoils(coils, npix, maps, in, x);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::CombineCoils(stream, coils, npix, maps, in, x);
#else
  return NoCuda("CombineCoils");
#endif
}

absl::Status WeightSamples(const Stream& stream, int coils, int64_t m, const float* weights, std::complex<float>* data) {
  if (stream.backend() == Backend::kCpu) {
    cpu::WeightSamples(coils, m, weights, data);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::WeightSamples(stream, coils, m, weights, data);
#else
  return NoCuda("WeightSamples");
#endif
}

}  // namespace mri
}  // namespace recon
}  // namespace tessera

// Wavelet plan (levels per axis, filter taps), the level loop and backend
// dispatch; the passes are in wavelet_cpu.cc and wavelet.cu.
#include "kernels/reconstruction/regularizers/wavelet.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/reconstruction/regularizers/wavelet_passes.h"
#include "kernels/reconstruction/vector_ops.h"

namespace tessera {
namespace recon {
namespace regularizers {
namespace {

using Complex = std::complex<float>;
using Levels = std::array<int, 3>;  // a macro argument may not hold a comma

WaveletTaps TapsOf(WaveletFilter filter) {
  // Daubechies low-pass filters, normalised to sum sqrt(2) (orthonormal).
  static const double kDb2[4] = {0.48296291314453416, 0.83651630373780794, 0.22414386804201339,
                                 -0.12940952255126037};
  static const double kDb4[8] = {0.23037781330889650, 0.71484657055291540, 0.63088076792985890,
                                 -0.02798376941685985, -0.18703481171909309, 0.03084138183556076,
                                 0.03288301166688520, -0.01059740178506903};
  WaveletTaps taps;
  const double* h = filter == WaveletFilter::kDb2 ? kDb2 : kDb4;
  taps.taps = filter == WaveletFilter::kDb2 ? 4 : 8;
  for (int j = 0; j < taps.taps; ++j) {
    taps.h[j] = static_cast<float>(h[j]);
    taps.g[j] = static_cast<float>((j % 2 == 0 ? 1 : -1) * h[taps.taps - 1 - j]);
  }
  return taps;
}

Dims3 DimsOf(const WaveletShape& shape) {
  Dims3 d;
  d.n[0] = shape.nx;
  d.n[1] = shape.ny;
  d.n[2] = shape.nz;
  return d;
}

// The band each axis has at `level` (0: the full image).
Dims3 BandAt(const Dims3& dims, const std::array<int, 3>& levels, int level) {
  Dims3 band;
  for (int a = 0; a < 3; ++a) band.n[a] = dims.n[a] >> std::min(level, levels[a]);
  return band;
}

bool IsCuda(const Stream& stream) { return stream.backend() == Backend::kCuda; }

absl::Status NoCuda() {
  return absl::FailedPreconditionError(
      absl::StrCat("wavelet: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
}

absl::Status ShiftCopy(const Stream& stream, const Dims3& dims, const std::array<int64_t, 3>& shift, bool unshift,
                       const Complex* src, Complex* dst) {
  if (!IsCuda(stream)) {
    cpu::ShiftCopy(dims, shift.data(), unshift, src, dst);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::ShiftCopy(stream, dims, shift.data(), unshift, src, dst);
#else
  return NoCuda();
#endif
}

absl::Status FilterAxis(const Stream& stream, const Dims3& dims, const Dims3& block, int axis,
                        const WaveletTaps& taps, bool inverse, Complex* data) {
  if (!IsCuda(stream)) {
    cpu::FilterAxis(dims, block, axis, taps, inverse, data);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::FilterAxis(stream, dims, block, axis, taps, inverse, data);
#else
  return NoCuda();
#endif
}

// Shifts normalised into [0, n) per axis.
std::array<int64_t, 3> Normalised(const Dims3& dims, const std::array<int64_t, 3>& shift) {
  std::array<int64_t, 3> s;
  for (int a = 0; a < 3; ++a) s[a] = ((shift[a] % dims.n[a]) + dims.n[a]) % dims.n[a];
  return s;
}

absl::Status CheckPointers(const void* a, const void* b) {
  if (a == nullptr || b == nullptr) return absl::InvalidArgumentError("wavelet: null image or coefficients");
  if (a == b) return absl::InvalidArgumentError("wavelet: image and coefficients must not alias");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::array<int, 3>> WaveletLevels(const WaveletShape& shape) {
  const int64_t n[3] = {shape.nx, shape.ny, shape.nz};
  const char* names[3] = {"nx", "ny", "nz"};
  for (int a = 0; a < 3; ++a) {
    if (n[a] < 1) return absl::InvalidArgumentError(absl::StrCat("wavelet: ", names[a], " = ", n[a], " < 1"));
  }
  if (shape.min_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("wavelet: min_size = ", shape.min_size, " < 1"));
  }
  std::array<int, 3> levels{};
  for (int a = 0; a < 3; ++a) {
    int64_t band = n[a];
    while (band % 2 == 0 && band / 2 >= shape.min_size) {
      band /= 2;
      ++levels[a];
    }
  }
  return levels;
}

absl::Status WaveletForward(const Stream& stream, const WaveletShape& shape, const std::array<int64_t, 3>& shift,
                            const Complex* x, Complex* coeffs) {
  TESSERA_RETURN_IF_ERROR(CheckPointers(x, coeffs));
  TESSERA_ASSIGN_OR_RETURN(const Levels levels, WaveletLevels(shape));
  const Dims3 dims = DimsOf(shape);
  const WaveletTaps taps = TapsOf(shape.filter);
  TESSERA_RETURN_IF_ERROR(ShiftCopy(stream, dims, Normalised(dims, shift), /*unshift=*/false, x, coeffs));
  const int max_level = std::max({levels[0], levels[1], levels[2]});
  for (int level = 0; level < max_level; ++level) {
    const Dims3 band = BandAt(dims, levels, level);
    // Axes filtered in order x, y, z; each pass halves that axis's band, so
    // the next axis filters both halves (the separable 2^d sub-bands).
    for (int a = 0; a < 3; ++a) {
      if (level < levels[a]) TESSERA_RETURN_IF_ERROR(FilterAxis(stream, dims, band, a, taps, false, coeffs));
    }
  }
  return absl::OkStatus();
}

absl::Status WaveletInverse(const Stream& stream, const WaveletShape& shape, const std::array<int64_t, 3>& shift,
                            Complex* coeffs, Complex* x) {
  TESSERA_RETURN_IF_ERROR(CheckPointers(coeffs, x));
  TESSERA_ASSIGN_OR_RETURN(const Levels levels, WaveletLevels(shape));
  const Dims3 dims = DimsOf(shape);
  const WaveletTaps taps = TapsOf(shape.filter);
  const int max_level = std::max({levels[0], levels[1], levels[2]});
  for (int level = max_level - 1; level >= 0; --level) {
    const Dims3 band = BandAt(dims, levels, level);
    for (int a = 2; a >= 0; --a) {
      if (level < levels[a]) TESSERA_RETURN_IF_ERROR(FilterAxis(stream, dims, band, a, taps, true, coeffs));
    }
  }
  return ShiftCopy(stream, dims, Normalised(dims, shift), /*unshift=*/true, coeffs, x);
}

absl::Status SoftThresholdDetails(const Stream& stream, const WaveletShape& shape, float threshold, Complex* coeffs) {
  if (coeffs == nullptr) return absl::InvalidArgumentError("wavelet: null coefficients");
  if (!(threshold >= 0) || !std::isfinite(threshold)) {
    return absl::InvalidArgumentError(absl::StrCat("wavelet: threshold = ", threshold, " is not finite and >= 0"));
  }
  TESSERA_ASSIGN_OR_RETURN(const Levels levels, WaveletLevels(shape));
  const Dims3 dims = DimsOf(shape);
  const Dims3 coarse = BandAt(dims, levels, std::max({levels[0], levels[1], levels[2]}));
  if (!IsCuda(stream)) {
    cpu::SoftThresholdOutside(dims, coarse, threshold, coeffs);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::SoftThresholdOutside(stream, dims, coarse, threshold, coeffs);
#else
  return NoCuda();
#endif
}

absl::StatusOr<std::unique_ptr<WaveletProx>> WaveletProx::Create(const Stream& stream, const WaveletShape& shape,
                                                                 uint64_t seed, bool random_shift,
                                                                 int shifts_per_call) {
  TESSERA_ASSIGN_OR_RETURN(const Levels levels, WaveletLevels(shape));
  if (shifts_per_call < 1) {
    return absl::InvalidArgumentError(absl::StrCat("wavelet: shifts_per_call = ", shifts_per_call, " < 1"));
  }
  std::unique_ptr<WaveletProx> prox(new WaveletProx(stream, shape));
  prox->levels_ = levels;
  prox->random_shift_ = random_shift;
  prox->shifts_per_call_ = random_shift ? shifts_per_call : 1;  // unshifted copies would all agree
  prox->rng_.seed(seed);
  const MemoryKind kind = MemoryKindFor(stream);
  const int images = prox->shifts_per_call_ > 1 ? 3 : 1;
  TESSERA_ASSIGN_OR_RETURN(prox->scratch_, Buffer::Allocate(kind, images * shape.nx * shape.ny * shape.nz *
                                                                       sizeof(Complex),
                                                            stream.ordinal()));
  return prox;
}

absl::Status WaveletProx::Apply(float threshold, Complex* x) {
  const int64_t n = shape_.nx * shape_.ny * shape_.nz;
  auto* coeffs = static_cast<Complex*>(scratch_->data());
  auto draw = [&] {
    // Shifts by multiples of 2^L_a only permute coefficients within bands, so
    // [0, 2^L_a) covers every distinct transform.
    if (!random_shift_) return;
    for (int a = 0; a < 3; ++a) shift_[a] = static_cast<int64_t>(rng_() % (uint64_t{1} << levels_[a]));
  };
  if (shifts_per_call_ == 1) {
    draw();
    TESSERA_RETURN_IF_ERROR(WaveletForward(stream_, shape_, shift_, x, coeffs));
    TESSERA_RETURN_IF_ERROR(SoftThresholdDetails(stream_, shape_, threshold, coeffs));
    return WaveletInverse(stream_, shape_, shift_, coeffs, x);
  }
  Complex* input = coeffs + n;
  Complex* sum = coeffs + 2 * n;
  const MemoryKind kind = MemoryKindFor(stream_);
  TESSERA_RETURN_IF_ERROR(CopyBytes(input, kind, x, kind, n * sizeof(Complex), stream_));
  const float weight = 1.f / shifts_per_call_;
  for (int k = 0; k < shifts_per_call_; ++k) {
    draw();
    TESSERA_RETURN_IF_ERROR(WaveletForward(stream_, shape_, shift_, input, coeffs));
    TESSERA_RETURN_IF_ERROR(SoftThresholdDetails(stream_, shape_, threshold, coeffs));
    TESSERA_RETURN_IF_ERROR(WaveletInverse(stream_, shape_, shift_, coeffs, k == 0 ? sum : x));
    if (k == 0) {
      TESSERA_RETURN_IF_ERROR(Scale(stream_, weight, reinterpret_cast<float*>(sum), 2 * n));
    } else {
      TESSERA_RETURN_IF_ERROR(Axpy(stream_, weight, reinterpret_cast<const float*>(x), reinterpret_cast<float*>(sum),
                                   2 * n));
    }
  }
  return CopyBytes(x, kind, sum, kind, n * sizeof(Complex), stream_);
}

}  // namespace regularizers
}  // namespace recon
}  // namespace tessera

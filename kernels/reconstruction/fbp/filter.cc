#include "kernels/reconstruction/fbp/filter.h"

#include <cmath>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace tessera {
namespace recon {
namespace fbp {
namespace {

constexpr double kPi = 3.14159265358979323846;

// Spatial ramp for tau = 1 at any integer offset.
double Ramp(int64_t n) {
  if (n == 0) return 0.25;
  if (n % 2 == 0) return 0.0;
  const double d = kPi * static_cast<double>(n);
  return -1.0 / (d * d);
}

}  // namespace

const char* FilterKindName(FilterKind kind) {
  switch (kind) {
    case FilterKind::kRamLak:
      return "ram-lak";
    case FilterKind::kSheppLogan:
      return "shepp-logan";
    case FilterKind::kCosine:
      return "cosine";
    case FilterKind::kHann:
      return "hann";
  }
  return "?";
}

absl::StatusOr<FilterKind> ParseFilterKind(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (FilterKind k : {FilterKind::kRamLak, FilterKind::kSheppLogan, FilterKind::kCosine, FilterKind::kHann}) {
    if (lower == FilterKindName(k)) return k;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("filter: unknown filter \"", name, "\" (expected ram-lak, shepp-logan, cosine or hann)"));
}

absl::Status ValidateCutoff(double cutoff) {
  if (!std::isfinite(cutoff) || cutoff <= 0.0 || cutoff > 1.0) {
    return absl::InvalidArgumentError(absl::StrCat("filter_cutoff must be in (0, 1], got ", cutoff));
  }
  return absl::OkStatus();
}

int64_t PaddedLength(int64_t cols) {
  int64_t n = 2;
  while (n < 2 * cols) n *= 2;
  return n;
}

std::vector<double> RampKernel(int64_t cols) {
  std::vector<double> h(cols > 0 ? cols : 0);
  for (int64_t n = 0; n < cols; ++n) h[n] = Ramp(n);
  return h;
}

double FilterWindow(FilterKind kind, double cutoff, double nu) {
  if (nu > cutoff) return 0.0;
  switch (kind) {
    case FilterKind::kRamLak:
      return 1.0;
    case FilterKind::kSheppLogan: {
      const double x = kPi * nu / (2.0 * cutoff);
      return x == 0.0 ? 1.0 : std::sin(x) / x;
    }
    case FilterKind::kCosine:
      return std::cos(kPi * nu / (2.0 * cutoff));
    case FilterKind::kHann:
      return 0.5 * (1.0 + std::cos(kPi * nu / cutoff));
  }
  return 0.0;
}

std::vector<float> FilterSpectrum(FilterKind kind, double cutoff, int64_t padded) {
  const int64_t half = padded / 2;
  // cos(2 pi m / N) for m in [0, N): the DFT of the even, real kernel is real.
  std::vector<double> cos_table(padded);
  for (int64_t m = 0; m < padded; ++m) cos_table[m] = std::cos(2.0 * kPi * static_cast<double>(m) / padded);
  std::vector<float> spectrum(half + 1);
  for (int64_t k = 0; k <= half; ++k) {
    // Circular offsets n in (-N/2, N/2]: h[0] + 2 sum_{0<n<N/2} h[n] cos + h[N/2] cos(pi k).
    double sum = Ramp(0);
    for (int64_t n = 1; n < half; n += 2) sum += 2.0 * Ramp(n) * cos_table[(k * n) % padded];
    if (half % 2 == 1) sum += Ramp(half) * cos_table[(k * half) % padded];
    const double nu = static_cast<double>(k) / static_cast<double>(half);
    spectrum[k] = static_cast<float>(sum * FilterWindow(kind, cutoff, nu) / static_cast<double>(padded));
  }
  return spectrum;
}

std::vector<float> HilbertSpectrum(FilterKind kind, double cutoff, int64_t padded) {
  const int64_t half = padded / 2;
  std::vector<double> sin_table(padded);
  for (int64_t m = 0; m < padded; ++m) sin_table[m] = std::sin(2.0 * kPi * static_cast<double>(m) / padded);
  std::vector<float> spectrum(half + 1);
  for (int64_t k = 0; k <= half; ++k) {
    // Odd kernel over circular offsets n in (-N/2, N/2): 2 sum_{0<n<N/2} h[n] sin (h[N/2] pairs with itself).
    double sum = 0.0;
    for (int64_t n = 1; n < half; n += 2) sum += 2.0 * (2.0 / (kPi * static_cast<double>(n))) * sin_table[(k * n) % padded];
    const double nu = static_cast<double>(k) / static_cast<double>(half);
    spectrum[k] = static_cast<float>(sum * FilterWindow(kind, cutoff, nu) / static_cast<double>(padded));
  }
  return spectrum;
}

}  // namespace fbp
}  // namespace recon
}  // namespace tessera

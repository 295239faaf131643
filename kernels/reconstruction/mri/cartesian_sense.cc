#include "kernels/reconstruction/mri/cartesian_sense.h"

#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/reconstruction/mri/sense_unfold.h"
#include "kernels/reconstruction/nufft/fftw_util.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

constexpr double kPi = 3.14159265358979323846;
using Complex = std::complex<float>;

int64_t Mod(int64_t a, int64_t n) { return ((a % n) + n) % n; }

absl::Status CenteredFft2d(int64_t nx, int64_t ny, int count, Complex* grids, int sign) {
  TESSERA_ASSIGN_OR_RETURN(auto plan, nufft::FftwPlan<float>::Create({nx, ny, 1}, sign));
  const nufft::FftwGrid& layout = plan->grid();
  auto work = nufft::AllocFftwArray<float>(layout.elements());
  if (work == nullptr) return absl::ResourceExhaustedError("centred FFT: out of memory");
  const int64_t cx = nx / 2, cy = ny / 2;
  for (int g = 0; g < count; ++g) {
    Complex* grid = grids + g * nx * ny;
    // ifftshift: element u + c goes to u mod N, then the plain DFT, then fftshift.
    for (int64_t j = 0; j < ny; ++j) {
      for (int64_t i = 0; i < nx; ++i) work[layout.Index(Mod(i - cx, nx), Mod(j - cy, ny), 0)] = grid[i + nx * j];
    }
    plan->Execute(work.get());
    for (int64_t j = 0; j < ny; ++j) {
      for (int64_t i = 0; i < nx; ++i) grid[i + nx * j] = work[layout.Index(Mod(i - cx, nx), Mod(j - cy, ny), 0)];
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CenteredInverseFft2d(int64_t nx, int64_t ny, int count, Complex* grids) {
  return CenteredFft2d(nx, ny, count, grids, +1);
}

absl::Status CenteredForwardFft2d(int64_t nx, int64_t ny, int count, Complex* grids) {
  return CenteredFft2d(nx, ny, count, grids, -1);
}

absl::StatusOr<CartesianSenseResult> CartesianSense(const Stream& stream, int64_t nx, int64_t ny, int coils,
                                                    const std::vector<Complex>& kspace,
                                                    const std::vector<Complex>& maps,
                                                    const CartesianSenseOptions& options) {
  SenseShape shape{nx, ny, coils, 1, options.axis};
  TESSERA_RETURN_IF_ERROR(CheckSenseShape(shape));
  const int64_t npix = nx * ny;
  if (static_cast<int64_t>(kspace.size()) != npix * coils || static_cast<int64_t>(maps.size()) != npix * coils) {
    return absl::InvalidArgumentError(absl::StrCat("Cartesian SENSE: kspace has ", kspace.size(), " and maps ",
                                                   maps.size(), " values; expected ", nx, " x ", ny, " x ", coils));
  }
  const bool along_y = options.axis == 1;
  const int64_t n = along_y ? ny : nx, other = along_y ? nx : ny;
  auto at = [&](int64_t line, int64_t k, int c) -> int64_t {
    return along_y ? k + nx * (line + ny * c) : line + nx * (k + ny * c);
  };
  std::vector<bool> sampled(n, false);
  int64_t sampled_count = 0;
  for (int64_t line = 0; line < n; ++line) {
    for (int c = 0; c < coils && !sampled[line]; ++c) {
      for (int64_t k = 0; k < other; ++k) {
        if (kspace[at(line, k, c)] != Complex(0, 0)) {
          sampled[line] = true;
          break;
        }
      }
    }
    sampled_count += sampled[line];
  }
  if (sampled_count == 0) return absl::InvalidArgumentError("Cartesian SENSE: k-space has no non-zero line");

  // The smallest R (or the requested one) with a fully sampled residue class.
  int reduction = 0, offset = 0;
  for (int r = options.reduction > 0 ? options.reduction : 1; r <= kMaxSenseReduction; ++r) {
    if (n % r != 0) {
      if (options.reduction > 0) break;
      continue;
    }
    for (int o = 0; o < r && reduction == 0; ++o) {
      bool full = true;
      for (int64_t line = o; line < n && full; line += r) full = sampled[line];
      if (full) reduction = r, offset = o;
    }
    if (reduction != 0 || options.reduction > 0) break;
  }
  if (reduction == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Cartesian SENSE: the ", sampled_count, " sampled lines of ", n, " along axis ", options.axis,
        options.reduction > 0 ? absl::StrCat(" do not contain every ", options.reduction, "-th line (reduction)")
                              : std::string(" form no regular pattern with R <= 8 dividing the axis")));
  }

  CartesianSenseResult result;
  result.reduction = reduction;
  std::vector<Complex> zero_filled(npix * coils, Complex(0, 0));
  for (int64_t line = 0; line < n; ++line) {
    if (!sampled[line]) continue;
    if (Mod(line - offset, reduction) != 0) {
      ++result.ignored_lines;
      continue;
    }
    for (int c = 0; c < coils; ++c) {
      for (int64_t k = 0; k < other; ++k) zero_filled[at(line, k, c)] = kspace[at(line, k, c)];
    }
  }
  TESSERA_RETURN_IF_ERROR(CenteredInverseFft2d(nx, ny, coils, zero_filled.data()));

  // Aliased images: the first L lines, x R / (nx ny) (the unnormalised
  // inverse DFT's scale and the 1/R of keeping one line in R).
  shape.reduction = reduction;
  const int64_t period = n / reduction, batch = shape.aliased_pixels();
  const float scale = static_cast<float>(reduction) / static_cast<float>(npix);
  std::vector<Complex> aliased(batch * coils), phased_maps = maps;
  for (int c = 0; c < coils; ++c) {
    for (int64_t p = 0; p < batch; ++p) {
      const int64_t line = along_y ? p / nx : p % period, k = along_y ? p % nx : p / period;
      aliased[p + batch * c] = scale * zero_filled[at(line, k, c)];
    }
  }
  // Copy r of the class with line offset o (relative to k = 0) carries
  // exp(-2 pi i r o / R).
  const int64_t class_offset = Mod(offset - n / 2, reduction);
  if (class_offset != 0) {
    for (int c = 0; c < coils; ++c) {
      for (int64_t line = 0; line < n; ++line) {
        const Complex phase = std::polar(1.0f, static_cast<float>(-2 * kPi * (line / period) * class_offset / reduction));
        for (int64_t k = 0; k < other; ++k) phased_maps[at(line, k, c)] *= phase;
      }
    }
  }

  result.image.assign(npix, Complex(0, 0));
  const MemoryKind kind = MemoryKindFor(stream);
  if (kind == MemoryKind::kHost) {
    TESSERA_ASSIGN_OR_RETURN(result.failed_pixels, SenseUnfold(stream, shape, options.lambda, phased_maps.data(),
                                                               aliased.data(), result.image.data()));
    return result;
  }
  const size_t bytes_maps = phased_maps.size() * sizeof(Complex), bytes_aliased = aliased.size() * sizeof(Complex);
  const size_t bytes_image = npix * sizeof(Complex);
  TESSERA_ASSIGN_OR_RETURN(auto device, Buffer::Allocate(kind, bytes_maps + bytes_aliased + bytes_image, stream.ordinal()));
  auto* d_maps = static_cast<Complex*>(device->data());
  Complex* d_aliased = d_maps + phased_maps.size();
  Complex* d_image = d_aliased + aliased.size();
  TESSERA_RETURN_IF_ERROR(CopyBytes(d_maps, kind, phased_maps.data(), MemoryKind::kHost, bytes_maps, stream));
  TESSERA_RETURN_IF_ERROR(CopyBytes(d_aliased, kind, aliased.data(), MemoryKind::kHost, bytes_aliased, stream));
  TESSERA_ASSIGN_OR_RETURN(result.failed_pixels, SenseUnfold(stream, shape, options.lambda, d_maps, d_aliased, d_image));
  TESSERA_RETURN_IF_ERROR(CopyBytes(result.image.data(), MemoryKind::kHost, d_image, kind, bytes_image, stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return result;
}

}  // namespace mri
}  // namespace recon
}  // namespace tessera

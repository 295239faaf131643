// CPU (FFTW) ESPIRiT Gram volumes and the backend dispatch.
#include "kernels/reconstruction/mri/espirit_volume.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status.h"
#include "kernels/reconstruction/nufft/fftw_util.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

constexpr double kPi = 3.14159265358979323846;

int64_t Wrap(int64_t d, int64_t n) { return ((d % n) + n) % n; }

}  // namespace

namespace cpu {

absl::Status EspiritGramVolumes(std::array<int64_t, 3> dims, std::array<int, 3> half, int pairs,
                                const std::vector<std::complex<float>>& phased, std::complex<float>* gram) {
  TESSERA_ASSIGN_OR_RETURN(auto plan, nufft::FftwPlan<float>::Create(dims, +1));
  const nufft::FftwGrid& layout = plan->grid();
  const int64_t voxels = dims[0] * dims[1] * dims[2];
  const int sx = 2 * half[0] + 1, sy = 2 * half[1] + 1, sz = 2 * half[2] + 1;
  std::atomic<bool> out_of_memory{false};
  ParallelForDynamic(pairs, 1, [&](int64_t begin, int64_t end, int) {
    auto work = nufft::AllocFftwArray<float>(layout.elements());
    if (work == nullptr) {
      out_of_memory = true;
      return;
    }
    for (int64_t l = begin; l < end; ++l) {
      std::fill(work.get(), work.get() + layout.elements(), std::complex<float>(0, 0));
      const std::complex<float>* k = phased.data() + l * sx * sy * sz;
      for (int dz = -half[2]; dz <= half[2]; ++dz) {
        for (int dy = -half[1]; dy <= half[1]; ++dy) {
          for (int dx = -half[0]; dx <= half[0]; ++dx) {
            work[layout.Index(Wrap(dx, dims[0]), Wrap(dy, dims[1]), Wrap(dz, dims[2]))] +=
                k[(dx + half[0]) + sx * ((dy + half[1]) + sy * (dz + half[2]))];
          }
        }
      }
      plan->Execute(work.get());
      std::complex<float>* out = gram + l * voxels;
      for (int64_t z = 0; z < dims[2]; ++z) {
        for (int64_t y = 0; y < dims[1]; ++y) {
          const std::complex<float>* row = work.get() + layout.Index(0, y, z);
          std::copy(row, row + dims[0], out + (z * dims[1] + y) * dims[0]);
        }
      }
    }
  });
  if (out_of_memory) return absl::ResourceExhaustedError("espirit Gram volumes: out of memory");
  return absl::OkStatus();
}

}  // namespace cpu

absl::Status EspiritGramVolumes(const Stream& stream, std::array<int64_t, 3> dims, std::array<int, 3> half, int pairs,
                                const std::vector<std::complex<double>>& kernels, std::complex<float>* gram) {
  if (dims[0] < 1 || dims[1] < 1 || dims[2] < 1 || half[0] < 0 || half[1] < 0 || half[2] < 0 || pairs < 1) {
    return absl::InvalidArgumentError(absl::StrCat("EspiritGramVolumes: image ", dims[0], " x ", dims[1], " x ",
                                                   dims[2], ", kernel half-widths ", half[0], ", ", half[1], ", ",
                                                   half[2], ", ", pairs, " pairs"));
  }
  const int sx = 2 * half[0] + 1, sy = 2 * half[1] + 1, sz = 2 * half[2] + 1;
  const size_t per_pair = static_cast<size_t>(sx) * sy * sz;
  if (kernels.size() != per_pair * pairs) {
    return absl::InvalidArgumentError(
        absl::StrCat("EspiritGramVolumes: ", kernels.size(), " kernel values, expected ", per_pair * pairs));
  }
  // The centring phase exp(-2 pi i d floor(n/2) / n) per axis (for even n: (-1)^d).
  auto axis_phase = [](int h, int64_t n) {
    std::vector<std::complex<double>> p(2 * h + 1);
    for (int d = -h; d <= h; ++d) p[d + h] = std::polar(1.0, -2 * kPi * static_cast<double>(Wrap(d * (n / 2), n)) / n);
    return p;
  };
  const auto px = axis_phase(half[0], dims[0]), py = axis_phase(half[1], dims[1]), pz = axis_phase(half[2], dims[2]);
  std::vector<std::complex<float>> phased(kernels.size());
  for (int l = 0; l < pairs; ++l) {
    for (int z = 0; z < sz; ++z) {
      for (int y = 0; y < sy; ++y) {
        for (int x = 0; x < sx; ++x) {
          const size_t at = l * per_pair + x + sx * (y + static_cast<size_t>(sy) * z);
          phased[at] = std::complex<float>(kernels[at] * (px[x] * py[y] * pz[z]));
        }
      }
    }
  }
  if (stream.backend() == Backend::kCpu) return cpu::EspiritGramVolumes(dims, half, pairs, phased, gram);
#if TESSERA_WITH_CUDA
  return cuda::EspiritGramVolumes(stream, dims, half, pairs, phased, gram);
#else
  return absl::FailedPreconditionError(absl::StrCat("EspiritGramVolumes: CUDA stream given but ",
                                                    DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

}  // namespace mri
}  // namespace recon
}  // namespace tessera

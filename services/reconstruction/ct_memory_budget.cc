#include "services/reconstruction/ct_memory_budget.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_format.h"
#include "common/status.h"
#include "kernels/reconstruction/ct/dd_projector.h"

namespace tessera::reconstruction {
namespace {

constexpr int64_t kFloat = sizeof(float);
constexpr int64_t kGib = int64_t{1} << 30;
// The projector's per-view tables and launch constants (dd_projector.cu),
// besides its back-projection scratch and transposed volume.
constexpr int64_t kProjectorTablesAllowance = int64_t{64} << 20;

double Gib(int64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(kGib); }

// Solver scratch in floats for one problem of n voxels and m measurements.
int64_t SolverScratchFloats(CtMethod method, int64_t n, int64_t m, int subsets) {
  const int64_t s = std::max(1, subsets);
  const int64_t subset_m = (m + s - 1) / s;
  const int64_t sart = s == 1 ? 2 * m + 2 * n + std::max(n, m)
                              // row sums, per-subset column sums, ones, work, back, compact y, exact residual
                              : m + s * n + std::max(n, subset_m) + subset_m + n + m + m;
  switch (method) {
    case CtMethod::kSart:
    case CtMethod::kOsSart:
      return sart;
    case CtMethod::kCgls:
      return 2 * m + 3 * n;  // r, q; s, p and the projected variant's previous iterate
    case CtMethod::kFistaTv:
      return 3 * n + m + n + 9 * n;  // FISTA's y, g, previous; residual and its back projection; FGP's dual fields
    case CtMethod::kAsdPocs:
      return sart + 3 * n;  // the TV descent's gradient, previous image and step copy
    case CtMethod::kFbp:
    case CtMethod::kFdk:
      break;
  }
  return 0;
}

}  // namespace

int64_t FreeMemoryMargin(int64_t total_bytes) { return std::max<int64_t>(int64_t{512} << 20, total_bytes / 20); }

absl::StatusOr<int64_t> CtDeviceBudgetBytes(const CtSpec& ct, const Stream& stream) {
  if (ct.device_memory_gib > 0) return static_cast<int64_t>(std::floor(ct.device_memory_gib * static_cast<double>(kGib)));
  if (stream.backend() != Backend::kCuda) return 0;
  TESSERA_ASSIGN_OR_RETURN(const GpuMemoryInfo info, QueryGpuMemory(stream.ordinal()));
  const int64_t free_bytes = static_cast<int64_t>(info.free_bytes);
  return std::max<int64_t>(1, free_bytes - FreeMemoryMargin(static_cast<int64_t>(info.total_bytes)));
}

int64_t CtIterativeDeviceBytes(CtMethod method, const recon::CtGeometry& g, int64_t slices, int subsets,
                               const recon::CtGeometry* solve) {
  const int64_t m = g.projection.sinogram_size();
  // n: the grid the solver works on; the output volumes are g's.
  const int64_t n = solve != nullptr ? solve->volume.size() : g.volume.size();
  const int64_t resident = (g.volume.size() + m) * slices + (solve != nullptr ? n : 0);
  const int64_t projector = n /* transposed volume */ + recon::ct::kDefaultBackScratchBytes / kFloat;
  return (resident + SolverScratchFloats(method, n, m, subsets) + projector) * kFloat + kProjectorTablesAllowance;
}

absl::Status CheckCtIterativeBudget(CtMethod method, const recon::CtGeometry& g, int64_t slices, int subsets,
                                    int64_t budget_bytes, const recon::CtGeometry* solve) {
  if (budget_bytes <= 0) return absl::OkStatus();
  const int64_t need = CtIterativeDeviceBytes(method, g, slices, subsets, solve);
  if (need <= budget_bytes) return absl::OkStatus();
  const std::string finer =
      solve == nullptr ? ""
                       : absl::StrFormat(" on a finer grid of %d x %d x %d (ct.voxel_subdivision)", solve->volume.nx,
                                         solve->volume.ny, solve->volume.nz);
  const int64_t volume = g.volume.size() * slices * kFloat, projections = g.projection.sinogram_size() * slices * kFloat;
  return absl::ResourceExhaustedError(absl::StrFormat(
      "ct.device_memory_gib: %s keeps the volume (%d x %d x %d, %.3g GiB) and the projections (%d views of %d x %d, "
      "%.3g GiB) resident and needs %.3g GiB with its scratch%s, over the budget of %.3g GiB (only fbp/fdk stream "
      "projections and split the volume; give a larger budget or use fdk)",
      CtMethodName(method), g.volume.nx, g.volume.ny, g.volume.nz * slices, Gib(volume), g.projection.num_views() * slices,
      g.projection.det_cols, g.projection.det_rows, Gib(projections), Gib(need), finer, Gib(budget_bytes)));
}

}  // namespace tessera::reconstruction

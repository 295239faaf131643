#include "kernels/reconstruction/fbp/fdk_chunking.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/optional.h"

namespace tessera {
namespace recon {
namespace fbp {
namespace {

constexpr int64_t kFloat = sizeof(float);
// Chunks this small still keep the GPU busy; another slab re-reads every view.
constexpr int64_t kMinViewsPerChunk = 8;

double Gib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }
double Mib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct SlabLayout {
  int64_t planes = 0;
  int64_t window_rows = 0;
  std::vector<FdkSlab> slabs;
};

// Slabs of `planes` planes (the last may be thinner) and their row windows.
SlabLayout LayoutSlabs(const FdkChunkInput& in, const std::vector<BackprojectView>& views, int64_t planes) {
  SlabLayout layout;
  layout.planes = planes;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t k0 = 0; k0 < in.nz; k0 += planes) {
    const int64_t k1 = std::min(in.nz, k0 + planes);
    int64_t first = 0, last = in.rows - 1;
    if (planes < in.nz) SlabRowRange(views, in.nx, in.ny, k0, k1, in.rows, &first, &last);
    ranges.push_back({first, last});
    layout.window_rows = std::max(layout.window_rows, last - first + 1);
    layout.slabs.push_back({k0, k1 - k0, 0});
  }
  layout.window_rows = std::max<int64_t>(1, layout.window_rows);
  for (size_t s = 0; s < ranges.size(); ++s) {
    // The window holds the slab's rows and stays inside the detector.
    const int64_t first = ranges[s].first <= ranges[s].second ? ranges[s].first : 0;
    layout.slabs[s].row0 = std::max<int64_t>(0, std::min(first, in.rows - layout.window_rows));
  }
  return layout;
}

}  // namespace

int64_t FdkDeviceBytes(const FdkChunkInput& in, int64_t slab_planes, int64_t window_rows, int64_t views_per_chunk) {
  const int64_t chunk_rows = views_per_chunk * window_rows;
  const int64_t volume = in.nx * in.ny * slab_planes * kFloat;
  const int64_t fft_rows = chunk_rows * (in.padded + 2) * kFloat;
  const int64_t fft_area = fft_rows;  // cuFFT's work area: at most the data it transforms
  const int64_t store = in.texture ? chunk_rows * in.cols * kFloat
                                   : views_per_chunk * (window_rows + 2) * (in.cols + 2) * kFloat;
  const int64_t slots = 2 * chunk_rows * in.input_cols * kFloat;
  const int64_t constants = in.views * 2 * 12 * kFloat + (in.padded / 2 + 1) * kFloat +
                            (in.column_weights ? in.views * in.cols * kFloat : 0);
  return volume + fft_rows + fft_area + store + slots + constants + in.fixed_allowance_bytes;
}

void SlabRowRange(const std::vector<BackprojectView>& views, int64_t nx, int64_t ny, int64_t k0, int64_t k1,
                  int64_t rows, int64_t* first, int64_t* last) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  const double is[2] = {0.0, static_cast<double>(nx - 1)};
  const double js[2] = {0.0, static_cast<double>(ny - 1)};
  const double ks[2] = {static_cast<double>(k0), static_cast<double>(k1 - 1)};
  for (const BackprojectView& w : views) {
    for (double i : is) {
      for (double j : js) {
        for (double k : ks) {
          const double d = w.d[0] * i + w.d[1] * j + w.d[2] * k + w.d[3];
          if (!(d > 0)) {  // behind the source (MakeFbpSetup refuses it): read every row
            *first = 0;
            *last = rows - 1;
            return;
          }
          const double b = (w.b[0] * i + w.b[1] * j + w.b[2] * k + w.b[3]) / d;
          lo = std::min(lo, b);
          hi = std::max(hi, b);
        }
      }
    }
  }
  // A sample at b reads rows floor(b) and floor(b) + 1; one more each side
  // covers the float rounding of the kernels' own b.
  *first = std::max<int64_t>(0, static_cast<int64_t>(std::floor(std::max(lo, -2.0))) - 1);
  *last = std::min<int64_t>(rows - 1, static_cast<int64_t>(std::floor(std::min(hi, static_cast<double>(rows) + 1))) + 2);
}

absl::StatusOr<FdkChunking> PlanFdkChunks(const FdkChunkInput& in, const std::vector<BackprojectView>& views,
                                          int64_t budget_bytes) {
  if (budget_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("fdk: device memory budget must be positive, got ", budget_bytes));
  }
  if (in.nx <= 0 || in.ny <= 0 || in.nz <= 0 || in.views <= 0 || in.cols <= 0 || in.input_cols <= 0 ||
      in.rows <= 0 || in.padded < in.cols || static_cast<int64_t>(views.size()) != in.views) {
    return absl::InvalidArgumentError("fdk: chunk planning needs positive sizes and one view constant per view");
  }
  const int64_t max_chunk = std::max<int64_t>(1, std::min(in.views, in.max_views_per_chunk > 0 ? in.max_views_per_chunk
                                                                                              : in.views));
  // Views per chunk that fit beside a slab of `planes` planes (may be <= 0).
  const auto fit = [&](const SlabLayout& l) {
    const int64_t base = FdkDeviceBytes(in, l.planes, l.window_rows, 0);
    const int64_t per_view = FdkDeviceBytes(in, l.planes, l.window_rows, 1) - base;
    return budget_bytes < base ? int64_t{0} : (budget_bytes - base) / per_view;
  };
  absl::optional<SlabLayout> fallback;  // fewest slabs with one view per chunk
  int64_t fallback_views = 0;
  int64_t previous_planes = -1;
  for (int64_t count = 1;; ++count) {
    int64_t planes = CeilDiv(in.nz, count);
    if (planes < in.nz) planes = std::min(in.nz, CeilDiv(planes, kSlabPlaneMultiple) * kSlabPlaneMultiple);
    if (planes == previous_planes) continue;
    previous_planes = planes;
    SlabLayout layout = LayoutSlabs(in, views, planes);
    const int64_t n = std::min(max_chunk, fit(layout));
    if (n >= std::min(max_chunk, kMinViewsPerChunk)) {
      fallback = std::move(layout);
      fallback_views = n;
      break;
    }
    if (n >= 1 && !fallback) {
      fallback = layout;
      fallback_views = n;
    }
    if (planes <= std::min(in.nz, kSlabPlaneMultiple)) break;
  }
  if (!fallback) {
    const int64_t planes = std::min(in.nz, kSlabPlaneMultiple);
    const SlabLayout thin = LayoutSlabs(in, views, planes);
    const int64_t need = FdkDeviceBytes(in, planes, thin.window_rows, 1);
    return absl::ResourceExhaustedError(absl::StrFormat(
        "fdk: device memory budget %.3f GiB is too small: even a slab of %d planes of %d x %d voxels "
        "(%.1f MiB) with one view of %d of %d detector rows x %d columns and its filter scratch needs %.1f MiB "
        "(%.1f MiB of it fixed: per-view constants and cuFFT allowance)",
        Gib(budget_bytes), planes, in.nx, in.ny, Mib(in.nx * in.ny * planes * kFloat), thin.window_rows, in.rows,
        in.cols, Mib(need), Mib(FdkDeviceBytes(in, 0, thin.window_rows, 0))));
  }
  FdkChunking out;
  out.views_per_chunk = fallback_views;
  out.window_rows = fallback->window_rows;
  out.slabs = std::move(fallback->slabs);
  out.slab_planes = fallback->planes;
  out.device_bytes = FdkDeviceBytes(in, out.slab_planes, out.window_rows, out.views_per_chunk);
  return out;
}

std::string FdkChunking::Describe(const FdkChunkInput& in, int64_t budget_bytes) const {
  return absl::StrFormat("%d slab%s of <= %d planes, row windows of %d of %d, %d views per chunk, %.2f GiB of %.2f GiB",
                         slabs.size(), slabs.size() == 1 ? "" : "s", slab_planes, window_rows, in.rows,
                         views_per_chunk, Gib(device_bytes), Gib(budget_bytes));
}

}  // namespace fbp
}  // namespace recon
}  // namespace tessera

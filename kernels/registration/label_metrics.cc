// CPU implementation of label_metrics.h.
#include "kernels/registration/label_metrics.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <thread>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/registration/reg_parallel.h"

namespace tessera {
namespace registration {
namespace label_metrics_internal {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// 1-D lower envelope of parabolas: d[q] = min_p s2 (q - p)^2 + f[p].
// v, z: scratch of n and n + 1 entries.
void Edt1d(const double* f, int64_t n, double s2, double* d, int64_t* v, double* z) {
  int64_t k = -1;
  for (int64_t q = 0; q < n; ++q) {
    if (f[q] == kInf) continue;
    if (k < 0) {
      k = 0;
      v[0] = q;
      z[0] = -kInf;
      z[1] = kInf;
      continue;
    }
    auto meet = [&](int64_t p) {
      return ((f[q] + s2 * double(q) * double(q)) - (f[p] + s2 * double(p) * double(p))) / (2.0 * s2 * double(q - p));
    };
    double s = meet(v[k]);
    while (s <= z[k]) {  // z[0] = -inf stops this at k = 0
      --k;
      s = meet(v[k]);
    }
    ++k;
    v[k] = q;
    z[k] = s;
    z[k + 1] = kInf;
  }
  if (k < 0) {
    std::fill(d, d + n, kInf);
    return;
  }
  k = 0;
  for (int64_t q = 0; q < n; ++q) {
    while (z[k + 1] < double(q)) ++k;
    const double dq = double(q - v[k]);
    d[q] = s2 * dq * dq + f[v[k]];
  }
}

// Transforms `vol` (nx, ny, nz) in place along one axis.
void EdtAxis(double* vol, int64_t nx, int64_t ny, int64_t nz, int axis, double spacing) {
  const int64_t n = axis == 0 ? nx : (axis == 1 ? ny : nz);
  const int64_t stride = axis == 0 ? 1 : (axis == 1 ? nx : nx * ny);
  const int64_t lines = nx * ny * nz / n;
  std::vector<double> f(n), d(n), z(n + 1);
  std::vector<int64_t> v(n);
  const double s2 = spacing * spacing;
  for (int64_t line = 0; line < lines; ++line) {
    int64_t base;
    if (axis == 0) {
      base = line * nx;
    } else if (axis == 1) {
      base = (line % nx) + (line / nx) * nx * ny;
    } else {
      base = line;
    }
    for (int64_t q = 0; q < n; ++q) f[q] = vol[base + q * stride];
    Edt1d(f.data(), n, s2, d.data(), v.data(), z.data());
    for (int64_t q = 0; q < n; ++q) vol[base + q * stride] = d[q];
  }
}

}  // namespace

void SquaredEdt(const uint8_t* sites, int64_t nx, int64_t ny, int64_t nz, const std::array<double, 3>& spacing,
                double* out) {
  const int64_t total = nx * ny * nz;
  for (int64_t i = 0; i < total; ++i) out[i] = sites[i] ? 0.0 : kInf;
  EdtAxis(out, nx, ny, nz, 0, spacing[0]);
  EdtAxis(out, nx, ny, nz, 1, spacing[1]);
  EdtAxis(out, nx, ny, nz, 2, spacing[2]);
}

double Percentile(std::vector<double>& values, double p) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  const double pos = p / 100.0 * double(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (pos - double(lo)) * (values[hi] - values[lo]);
}

}  // namespace label_metrics_internal

namespace {

using label_metrics_internal::Percentile;
using label_metrics_internal::SquaredEdt;

struct Box {
  int64_t lo[3] = {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max(),
                   std::numeric_limits<int64_t>::max()};
  int64_t hi[3] = {-1, -1, -1};
  void Add(int64_t i, int64_t j, int64_t k) {
    const int64_t p[3] = {i, j, k};
    for (int a = 0; a < 3; ++a) lo[a] = std::min(lo[a], p[a]), hi[a] = std::max(hi[a], p[a]);
  }
  void Merge(const Box& o) {
    for (int a = 0; a < 3; ++a) lo[a] = std::min(lo[a], o.lo[a]), hi[a] = std::max(hi[a], o.hi[a]);
  }
};

struct Stats {
  int64_t a = 0, b = 0, both = 0;
  Box box;
};

absl::StatusOr<std::vector<int32_t>> ToInt32(const NDArray& x, const char* name) {
  if (x.memory_kind() == MemoryKind::kDevice) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": label maps must be in host memory"));
  }
  if (x.dtype() == DType::kFloat32 || x.dtype() == DType::kFloat64 || x.dtype() == DType::kInvalid) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": label maps need an integer dtype, got ",
                                                   DTypeName(x.dtype())));
  }
  std::vector<int32_t> out(x.num_elements());
  VisitDType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = x.data<T>();
    // Gigavoxel maps (3.7 G voxels at 1550^3): converted in parallel.
    reg_internal::ParallelChunks(x.num_elements(), int64_t{1} << 20, [&](int, int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[i] = static_cast<int32_t>(p[i]);
    });
  });
  return out;
}

// Surface voxels of `mask` (n[0] x n[1] x n[2]): in the mask with a face
// neighbour outside it or outside the box.
void Surface(const std::vector<uint8_t>& mask, const int64_t n[3], std::vector<uint8_t>& surf) {
  surf.assign(mask.size(), 0);
  for (int64_t k = 0; k < n[2]; ++k) {
    for (int64_t j = 0; j < n[1]; ++j) {
      for (int64_t i = 0; i < n[0]; ++i) {
        const int64_t v = i + n[0] * (j + n[1] * k);
        if (!mask[v]) continue;
        const bool edge = i == 0 || j == 0 || k == 0 || i == n[0] - 1 || j == n[1] - 1 || k == n[2] - 1;
        surf[v] = edge || !mask[v - 1] || !mask[v + 1] || !mask[v - n[0]] || !mask[v + n[0]] ||
                  !mask[v - n[0] * n[1]] || !mask[v + n[0] * n[1]];
      }
    }
  }
}

// Distances (mm) from each `from` surface voxel to the nearest `to` surface voxel.
std::vector<double> SurfaceDistances(const std::vector<uint8_t>& from, const std::vector<uint8_t>& to,
                                     const int64_t n[3], const std::array<double, 3>& spacing,
                                     std::vector<double>& edt) {
  edt.resize(to.size());
  SquaredEdt(to.data(), n[0], n[1], n[2], spacing, edt.data());
  std::vector<double> d;
  for (size_t v = 0; v < from.size(); ++v) {
    if (from[v]) d.push_back(std::sqrt(edt[v]));
  }
  return d;
}

void Hausdorff(const std::vector<int32_t>& a, const std::vector<int32_t>& b, int64_t nx, int64_t ny, int32_t label,
               const Box& box, const std::array<double, 3>& spacing, LabelScore* score) {
  const int64_t n[3] = {box.hi[0] - box.lo[0] + 1, box.hi[1] - box.lo[1] + 1, box.hi[2] - box.lo[2] + 1};
  const int64_t total = n[0] * n[1] * n[2];
  std::vector<uint8_t> ma(total), mb(total), sa, sb;
  for (int64_t k = 0; k < n[2]; ++k) {
    for (int64_t j = 0; j < n[1]; ++j) {
      const int64_t src = box.lo[0] + nx * ((box.lo[1] + j) + ny * (box.lo[2] + k));
      const int64_t dst = n[0] * (j + n[1] * k);
      for (int64_t i = 0; i < n[0]; ++i) {
        ma[dst + i] = a[src + i] == label;
        mb[dst + i] = b[src + i] == label;
      }
    }
  }
  Surface(ma, n, sa);
  Surface(mb, n, sb);
  std::vector<double> edt;
  std::vector<double> dab = SurfaceDistances(sa, sb, n, spacing, edt);
  std::vector<double> dba = SurfaceDistances(sb, sa, n, spacing, edt);
  score->hd95_mm = std::max(Percentile(dab, 95), Percentile(dba, 95));
  score->hd90_mm = std::max(Percentile(dab, 90), Percentile(dba, 90));
  score->hd100_mm = std::max(dab.back(), dba.back());  // sorted by Percentile
}

}  // namespace

absl::StatusOr<LabelMetrics> ComputeLabelMetrics(const NDArray& a, const NDArray& b,
                                                 const LabelMetricsOptions& options) {
  if (a.rank() != 3 || a.shape() != b.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("ComputeLabelMetrics: need two rank-3 maps of one shape, got ",
                                                   ShapeToString(a.shape()), " and ", ShapeToString(b.shape())));
  }
  for (double s : options.spacing_mm) {
    if (!(s > 0) || !std::isfinite(s)) return absl::InvalidArgumentError("ComputeLabelMetrics: spacing must be > 0");
  }
  TESSERA_ASSIGN_OR_RETURN(std::vector<int32_t> la, ToInt32(a, "a"));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int32_t> lb, ToInt32(b, "b"));
  const int64_t nx = a.dim(0), ny = a.dim(1), nz = a.dim(2);

  // Per-label counts and bounding boxes, per z-slab, merged in slab order.
  const int chunks = reg_internal::NumChunks(nz, 1);
  std::vector<std::unordered_map<int32_t, Stats>> part(std::max(chunks, 1));
  reg_internal::ParallelChunks(nz, 1, [&](int c, int64_t z0, int64_t z1) {
    auto& m = part[c];
    // Labels come in runs: the last label's entry is reused without a hash
    // lookup (unordered_map entries stay put when the map grows).
    int32_t last = 0;
    Stats* last_stats = nullptr;
    const auto stats = [&](int32_t label) -> Stats& {
      if (last_stats == nullptr || label != last) last = label, last_stats = &m[label];
      return *last_stats;
    };
    const bool boxes = options.hausdorff;  // bounding boxes only bound the Hausdorff work
    for (int64_t k = z0; k < z1; ++k) {
      for (int64_t j = 0; j < ny; ++j) {
        for (int64_t i = 0; i < nx; ++i) {
          const int64_t v = i + nx * (j + ny * k);
          const int32_t x = la[v], y = lb[v];
          if (!(options.ignore_background && x == 0)) {
            Stats& s = stats(x);
            ++s.a;
            s.both += x == y;
            if (boxes) s.box.Add(i, j, k);
          }
          if (x != y && !(options.ignore_background && y == 0)) {
            Stats& s = stats(y);
            ++s.b;
            if (boxes) s.box.Add(i, j, k);
          } else if (x == y && !(options.ignore_background && y == 0)) {
            ++stats(y).b;
          }
        }
      }
    }
  });
  std::map<int32_t, Stats> all;
  for (const auto& m : part) {
    for (const auto& [label, s] : m) {
      Stats& t = all[label];
      t.a += s.a;
      t.b += s.b;
      t.both += s.both;
      t.box.Merge(s.box);
    }
  }

  LabelMetrics out;
  std::vector<Box> boxes;
  for (const auto& [label, s] : all) {
    LabelScore sc;
    sc.label = label;
    sc.voxels_a = s.a;
    sc.voxels_b = s.b;
    sc.intersection = s.both;
    sc.dice = 2.0 * double(s.both) / double(s.a + s.b);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    const double hd = !options.hausdorff ? nan : (s.a == 0 || s.b == 0 ? inf : 0.0);
    sc.hd95_mm = sc.hd90_mm = sc.hd100_mm = hd;
    out.labels.push_back(sc);
    boxes.push_back(s.box);
  }
  if (options.hausdorff) {
    std::atomic<size_t> next{0};
    const int workers = std::max(1, std::min<int>(reg_internal::CpuThreads(), int(out.labels.size())));
    auto work = [&] {
      for (size_t i = next++; i < out.labels.size(); i = next++) {
        LabelScore& sc = out.labels[i];
        if (sc.voxels_a == 0 || sc.voxels_b == 0) continue;
        Hausdorff(la, lb, nx, ny, int32_t(sc.label), boxes[i], options.spacing_mm, &sc);
      }
    };
    std::vector<std::thread> threads;
    for (int t = 1; t < workers; ++t) threads.emplace_back(work);
    work();
    for (auto& t : threads) t.join();
  }
  double dice = 0, hd95 = 0, hd90 = 0;
  int64_t both = 0;
  for (const auto& sc : out.labels) {
    dice += sc.dice;
    if (sc.voxels_a > 0 && sc.voxels_b > 0) hd95 += sc.hd95_mm, hd90 += sc.hd90_mm, ++both;
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  out.mean_dice = out.labels.empty() ? nan : dice / double(out.labels.size());
  out.mean_hd95_mm = both == 0 || !options.hausdorff ? nan : hd95 / double(both);
  out.mean_hd90_mm = both == 0 || !options.hausdorff ? nan : hd90 / double(both);
  return out;
}

}  // namespace registration
}  // namespace tessera

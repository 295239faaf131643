// CPU batch update (also the reference): per-feature planes, running-window
// box blur in double, division by the blurred counts.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/som/batch_update.h"
#include "kernels/som/bmu.h"
#include "kernels/som/half.h"
#include "kernels/som/parallel.h"

namespace tessera {
namespace som {
namespace cpu {
namespace {

inline int64_t Mod(int64_t a, int64_t n) {
  const int64_t r = a % n;
  return r < 0 ? r + n : r;
}

// out[x] = sum of in over the window [x - b, x + b] (truncated or wrapped),
// for a line of n values at the given strides.
void BlurLine(const float* in, int64_t in_stride, float* out, int64_t out_stride, int n, int b, bool torus) {
  if (torus) {
    double total = 0;
    for (int t = 0; t < n; ++t) total += in[t * in_stride];
    const int64_t width = 2 * int64_t{b} + 1;
    double s = static_cast<double>(width / n) * total;
    const int64_t rest = width % n;
    for (int64_t t = 0; t < rest; ++t) s += in[Mod(t - b, n) * in_stride];
    for (int x = 0; x < n; ++x) {
      out[x * out_stride] = static_cast<float>(s);
      s += static_cast<double>(in[Mod(int64_t{x} + b + 1, n) * in_stride]) - in[Mod(int64_t{x} - b, n) * in_stride];
    }
    return;
  }
  double s = 0;
  const int first_end = static_cast<int>(std::min<int64_t>(b, n - 1));
  for (int t = 0; t <= first_end; ++t) s += in[t * in_stride];
  for (int x = 0; x < n; ++x) {
    out[x * out_stride] = static_cast<float>(s);
    const int64_t add = int64_t{x} + b + 1, sub = int64_t{x} - b;
    if (add < n) s += in[add * in_stride];
    if (sub >= 0) s -= in[sub * in_stride];
  }
}

}  // namespace

void BoxBlurPlane(float* plane, float* scratch, const GridShape& grid, const BoxBlur& blur) {
  if (blur.half_width == 0) return;
  const int w = grid.width, h = grid.height, b = blur.half_width;
  const bool torus = grid.topology == Topology::kToroidal;
  for (int pass = 0; pass < blur.passes; ++pass) {
    for (int y = 0; y < h; ++y) BlurLine(plane + int64_t{y} * w, 1, scratch + int64_t{y} * w, 1, w, b, torus);
    for (int x = 0; x < w; ++x) BlurLine(scratch + x, w, plane + x, w, h, b, torus);
  }
}

void BoxBlurPlaneDirect(const float* in, float* out, const GridShape& grid, const BoxBlur& blur) {
  const int w = grid.width, h = grid.height, b = blur.half_width;
  const bool torus = grid.topology == Topology::kToroidal;
  std::vector<double> cur(in, in + grid.nodes()), next(grid.nodes());
  auto axis_pass = [&](bool along_x) {
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        double s = 0;
        for (int d = -b; d <= b; ++d) {
          int64_t xx = x, yy = y;
          (along_x ? xx : yy) += d;
          const int64_t n = along_x ? w : h;
          int64_t& c = along_x ? xx : yy;
          if (torus) {
            c = Mod(c, n);
          } else if (c < 0 || c >= n) {
            continue;
          }
          s += cur[xx + int64_t{w} * yy];
        }
        next[x + int64_t{w} * y] = static_cast<float>(s);  // planes are fp32 between axis passes
      }
    }
    cur.swap(next);
  };
  if (b > 0) {
    for (int pass = 0; pass < blur.passes; ++pass) {
      axis_pass(true);
      axis_pass(false);
    }
  }
  for (int64_t i = 0; i < grid.nodes(); ++i) out[i] = static_cast<float>(cur[i]);
}

void BatchUpdate(const CscView& docs, const int32_t* bmu, const GridShape& grid, const BoxBlur& blur,
                 const CodebookView& codebook) {
  const int64_t m = grid.nodes();
  // Blurred counts.
  std::vector<uint32_t> hits(m, 0);
  for (int64_t d = 0; d < docs.docs; ++d) ++hits[bmu[d]];
  std::vector<float> counts(m), scratch(m);
  for (int64_t i = 0; i < m; ++i) counts[i] = static_cast<float>(hits[i]);
  BoxBlurPlane(counts.data(), scratch.data(), grid, blur);

  struct WorkerBuffers {
    std::vector<uint32_t> hist;
    std::vector<float> plane, scratch;
  };
  std::vector<std::unique_ptr<WorkerBuffers>> workers(CpuThreads());
  const bool half = codebook.type == WeightType::kFloat16;
  ParallelForDynamic(docs.features, 8, [&](int64_t v0, int64_t v1, int worker) {
    if (workers[worker] == nullptr) {
      workers[worker] = std::make_unique<WorkerBuffers>();
      workers[worker]->hist.resize(m);
      workers[worker]->plane.resize(m);
      workers[worker]->scratch.resize(m);
    }
    WorkerBuffers& buf = *workers[worker];
    for (int64_t v = v0; v < v1; ++v) {
      float* plane = buf.plane.data();
      const int64_t k0 = docs.offsets[v], k1 = docs.offsets[v + 1];
      if (k0 == k1) {
        std::fill(buf.plane.begin(), buf.plane.end(), 0.0f);
      } else {
        std::fill(buf.hist.begin(), buf.hist.end(), 0u);
        for (int64_t k = k0; k < k1; ++k) ++buf.hist[bmu[docs.doc_ids[k]]];
        for (int64_t i = 0; i < m; ++i) plane[i] = static_cast<float>(buf.hist[i]);
        BoxBlurPlane(plane, buf.scratch.data(), grid, blur);
      }
      if (half) {
        uint16_t* w = static_cast<uint16_t*>(codebook.weights) + v * m;
        for (int64_t i = 0; i < m; ++i) {
          if (counts[i] > 0.0f) w[i] = FloatToHalf(plane[i] / counts[i]);
        }
      } else {
        float* w = static_cast<float*>(codebook.weights) + v * m;
        for (int64_t i = 0; i < m; ++i) {
          if (counts[i] > 0.0f) w[i] = plane[i] / counts[i];
        }
      }
    }
  });
  ComputeSqNorms(codebook);
}

}  // namespace cpu
}  // namespace som
}  // namespace tessera

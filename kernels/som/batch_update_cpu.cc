// CPU batch update (also the reference): per-feature planes, running-window
// box blur in double, division by the blurred counts.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/som/batch_update.h"
#include "kernels/som/bmu.h"
#include "kernels/som/cpu_clones.h"
#include "kernels/som/group_bounds.h"
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

// One axis pass along y for every column at once (lanes run over x, so the
// loop vectorises): out[y][x] = sum of in over the window [y - b, y + b]
// (truncated or wrapped) of column x, as a running sum in double. Per cell
// the additions are those of the CUDA y pass (a truncated window adds an
// exact 0.0 instead of skipping), so both round alike.
TESSERA_SOM_CLONES void BlurColumns(const float* __restrict in, float* __restrict out, int w, int h, int b,
                                    bool torus, double* __restrict acc, const float* __restrict zeros) {
  const int64_t W = w;
  std::fill(acc, acc + w, 0.0);
  if (torus) {
    for (int t = 0; t < h; ++t) {
      for (int x = 0; x < w; ++x) acc[x] += in[t * W + x];
    }
    const int64_t width = 2 * int64_t{b} + 1;
    const double q = static_cast<double>(width / h);
    for (int x = 0; x < w; ++x) acc[x] *= q;  // q copies of the whole column (exact: integer q)
    const int64_t rest = width % h;
    for (int64_t t = 0; t < rest; ++t) {
      const float* row = in + Mod(t - b, h) * W;
      for (int x = 0; x < w; ++x) acc[x] += row[x];
    }
    for (int y = 0; y < h; ++y) {
      float* o = out + y * W;
      const float* add = in + Mod(int64_t{y} + b + 1, h) * W;
      const float* sub = in + Mod(int64_t{y} - b, h) * W;
      for (int x = 0; x < w; ++x) {
        const double a = acc[x];
        o[x] = static_cast<float>(a);
        acc[x] = a + (static_cast<double>(add[x]) - sub[x]);
      }
    }
    return;
  }
  const int first_end = std::min(b, h - 1);
  for (int t = 0; t <= first_end; ++t) {
    for (int x = 0; x < w; ++x) acc[x] += in[t * W + x];
  }
  for (int y = 0; y < h; ++y) {
    float* o = out + y * W;
    const int64_t a_row = int64_t{y} + b + 1, s_row = int64_t{y} - b;
    const float* add = a_row < h ? in + a_row * W : zeros;
    const float* sub = s_row >= 0 ? in + s_row * W : zeros;
    for (int x = 0; x < w; ++x) {
      const double a = acc[x];
      o[x] = static_cast<float>(a);
      acc[x] = (a + add[x]) - sub[x];
    }
  }
}

// The 3-tap kernel along y for every column at once: out = c + a (up + down),
// a missing neighbour (planar border) counting 0. Compiled without FMA
// contraction (-ffp-contract=off), as the CUDA version uses explicit rounding.
TESSERA_SOM_CLONES void Tap3Columns(const float* __restrict in, float* __restrict out, int w, int h, double a,
                                    bool torus, const float* __restrict zeros) {
  const int64_t W = w;
  for (int y = 0; y < h; ++y) {
    const float* up = torus ? in + Mod(int64_t{y} - 1, h) * W : (y > 0 ? in + (y - 1) * W : zeros);
    const float* down = torus ? in + Mod(int64_t{y} + 1, h) * W : (y + 1 < h ? in + (y + 1) * W : zeros);
    const float* c = in + y * W;
    float* o = out + y * W;
    for (int x = 0; x < w; ++x) {
      const double side = static_cast<double>(up[x]) + static_cast<double>(down[x]);
      o[x] = static_cast<float>(static_cast<double>(c[x]) + a * side);
    }
  }
}

// out (w x h, x fastest) = in (h x w) transposed.
TESSERA_SOM_CLONES void Transpose(const float* __restrict in, float* __restrict out, int in_w, int in_h) {
  constexpr int kBlock = 16;
  for (int y0 = 0; y0 < in_h; y0 += kBlock) {
    for (int x0 = 0; x0 < in_w; x0 += kBlock) {
      const int y1 = std::min(in_h, y0 + kBlock), x1 = std::min(in_w, x0 + kBlock);
      for (int y = y0; y < y1; ++y) {
        for (int x = x0; x < x1; ++x) out[int64_t{x} * in_h + y] = in[int64_t{y} * in_w + x];
      }
    }
  }
}

}  // namespace

void BoxBlurPlane(float* plane, const GridShape& grid, const BoxBlur& blur, BlurScratch& scratch) {
  const bool tap = blur.half_width == 0 && blur.side_weight > 0;
  if (!tap && (blur.half_width == 0 || blur.passes == 0)) return;
  const int w = grid.width, h = grid.height, b = blur.half_width, k = blur.passes;
  const bool torus = grid.topology == Topology::kToroidal;
  const size_t m = static_cast<size_t>(grid.nodes());
  if (scratch.a.size() < m) scratch.a.resize(m);
  if (scratch.b.size() < m) scratch.b.resize(m);
  const size_t lanes = static_cast<size_t>(std::max(w, h));
  if (scratch.acc.size() < lanes) scratch.acc.resize(lanes);
  if (scratch.zeros.size() < lanes) scratch.zeros.assign(lanes, 0.0f);
  float* cur = scratch.a.data();
  float* other = scratch.b.data();
  if (tap) {
    Transpose(plane, cur, w, h);
    Tap3Columns(cur, other, h, w, blur.side_weight, torus, scratch.zeros.data());
    Transpose(other, cur, h, w);
    Tap3Columns(cur, plane, w, h, blur.side_weight, torus, scratch.zeros.data());
    return;
  }
  // k passes along x on the transposed plane (h wide, w tall) ...
  Transpose(plane, cur, w, h);
  for (int pass = 0; pass < k; ++pass) {
    BlurColumns(cur, other, h, w, b, torus, scratch.acc.data(), scratch.zeros.data());
    std::swap(cur, other);
  }
  Transpose(cur, other, h, w);
  std::swap(cur, other);
  // ... then k along y, the last one into the plane.
  for (int pass = 0; pass < k; ++pass) {
    float* dst = pass == k - 1 ? plane : other;
    BlurColumns(cur, dst, w, h, b, torus, scratch.acc.data(), scratch.zeros.data());
    std::swap(cur, other);
    cur = dst;
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
  // The 3-tap kernel: c + a (left + right), a missing neighbour counting 0.
  auto tap_pass = [&](bool along_x) {
    const int64_t n = along_x ? w : h;
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        const int64_t c = along_x ? x : y;
        double side = 0;
        for (int64_t d : {int64_t{-1}, int64_t{1}}) {
          int64_t q = c + d;
          if (torus) {
            q = Mod(q, n);
          } else if (q < 0 || q >= n) {
            continue;
          }
          side += along_x ? cur[q + int64_t{w} * y] : cur[x + int64_t{w} * q];
        }
        next[x + int64_t{w} * y] = static_cast<float>(cur[x + int64_t{w} * y] + blur.side_weight * side);
      }
    }
    cur.swap(next);
  };
  if (b > 0) {
    for (int pass = 0; pass < blur.passes; ++pass) axis_pass(true);
    for (int pass = 0; pass < blur.passes; ++pass) axis_pass(false);
  } else if (blur.side_weight > 0) {
    tap_pass(true);
    tap_pass(false);
  }
  for (int64_t i = 0; i < grid.nodes(); ++i) out[i] = static_cast<float>(cur[i]);
}

namespace {

// D_gv of feature v for every group from the new - old differences of its
// weights (0 where a weight stays): the largest per group, NaN kept.
void GroupRises(const double* diff, int64_t m, const GroupDriftView& drift, float* row) {
  const int64_t s = drift.strip_nodes;
  for (int64_t g = 0; g < drift.groups; ++g) {
    const int64_t j1 = std::min(m, (g + 1) * s);
    double largest = 0;
    for (int64_t j = g * s; j < j1; ++j) {
      const double d = diff[j];
      if (d != d) {
        largest = d;
        break;
      }
      if (d > largest) largest = d;
    }
    row[g] = group_bounds::WeightRise(largest);
  }
}

// Feature v's new weights w[i] = store(plane[i] / counts[i]) where a node has
// counts; with kDiff also each stored weight's new - old into diff[i] (0 where
// it stays), taken from load()ed values in double.
template <bool kDiff, typename W, typename Store, typename Load>
void WriteFeatureWeights(W* w, const float* plane, const float* counts, int64_t m, double* diff, Store store,
                         Load load) {
  for (int64_t i = 0; i < m; ++i) {
    if constexpr (kDiff) diff[i] = 0;
    if (counts[i] > 0.0f) {
      const W now = store(plane[i] / counts[i]);
      if constexpr (kDiff) diff[i] = static_cast<double>(load(now)) - load(w[i]);
      w[i] = now;
    }
  }
}

}  // namespace

void BatchUpdate(const CscView& docs, const int32_t* bmu, const GridShape& grid, const BoxBlur& blur,
                 const CodebookView& codebook, const GroupDriftView* drift) {
  const int64_t m = grid.nodes();
  std::vector<float> old_norms;
  if (drift != nullptr) old_norms.assign(codebook.sq_norms, codebook.sq_norms + m);
  // Blurred counts.
  std::vector<uint32_t> hits(m, 0);
  for (int64_t d = 0; d < docs.docs; ++d) ++hits[bmu[d]];
  std::vector<float> counts(m);
  for (int64_t i = 0; i < m; ++i) counts[i] = static_cast<float>(hits[i]);
  BlurScratch counts_scratch;
  BoxBlurPlane(counts.data(), grid, blur, counts_scratch);

  struct WorkerBuffers {
    std::vector<uint32_t> hist;
    std::vector<float> plane;
    std::vector<double> diff;  // group drift: new - old per node of one feature
    BlurScratch scratch;
  };
  std::vector<std::unique_ptr<WorkerBuffers>> workers(CpuThreads());
  const bool half = codebook.type == WeightType::kFloat16;
  ParallelForDynamic(docs.features, 8, [&](int64_t v0, int64_t v1, int worker) {
    if (workers[worker] == nullptr) {
      workers[worker] = std::make_unique<WorkerBuffers>();
      workers[worker]->hist.resize(m);
      workers[worker]->plane.resize(m);
      if (drift != nullptr) workers[worker]->diff.resize(m);
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
        BoxBlurPlane(plane, grid, blur, buf.scratch);
      }
      const auto write = [&](auto* w, auto store, auto load) {
        if (drift == nullptr) {
          WriteFeatureWeights<false>(w, plane, counts.data(), m, nullptr, store, load);
          return;
        }
        WriteFeatureWeights<true>(w, plane, counts.data(), m, buf.diff.data(), store, load);
        GroupRises(buf.diff.data(), m, *drift, drift->weight_rise + v * drift->groups);
      };
      if (half) {
        write(static_cast<uint16_t*>(codebook.weights) + v * m, [](float x) { return FloatToHalf(x); },
              [](uint16_t h) { return HalfToFloat(h); });
      } else {
        write(static_cast<float*>(codebook.weights) + v * m, [](float x) { return x; }, [](float x) { return x; });
      }
    }
  });
  ComputeSqNorms(codebook);
  if (drift != nullptr) {
    const int64_t s = drift->strip_nodes;
    for (int64_t g = 0; g < drift->groups; ++g) {
      drift->norm_change[g] = group_bounds::GroupNormChange(codebook.sq_norms, old_norms.data(), g * s,
                                                            std::min(m, (g + 1) * s));
    }
  }
}

}  // namespace cpu
}  // namespace som
}  // namespace tessera

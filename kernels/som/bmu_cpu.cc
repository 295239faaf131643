// CPU BMU search: the plain brute-force reference (dense, double) and the CPU
// backend (feature-major tiled sweep, node-major baseline), plus ||w||^2.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/som/bmu.h"
#include "kernels/som/cpu_clones.h"
#include "kernels/som/half.h"
#include "kernels/som/parallel.h"

namespace tessera {
namespace som {
namespace cpu {

const float* HalfTable() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t h = 0; h < 65536; ++h) t[h] = HalfToFloat(static_cast<uint16_t>(h));
    return t;
  }();
  return table.data();
}

namespace {

constexpr int kChunk = 2048;  // nodes per chunk: 8 KB of fp32 accumulators per document
constexpr int kTile = 16;     // documents per tile: their columns are reused from cache

TESSERA_SOM_CLONES void AddRow(float* __restrict acc, const float* __restrict row, int n) {
  for (int i = 0; i < n; ++i) acc[i] += row[i];
}

TESSERA_SOM_CLONES void AddHalfRow(float* __restrict acc, const uint16_t* __restrict row, int n,
                                   const float* __restrict table) {
  for (int i = 0; i < n; ++i) acc[i] += table[row[i]];
}

// scores[i] = norms[i] - 2 acc[i]
TESSERA_SOM_CLONES void Scores(const float* __restrict norms, const float* __restrict acc, float* __restrict s,
                               int n) {
  for (int i = 0; i < n; ++i) s[i] = norms[i] - 2.0f * acc[i];
}

void ScanInto(const float* s, int n, int64_t base, Top2& t) {
  for (int i = 0; i < n; ++i) {
    if (s[i] <= t.s2) t.Insert(s[i], static_cast<int32_t>(base + i));
  }
}

void Write(const Top2& t, int64_t d, const BmuOutput& out) {
  out.bmu[d] = t.i1;
  if (out.second != nullptr) out.second[d] = t.i2 == kNoNode ? -1 : t.i2;
  if (out.score != nullptr) out.score[d] = t.s1;
}

void FeatureMajor(const CsrView& docs, const CodebookView& cb, const BmuOutput& out) {
  const int64_t m = cb.nodes;
  const int64_t num_tiles = (docs.rows + kTile - 1) / kTile;
  const float* table = cb.type == WeightType::kFloat16 ? HalfTable() : nullptr;
  ParallelForDynamic(num_tiles, 4, [&](int64_t t0, int64_t t1, int) {
    std::vector<float> acc(kChunk), scores(kChunk);
    Top2 best[kTile];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t d0 = t * kTile;
      const int nd = static_cast<int>(std::min<int64_t>(kTile, docs.rows - d0));
      for (int j = 0; j < nd; ++j) best[j] = Top2::Empty();
      for (int64_t c0 = 0; c0 < m; c0 += kChunk) {
        const int n = static_cast<int>(std::min<int64_t>(kChunk, m - c0));
        for (int j = 0; j < nd; ++j) {
          const int64_t d = d0 + j;
          std::fill(acc.begin(), acc.begin() + n, 0.0f);
          for (int64_t k = docs.offsets[d]; k < docs.offsets[d + 1]; ++k) {
            const int64_t start = static_cast<int64_t>(docs.indices[k]) * m + c0;
            if (table == nullptr) {
              AddRow(acc.data(), static_cast<const float*>(cb.weights) + start, n);
            } else {
              AddHalfRow(acc.data(), static_cast<const uint16_t*>(cb.weights) + start, n, table);
            }
          }
          Scores(cb.sq_norms + c0, acc.data(), scores.data(), n);
          ScanInto(scores.data(), n, c0, best[j]);
        }
      }
      for (int j = 0; j < nd; ++j) Write(best[j], d0 + j, out);
    }
  });
}

void NodeMajor(const CsrView& docs, const CodebookView& cb, const BmuOutput& out) {
  const int64_t m = cb.nodes, v_count = cb.features;
  const float* table = cb.type == WeightType::kFloat16 ? HalfTable() : nullptr;
  ParallelForDynamic(docs.rows, 16, [&](int64_t d0, int64_t d1, int) {
    for (int64_t d = d0; d < d1; ++d) {
      Top2 t = Top2::Empty();
      const int32_t* f = docs.indices + docs.offsets[d];
      const int64_t nnz = docs.offsets[d + 1] - docs.offsets[d];
      for (int64_t i = 0; i < m; ++i) {
        float dot = 0.0f;
        if (table == nullptr) {
          const float* w = static_cast<const float*>(cb.weights) + i * v_count;
          for (int64_t k = 0; k < nnz; ++k) dot += w[f[k]];
        } else {
          const uint16_t* w = static_cast<const uint16_t*>(cb.weights) + i * v_count;
          for (int64_t k = 0; k < nnz; ++k) dot += table[w[f[k]]];
        }
        t.Insert(cb.sq_norms[i] - 2.0f * dot, static_cast<int32_t>(i));
      }
      Write(t, d, out);
    }
  });
}

double WeightAt(const CodebookView& cb, const float* table, int64_t index) {
  return table == nullptr ? static_cast<const float*>(cb.weights)[index]
                          : table[static_cast<const uint16_t*>(cb.weights)[index]];
}

}  // namespace

void BruteForceBmus(const CsrView& docs, const CodebookView& cb, int32_t* bmu, int32_t* second, double* dist2) {
  const float* table = cb.type == WeightType::kFloat16 ? HalfTable() : nullptr;
  ParallelFor(docs.rows, [&](int64_t d0, int64_t d1, int) {
    for (int64_t d = d0; d < d1; ++d) {
      const int32_t* f = docs.indices + docs.offsets[d];
      const int32_t* f_end = docs.indices + docs.offsets[d + 1];
      double b1 = std::numeric_limits<double>::infinity(), b2 = b1;
      int32_t i1 = -1, i2 = -1;
      for (int64_t i = 0; i < cb.nodes; ++i) {
        double sum = 0;
        const int32_t* p = f;
        for (int64_t v = 0; v < cb.features; ++v) {
          double x = 0;
          if (p != f_end && *p == v) {
            x = 1;
            ++p;
          }
          const double diff = x - WeightAt(cb, table, cb.index(v, i));
          sum += diff * diff;
        }
        // Nodes in ascending order: strict < keeps the lowest index on ties.
        if (sum < b1) {
          b2 = b1;
          i2 = i1;
          b1 = sum;
          i1 = static_cast<int32_t>(i);
        } else if (sum < b2) {
          b2 = sum;
          i2 = static_cast<int32_t>(i);
        }
      }
      bmu[d] = i1;
      if (second != nullptr) second[d] = i2;
      if (dist2 != nullptr) dist2[d] = b1;
    }
  });
}

void FindBmus(const CsrView& docs, const CodebookView& codebook, const BmuOutput& out) {
  if (codebook.layout == CodebookLayout::kFeatureMajor) {
    FeatureMajor(docs, codebook, out);
  } else {
    NodeMajor(docs, codebook, out);
  }
}

void ComputeSqNorms(const CodebookView& cb) {
  const float* table = cb.type == WeightType::kFloat16 ? HalfTable() : nullptr;
  ParallelFor(cb.nodes, [&](int64_t i0, int64_t i1, int) {
    if (cb.layout == CodebookLayout::kFeatureMajor) {
      std::vector<double> acc(i1 - i0, 0.0);
      for (int64_t v = 0; v < cb.features; ++v) {
        for (int64_t i = i0; i < i1; ++i) {
          const double w = WeightAt(cb, table, v * cb.nodes + i);
          acc[i - i0] += w * w;
        }
      }
      for (int64_t i = i0; i < i1; ++i) cb.sq_norms[i] = static_cast<float>(acc[i - i0]);
    } else {
      for (int64_t i = i0; i < i1; ++i) {
        double acc = 0;
        for (int64_t v = 0; v < cb.features; ++v) {
          const double w = WeightAt(cb, table, i * cb.features + v);
          acc += w * w;
        }
        cb.sq_norms[i] = static_cast<float>(acc);
      }
    }
  });
}

}  // namespace cpu
}  // namespace som
}  // namespace tessera

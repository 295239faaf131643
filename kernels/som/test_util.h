// Random documents and codebooks for the SOM kernel tests.
#ifndef TESSERA_KERNELS_SOM_TEST_UTIL_H_
#define TESSERA_KERNELS_SOM_TEST_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/som/bmu.h"
#include "kernels/som/half.h"
#include "kernels/som/types.h"

namespace tessera {
namespace som {
namespace testutil {

struct HostDocs {
  int64_t cols = 0;
  std::vector<int64_t> offsets{0};
  std::vector<int32_t> indices;
  CsrView view() const {
    CsrView v;
    v.rows = static_cast<int64_t>(offsets.size()) - 1;
    v.cols = cols;
    v.offsets = offsets.data();
    v.indices = indices.data();
    return v;
  }
  int64_t rows() const { return static_cast<int64_t>(offsets.size()) - 1; }
};

// Rows with 0..max_nnz distinct features (some rows empty, some long); feature
// frequencies are skewed (squared uniform) so tiles share columns.
inline HostDocs RandomDocs(int64_t rows, int64_t cols, int max_nnz, std::mt19937& rng) {
  HostDocs d;
  d.cols = cols;
  std::uniform_int_distribution<int> len(0, max_nnz);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<int32_t> row;
  for (int64_t r = 0; r < rows; ++r) {
    int n = len(rng);
    if (r % 17 == 3) n = 0;  // empty documents
    n = static_cast<int>(std::min<int64_t>(n, cols));
    row.clear();
    while (static_cast<int>(row.size()) < n) {
      const double x = u(rng);
      const int32_t f = static_cast<int32_t>(std::min<double>(cols - 1, x * x * cols));
      if (std::find(row.begin(), row.end(), f) == row.end()) row.push_back(f);
    }
    std::sort(row.begin(), row.end());
    d.indices.insert(d.indices.end(), row.begin(), row.end());
    d.offsets.push_back(static_cast<int64_t>(d.indices.size()));
  }
  return d;
}

// Documents shaped like text corpora: each belongs to one of `topics`
// topics; a feature is drawn from a global Zipf law (rank r with weight
// 1/(r+1), ranks scattered over the feature ids) or, half of the time, from
// its topic's Zipf law over its own slice of features. Lengths 1..3*mean_nnz
// (some documents empty, every 29th one long: 40..80 features).
inline HostDocs ZipfTopicDocs(int64_t rows, int64_t cols, int topics, int mean_nnz, std::mt19937& rng) {
  HostDocs d;
  d.cols = cols;
  std::vector<int32_t> rank_to_feature(cols);
  for (int64_t v = 0; v < cols; ++v) rank_to_feature[v] = static_cast<int32_t>(v);
  std::shuffle(rank_to_feature.begin(), rank_to_feature.end(), rng);
  std::vector<double> zipf(cols);
  for (int64_t r = 0; r < cols; ++r) zipf[r] = 1.0 / (r + 1);
  std::discrete_distribution<int64_t> global(zipf.begin(), zipf.end());
  const int64_t slice = std::max<int64_t>(1, cols / topics);
  std::discrete_distribution<int64_t> local(zipf.begin(), zipf.begin() + slice);
  std::uniform_int_distribution<int> topic_of(0, topics - 1), len(1, 3 * mean_nnz), long_len(40, 80);
  std::bernoulli_distribution coin(0.5);
  std::vector<int32_t> row;
  for (int64_t r = 0; r < rows; ++r) {
    int n = r % 29 == 5 ? long_len(rng) : len(rng);
    if (r % 17 == 3) n = 0;
    n = static_cast<int>(std::min<int64_t>(n, cols));
    const int topic = topic_of(rng);
    row.clear();
    while (static_cast<int>(row.size()) < n) {
      const int32_t f = coin(rng) ? rank_to_feature[global(rng)]
                                  : static_cast<int32_t>((topic * slice + local(rng)) % cols);
      if (std::find(row.begin(), row.end(), f) == row.end()) row.push_back(f);
    }
    std::sort(row.begin(), row.end());
    d.indices.insert(d.indices.end(), row.begin(), row.end());
    d.offsets.push_back(static_cast<int64_t>(d.indices.size()));
  }
  return d;
}

struct HostCodebook {
  int64_t nodes = 0;
  int64_t features = 0;
  WeightType type = WeightType::kFloat32;
  CodebookLayout layout = CodebookLayout::kFeatureMajor;
  std::vector<float> f32;
  std::vector<uint16_t> f16;
  std::vector<float> norms;

  CodebookView view() {
    CodebookView v;
    v.nodes = nodes;
    v.features = features;
    v.type = type;
    v.layout = layout;
    v.weights = type == WeightType::kFloat32 ? static_cast<void*>(f32.data()) : static_cast<void*>(f16.data());
    v.sq_norms = norms.data();
    return v;
  }
  float Weight(int64_t feature, int64_t node) const {
    const int64_t k = layout == CodebookLayout::kFeatureMajor ? feature * nodes + node : node * features + feature;
    return type == WeightType::kFloat32 ? f32[k] : HalfToFloat(f16[k]);
  }
  void UpdateNorms() { cpu::ComputeSqNorms(view()); }
};

// Feature-major fp32 weights uniform in [lo, hi).
inline HostCodebook RandomCodebook(int64_t nodes, int64_t features, std::mt19937& rng, float lo = 0.0f,
                                   float hi = 1.0f) {
  HostCodebook cb;
  cb.nodes = nodes;
  cb.features = features;
  cb.f32.resize(nodes * features);
  cb.norms.resize(nodes);
  std::uniform_real_distribution<float> u(lo, hi);
  for (float& w : cb.f32) w = u(rng);
  cb.UpdateNorms();
  return cb;
}

// Weights k / 16 with k uniform in [0, levels): every sum the kernels form is
// exact in fp32, so all algorithms must agree exactly, ties included.
inline HostCodebook DyadicCodebook(int64_t nodes, int64_t features, std::mt19937& rng, int levels = 4) {
  HostCodebook cb;
  cb.nodes = nodes;
  cb.features = features;
  cb.f32.resize(nodes * features);
  cb.norms.resize(nodes);
  std::uniform_int_distribution<int> k(0, levels - 1);
  for (float& w : cb.f32) w = k(rng) / 16.0f;
  cb.UpdateNorms();
  return cb;
}

inline HostCodebook WithLayout(const HostCodebook& in, CodebookLayout layout) {
  HostCodebook out = in;
  out.layout = layout;
  if (layout == in.layout) return out;
  for (int64_t v = 0; v < in.features; ++v) {
    for (int64_t i = 0; i < in.nodes; ++i) {
      const int64_t src = in.layout == CodebookLayout::kFeatureMajor ? v * in.nodes + i : i * in.features + v;
      const int64_t dst = layout == CodebookLayout::kFeatureMajor ? v * in.nodes + i : i * in.features + v;
      if (in.type == WeightType::kFloat32) {
        out.f32[dst] = in.f32[src];
      } else {
        out.f16[dst] = in.f16[src];
      }
    }
  }
  return out;
}

inline HostCodebook ToHalf(const HostCodebook& in) {
  HostCodebook out = in;
  out.type = WeightType::kFloat16;
  out.f16.resize(in.f32.size());
  for (size_t k = 0; k < in.f32.size(); ++k) out.f16[k] = FloatToHalf(in.f32[k]);
  out.f32.clear();
  out.UpdateNorms();
  return out;
}

// Exact ||x_d - w_i||^2 in double.
inline double Dist2(const HostDocs& docs, int64_t d, const HostCodebook& cb, int64_t node) {
  double sum = 0;
  int64_t k = docs.offsets[d];
  for (int64_t v = 0; v < cb.features; ++v) {
    double x = 0;
    if (k < docs.offsets[d + 1] && docs.indices[k] == v) {
      x = 1;
      ++k;
    }
    const double diff = x - cb.Weight(v, node);
    sum += diff * diff;
  }
  return sum;
}

}  // namespace testutil
}  // namespace som
}  // namespace tessera

#endif  // TESSERA_KERNELS_SOM_TEST_UTIL_H_

#include "services/som/synthetic.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "kernels/som/parallel.h"

namespace tessera {
namespace som {
namespace {

// SplitMix64: a small, fast, seedable generator (one per document).
struct Rng {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double Uniform() { return (Next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
  int64_t Below(int64_t n) { return static_cast<int64_t>(Uniform() * n); }
};

// Inverse-CDF sampler over ranks 0..n-1 with weights 1/(rank+1)^s.
class Zipf {
 public:
  Zipf(int64_t n, double s) : cdf_(n) {
    double total = 0;
    for (int64_t k = 0; k < n; ++k) cdf_[k] = total += std::pow(k + 1.0, -s);
    for (double& c : cdf_) c /= total;
  }
  int64_t Sample(Rng& rng) const {
    const double u = rng.Uniform();
    const int64_t k = std::upper_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin();
    return std::min<int64_t>(k, static_cast<int64_t>(cdf_.size()) - 1);
  }

 private:
  std::vector<double> cdf_;
};

int Poisson(Rng& rng, double mean) {
  if (mean <= 0) return 0;
  if (mean > 30) {  // normal approximation
    const double u1 = std::max(rng.Uniform(), 1e-300), u2 = rng.Uniform();
    const double z = std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    return std::max(0, static_cast<int>(std::lround(mean + std::sqrt(mean) * z)));
  }
  const double limit = std::exp(-mean);
  int k = 0;
  double p = rng.Uniform();
  while (p > limit) {
    ++k;
    p *= rng.Uniform();
  }
  return k;
}

}  // namespace

SyntheticCorpusOptions MedlineShape(int64_t docs) {
  SyntheticCorpusOptions o;
  o.docs = docs > 0 ? docs : 29900000;
  o.features = 30766;
  o.mean_nnz = 11.0;
  return o;
}

SparseBinaryMatrix GenerateSyntheticCorpus(const SyntheticCorpusOptions& o, std::vector<int32_t>* topics) {
  const int64_t v_count = std::max<int64_t>(1, o.features);
  const int tw = std::max(1, o.topic_grid_width), th = std::max(1, o.topic_grid_height);
  const int64_t num_topics = int64_t{tw} * th;
  const int64_t vocab = std::max(1, std::min<int>(o.features_per_topic, static_cast<int>(v_count)));
  // Topic vocabularies: consecutive blocks of a seeded permutation.
  std::vector<int32_t> perm(v_count);
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937_64 perm_rng(o.seed * 0x2545f4914f6cdd1dull + 17);
  std::shuffle(perm.begin(), perm.end(), perm_rng);
  auto vocab_feature = [&](int64_t topic, int64_t k) { return perm[(topic * vocab + k) % v_count]; };
  const Zipf background(v_count, o.zipf_exponent);
  const Zipf within(vocab, 1.0);
  const int64_t max_nnz = v_count;

  struct Part {
    std::vector<int64_t> lengths;
    std::vector<int32_t> indices;
  };
  std::vector<Part> parts(CpuThreads());
  if (topics != nullptr) topics->assign(o.docs, 0);
  const int used = ParallelFor(o.docs, [&](int64_t d0, int64_t d1, int chunk) {
    Part& part = parts[chunk];
    part.lengths.reserve(d1 - d0);
    part.indices.reserve(static_cast<size_t>((d1 - d0) * (o.mean_nnz + 1)));
    std::vector<int32_t> row;
    for (int64_t d = d0; d < d1; ++d) {
      Rng rng{o.seed * 0x9e3779b97f4a7c15ull ^ (static_cast<uint64_t>(d) * 0xd1b54a32d192ed03ull + 1)};
      rng.Next();
      const int64_t topic = rng.Below(num_topics);
      if (topics != nullptr) (*topics)[d] = static_cast<int32_t>(topic);
      const int64_t tx = topic % tw, ty = topic / tw;
      const int64_t want = std::min<int64_t>(max_nnz, 1 + Poisson(rng, o.mean_nnz - 1.0));
      row.clear();
      for (int attempt = 0; static_cast<int64_t>(row.size()) < want && attempt < 8 * want + 16; ++attempt) {
        const double u = rng.Uniform();
        int32_t f;
        if (u < o.topic_share) {
          f = vocab_feature(topic, within.Sample(rng));
        } else if (u < o.topic_share + o.neighbour_share) {
          // A random 4-neighbour on the topic grid (clamped at the border).
          int64_t nx = tx, ny = ty;
          switch (rng.Below(4)) {
            case 0: nx = std::min<int64_t>(tw - 1, tx + 1); break;
            case 1: nx = std::max<int64_t>(0, tx - 1); break;
            case 2: ny = std::min<int64_t>(th - 1, ty + 1); break;
            default: ny = std::max<int64_t>(0, ty - 1); break;
          }
          f = vocab_feature(nx + tw * ny, within.Sample(rng));
        } else {
          f = static_cast<int32_t>(background.Sample(rng));
        }
        if (std::find(row.begin(), row.end(), f) == row.end()) row.push_back(f);
      }
      std::sort(row.begin(), row.end());
      part.lengths.push_back(static_cast<int64_t>(row.size()));
      part.indices.insert(part.indices.end(), row.begin(), row.end());
    }
  });
  std::vector<int64_t> offsets;
  offsets.reserve(o.docs + 1);
  offsets.push_back(0);
  size_t nnz = 0;
  for (int c = 0; c < used; ++c) nnz += parts[c].indices.size();
  std::vector<int32_t> indices;
  indices.reserve(nnz);
  for (int c = 0; c < used; ++c) {
    for (int64_t len : parts[c].lengths) offsets.push_back(offsets.back() + len);
    indices.insert(indices.end(), parts[c].indices.begin(), parts[c].indices.end());
    parts[c] = Part();
  }
  return SparseBinaryMatrix(v_count, std::move(offsets), std::move(indices));
}

}  // namespace som
}  // namespace tessera

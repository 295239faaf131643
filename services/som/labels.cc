#include "services/som/labels.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_join.h"

namespace tessera {
namespace som {

std::vector<double> FeatureMeans(const SomModel& model) {
  const int64_t m = model.grid.nodes();
  std::vector<double> means(static_cast<size_t>(model.features), 0.0);
  if (m <= 0) return means;
  for (int64_t v = 0; v < model.features; ++v) {
    double sum = 0;
    for (int64_t i = 0; i < m; ++i) sum += model.Weight(v, i);
    means[v] = sum / m;
  }
  return means;
}

CellLabel LabelCell(const Atlas& atlas, const std::vector<double>& means, int64_t node, int top) {
  CellLabel label;
  label.node = node;
  const SomModel& model = atlas.model;
  if (node < 0 || node >= model.grid.nodes() || top <= 0 || static_cast<int64_t>(means.size()) != model.features) {
    return label;
  }
  std::vector<LabelFeature> candidates;
  for (int64_t v = 0; v < model.features; ++v) {
    const double w = model.Weight(v, node);
    if (!(w > means[v]) || !(means[v] > 0)) continue;  // not above the feature's mean: not distinctive
    LabelFeature f;
    f.feature = static_cast<int32_t>(v);
    f.weight = static_cast<float>(w);
    f.lift = w / means[v];
    f.score = w * std::log(f.lift);
    candidates.push_back(f);
  }
  auto better = [](const LabelFeature& a, const LabelFeature& b) {
    return a.score > b.score || (a.score == b.score && a.feature < b.feature);
  };
  const size_t n = std::min<size_t>(static_cast<size_t>(top), candidates.size());
  std::partial_sort(candidates.begin(), candidates.begin() + n, candidates.end(), better);
  candidates.resize(n);
  if (candidates.empty()) {
    for (const FeatureWeight& fw : TopFeatures(atlas, node, top)) {
      if (!(fw.weight > 0)) break;
      LabelFeature f;
      f.feature = fw.feature;
      f.weight = fw.weight;
      f.lift = means[fw.feature] > 0 ? fw.weight / means[fw.feature] : 0;
      candidates.push_back(f);
    }
  }
  label.features = std::move(candidates);
  std::vector<std::string> names;
  for (const LabelFeature& f : label.features) {
    names.push_back(f.feature < static_cast<int64_t>(atlas.feature_names.size()) ? atlas.feature_names[f.feature]
                                                                                 : "");
  }
  label.text = absl::StrJoin(names, "; ");
  return label;
}

std::vector<CellLabel> LabelCells(const Atlas& atlas, int top) {
  const SomModel& model = atlas.model;
  const int64_t m = atlas.nodes();
  const std::vector<double> means = FeatureMeans(model);
  if (top <= 0) {
    std::vector<CellLabel> empty(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) empty[i].node = i;
    return empty;
  }
  // Feature-outer sweep (contiguous in the feature-major codebook), keeping
  // each node's best `top` candidates in order; same ranking as LabelCell.
  const size_t k = static_cast<size_t>(top);
  std::vector<std::vector<LabelFeature>> best(static_cast<size_t>(m));
  auto better = [](const LabelFeature& a, const LabelFeature& b) {
    return a.score > b.score || (a.score == b.score && a.feature < b.feature);
  };
  for (int64_t v = 0; v < model.features; ++v) {
    if (!(means[v] > 0)) continue;
    for (int64_t i = 0; i < m; ++i) {
      const double w = model.Weight(v, i);
      if (!(w > means[v])) continue;
      LabelFeature f;
      f.feature = static_cast<int32_t>(v);
      f.weight = static_cast<float>(w);
      f.lift = w / means[v];
      f.score = w * std::log(f.lift);
      std::vector<LabelFeature>& list = best[i];
      if (list.size() == k && !better(f, list.back())) continue;
      list.insert(std::upper_bound(list.begin(), list.end(), f, better), f);
      if (list.size() > k) list.pop_back();
    }
  }
  std::vector<CellLabel> labels;
  labels.reserve(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) {
    if (best[i].empty()) {
      labels.push_back(LabelCell(atlas, means, i, top));  // the fallback
      continue;
    }
    CellLabel label;
    label.node = i;
    label.features = std::move(best[i]);
    std::vector<std::string> names;
    for (const LabelFeature& f : label.features) {
      names.push_back(f.feature < static_cast<int64_t>(atlas.feature_names.size()) ? atlas.feature_names[f.feature]
                                                                                   : "");
    }
    label.text = absl::StrJoin(names, "; ");
    labels.push_back(std::move(label));
  }
  return labels;
}

}  // namespace som
}  // namespace tessera

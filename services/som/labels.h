// Cell labels for a SOM atlas from each node's strongest features.
//
// Ranking a cell by raw weight names every cell after the corpus's most
// frequent features (in a GO atlas, "protein binding" everywhere), so each
// feature v at node i is scored by weight and distinctiveness together:
//   score(v, i) = w(v, i) * log(w(v, i) / mean_v),   mean_v = mean_i w(v, i)
// (a TF-IDF-like strength x log lift). Only features with score > 0 (weight
// above the feature's map mean) are candidates; ties go to the lower feature
// index. A cell where no feature stands out (e.g. a constant map) falls back to
// its strongest features by weight.
#ifndef TESSERA_SERVICES_SOM_LABELS_H_
#define TESSERA_SERVICES_SOM_LABELS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "services/som/atlas.h"

namespace tessera {
namespace som {

struct LabelFeature {
  int32_t feature = 0;
  float weight = 0;    // w(v, i)
  double lift = 0;     // w(v, i) / mean_v
  double score = 0;    // as above (0 for fallback entries)
};

struct CellLabel {
  int64_t node = 0;
  std::vector<LabelFeature> features;  // best first, at most `top`
  std::string text;                    // the feature names joined by "; "
};

// mean_v for every feature (features entries).
std::vector<double> FeatureMeans(const SomModel& model);

// The label of one node given FeatureMeans(atlas.model). An out-of-range node
// or top <= 0 gives an empty label.
CellLabel LabelCell(const Atlas& atlas, const std::vector<double>& means, int64_t node, int top);

// Every node's label, node order.
std::vector<CellLabel> LabelCells(const Atlas& atlas, int top = 3);

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_SERVICES_SOM_LABELS_H_

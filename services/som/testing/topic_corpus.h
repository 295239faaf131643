// The synthetic corpora of the SOM tests: documents drawn from topics laid
// out on a square map, so a trained map has a 2-D layout to recover.
//
//   SyntheticCorpusOptions o = testing::TopicCorpus(400, 60, /*grid=*/3);
//   o.features_per_topic = 6;  // a test's own knobs on top
//   SparseBinaryMatrix corpus = GenerateSyntheticCorpus(o);
#ifndef TESSERA_SERVICES_SOM_TESTING_TOPIC_CORPUS_H_
#define TESSERA_SERVICES_SOM_TESTING_TOPIC_CORPUS_H_

#include <cstdint>

#include "services/som/synthetic.h"

namespace tessera::som::testing {

// `docs` documents over `features` features, topics on a `grid` x `grid` map;
// the other knobs are SyntheticCorpusOptions' defaults.
inline SyntheticCorpusOptions TopicCorpus(int64_t docs, int64_t features, int grid, uint64_t seed = 1) {
  SyntheticCorpusOptions o;
  o.docs = docs;
  o.features = features;
  o.topic_grid_width = grid;
  o.topic_grid_height = grid;
  o.seed = seed;
  return o;
}

}  // namespace tessera::som::testing

#endif  // TESSERA_SERVICES_SOM_TESTING_TOPIC_CORPUS_H_

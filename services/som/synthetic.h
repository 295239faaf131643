// Synthetic topic-structured sparse binary corpora, generated on the fly (and
// reproducibly, in parallel) for tests and benchmarks, in the shape of MEDLINE
// indexed with MeSH: ~11 features per document, Zipf-like feature
// frequencies, topical structure.
//
// Topics sit on a topic_grid_width x topic_grid_height grid; topic t owns a
// vocabulary of features_per_topic features (disjoint blocks of a fixed random
// permutation of the features, wrapping when topics x vocabulary > features).
// A document picks one topic uniformly and 1 + Poisson(mean_nnz - 1) distinct
// features; each is drawn
//   with probability topic_share      from its topic's vocabulary,
//   with probability neighbour_share  from a random 4-neighbour topic's,
//   otherwise                         from a global Zipf(zipf_exponent) over all features
// (rank = feature index), vocabulary draws being Zipf(1) over the vocabulary.
// Neighbouring topics thus share vocabulary, which gives the corpus a 2-D
// layout a SOM can recover. Document d depends only on (seed, d).
#ifndef TESSERA_SERVICES_SOM_SYNTHETIC_H_
#define TESSERA_SERVICES_SOM_SYNTHETIC_H_

#include <cstdint>
#include <vector>

#include "services/som/corpus.h"

namespace tessera {
namespace som {

struct SyntheticCorpusOptions {
  int64_t docs = 10000;
  int64_t features = 30766;  // MeSH descriptors in the MEDLINE corpus
  double mean_nnz = 11.0;
  int topic_grid_width = 32;
  int topic_grid_height = 32;
  int features_per_topic = 40;
  double topic_share = 0.6;
  double neighbour_share = 0.2;
  double zipf_exponent = 1.0;
  uint64_t seed = 1;
};

// `topics` (optional) receives each document's topic (x + width * y).
SparseBinaryMatrix GenerateSyntheticCorpus(const SyntheticCorpusOptions& options,
                                           std::vector<int32_t>* topics = nullptr);

// The MEDLINE-shape benchmark corpus: 29.9 M documents x 30,766 features when
// docs = 0, else `docs` documents of the same shape.
SyntheticCorpusOptions MedlineShape(int64_t docs = 0);

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_SERVICES_SOM_SYNTHETIC_H_

// The genes x GO corpus on first use: what `tessera som train` (its default
// corpus) and `tessera demo` train on without being handed a corpus. Looks in
// the cache directory; when the corpus is not there, downloads Debian's
// r-bioc-org.hs.eg.db and r-bioc-go.db with `apt-get download` (no root, no
// installation), unpacks only their SQLite databases, builds the corpus
// (go_corpus.h) and caches it, then removes the unpacked databases (the .deb
// files stay, so a rebuild needs no network). The same files as
// build_go_corpora.sh writes, in the same place.
#ifndef TESSERA_TOOLS_SOM_DATA_GENES_GO_CACHE_H_
#define TESSERA_TOOLS_SOM_DATA_GENES_GO_CACHE_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace tessera {
namespace som {

struct GenesGoFiles {
  std::string corpus;    // genes_go.csr (binary CSR)
  std::string row_ids;   // genes_go.rows.txt (Entrez gene ids)
  std::string features;  // go_features.tsv ("GO id<TAB>ontology<TAB>name")
  bool built_now = false;
};

struct GenesGoCacheOptions {
  // Defaults: $XDG_CACHE_HOME/tessera (else $HOME/.cache/tessera) + /som_data and /debs.
  std::string corpus_dir;
  std::string debs_dir;
  std::function<void(const std::string&)> progress;  // one line per step
};

// The cached corpus, built first if needed. FAILED_PRECONDITION saying why
// when it cannot be built (no cache directory, apt-get or dpkg-deb missing,
// the download failed: the tool's own output is quoted).
absl::StatusOr<GenesGoFiles> EnsureGenesGoCorpus(const GenesGoCacheOptions& options = {});

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_TOOLS_SOM_DATA_GENES_GO_CACHE_H_

// Gene Ontology corpora from Bioconductor's annotation databases as Debian
// ships them (r-bioc-org.hs.eg.db: org.Hs.eg.sqlite; r-bioc-go.db: GO.sqlite):
//   genes x GO   one row per Entrez gene with at least one GO annotation (the
//                `go` view: direct BP/CC/MF annotations, any evidence code),
//                in the database's gene order (_id);
//   PubMed x GO  one row per PubMed article linked (table `pubmed`) to at least
//                one annotated gene, ascending PMID; the row is the union of
//                the GO terms of the article's genes.
// Features: every GO id that annotates some gene, ascending; names from
// GO.sqlite's go_term table ("" when missing).
#ifndef TESSERA_TOOLS_SOM_DATA_GO_CORPUS_H_
#define TESSERA_TOOLS_SOM_DATA_GO_CORPUS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/som/corpus.h"

namespace tessera {
namespace som {

struct GoCorpora {
  std::vector<std::string> go_ids;
  std::vector<std::string> go_terms;     // parallel to go_ids
  std::vector<std::string> go_ontology;  // "BP", "CC" or "MF" (from the annotations)
  SparseBinaryMatrix genes;
  std::vector<std::string> gene_ids;     // Entrez Gene ids, one per genes row
  SparseBinaryMatrix pubmed;
  std::vector<std::string> pmids;        // one per pubmed row
};

// `go_db` may be empty (no names). With with_pubmed false the PubMed corpus is
// left empty.
absl::StatusOr<GoCorpora> BuildGoCorpora(const std::string& org_db, const std::string& go_db, bool with_pubmed);

// Writes into `dir` (which must exist):
//   go_features.tsv   one line per feature: "<GO id>\t<ontology>\t<term name>"
//   genes_go.csr      binary CSR (services/som/corpus.h), genes_go.rows.txt (Entrez ids)
//   pubmed_go.csr     binary CSR, pubmed_go.rows.txt (PMIDs), when built
//   *.svm             the same matrices as libsvm text (1-based), when `libsvm`
//   corpora.txt       shapes and non-zero counts
absl::Status WriteGoCorpora(const GoCorpora& corpora, const std::string& dir, bool libsvm);

// "genes x GO: 20728 x 18933, 300448 non-zeros (14.49 per row)".
std::string DescribeCorpus(const std::string& name, const SparseBinaryMatrix& m);

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_TOOLS_SOM_DATA_GO_CORPUS_H_

#include "tools/som_data/go_corpus.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"

namespace tessera {
namespace som {
namespace {

using Db = std::unique_ptr<sqlite3, int (*)(sqlite3*)>;

absl::StatusOr<Db> Open(const std::string& path) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
  Db db(raw, &sqlite3_close);
  if (rc != SQLITE_OK) {
    return absl::NotFoundError(
        absl::StrCat("cannot open SQLite database ", path, ": ", raw ? sqlite3_errmsg(raw) : "out of memory"));
  }
  return db;
}

// Runs `sql`, calling row(stmt) for each result row.
template <typename Fn>
absl::Status Query(sqlite3* db, const std::string& sql, Fn row) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &raw, nullptr) != SQLITE_OK) {
    return absl::InvalidArgumentError(absl::StrCat("SQLite: ", sqlite3_errmsg(db), " in: ", sql));
  }
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> stmt(raw, &sqlite3_finalize);
  for (;;) {
    const int rc = sqlite3_step(raw);
    if (rc == SQLITE_DONE) return absl::OkStatus();
    if (rc != SQLITE_ROW) return absl::DataLossError(absl::StrCat("SQLite: ", sqlite3_errmsg(db), " in: ", sql));
    row(raw);
  }
}

std::string Text(sqlite3_stmt* s, int col) {
  const unsigned char* t = sqlite3_column_text(s, col);
  return t == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(t));
}

// Numeric order for digit strings (shorter first, then lexicographic).
bool PmidLess(const std::string& a, const std::string& b) {
  return a.size() != b.size() ? a.size() < b.size() : a < b;
}

}  // namespace

absl::StatusOr<GoCorpora> BuildGoCorpora(const std::string& org_db, const std::string& go_db, bool with_pubmed) {
  TESSERA_ASSIGN_OR_RETURN(Db org, Open(org_db));
  GoCorpora out;
  // Gene -> GO annotations (distinct pairs; evidence codes collapse).
  std::vector<std::pair<int64_t, std::string>> pairs;
  std::unordered_map<std::string, std::string> ontology_of;
  TESSERA_RETURN_IF_ERROR(Query(org.get(), "SELECT _id, go_id, ontology FROM go", [&](sqlite3_stmt* s) {
    pairs.emplace_back(sqlite3_column_int64(s, 0), Text(s, 1));
    ontology_of.emplace(pairs.back().second, Text(s, 2));
  }));
  for (const auto& [id, ont] : ontology_of) out.go_ids.push_back(id);
  std::sort(out.go_ids.begin(), out.go_ids.end());
  std::unordered_map<std::string, int32_t> feature;
  for (size_t k = 0; k < out.go_ids.size(); ++k) {
    feature.emplace(out.go_ids[k], static_cast<int32_t>(k));
    out.go_ontology.push_back(ontology_of[out.go_ids[k]]);
  }
  std::unordered_map<int64_t, std::string> entrez;
  TESSERA_RETURN_IF_ERROR(Query(org.get(), "SELECT _id, gene_id FROM genes",
                                [&](sqlite3_stmt* s) { entrez.emplace(sqlite3_column_int64(s, 0), Text(s, 1)); }));

  // Gene rows in _id order.
  std::vector<std::pair<int64_t, int32_t>> gene_feature;
  gene_feature.reserve(pairs.size());
  for (const auto& [gene, go] : pairs) gene_feature.emplace_back(gene, feature.at(go));
  pairs.clear();
  std::sort(gene_feature.begin(), gene_feature.end());
  gene_feature.erase(std::unique(gene_feature.begin(), gene_feature.end()), gene_feature.end());
  out.genes = SparseBinaryMatrix(static_cast<int64_t>(out.go_ids.size()));
  std::unordered_map<int64_t, int64_t> gene_row;
  std::vector<int32_t> row;
  for (size_t k = 0; k < gene_feature.size();) {
    const int64_t gene = gene_feature[k].first;
    row.clear();
    for (; k < gene_feature.size() && gene_feature[k].first == gene; ++k) row.push_back(gene_feature[k].second);
    gene_row.emplace(gene, out.genes.rows());
    out.genes.AppendSortedRow(row);
    auto it = entrez.find(gene);
    out.gene_ids.push_back(it == entrez.end() ? absl::StrCat("_id:", gene) : it->second);
  }

  if (with_pubmed) {
    std::vector<std::pair<std::string, int64_t>> links;  // (PMID, gene row)
    TESSERA_RETURN_IF_ERROR(Query(org.get(), "SELECT pubmed_id, _id FROM pubmed", [&](sqlite3_stmt* s) {
      auto it = gene_row.find(sqlite3_column_int64(s, 1));
      if (it != gene_row.end()) links.emplace_back(Text(s, 0), it->second);
    }));
    std::sort(links.begin(), links.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? PmidLess(a.first, b.first) : a.second < b.second;
    });
    out.pubmed = SparseBinaryMatrix(static_cast<int64_t>(out.go_ids.size()));
    for (size_t k = 0; k < links.size();) {
      const std::string& pmid = links[k].first;
      row.clear();
      size_t j = k;
      for (; j < links.size() && links[j].first == pmid; ++j) {
        absl::Span<const int32_t> g = out.genes.row(links[j].second);
        row.insert(row.end(), g.begin(), g.end());
      }
      std::sort(row.begin(), row.end());
      row.erase(std::unique(row.begin(), row.end()), row.end());
      out.pubmed.AppendSortedRow(row);
      out.pmids.push_back(pmid);
      k = j;
    }
  }

  out.go_terms.assign(out.go_ids.size(), "");
  if (!go_db.empty()) {
    TESSERA_ASSIGN_OR_RETURN(Db go, Open(go_db));
    TESSERA_RETURN_IF_ERROR(Query(go.get(), "SELECT go_id, term FROM go_term", [&](sqlite3_stmt* s) {
      auto it = feature.find(Text(s, 0));
      if (it != feature.end()) out.go_terms[it->second] = Text(s, 1);
    }));
  }
  for (std::string& t : out.go_terms) {
    std::replace_if(t.begin(), t.end(), [](char ch) { return ch == '\n' || ch == '\t'; }, ' ');
  }
  return out;
}

std::string DescribeCorpus(const std::string& name, const SparseBinaryMatrix& m) {
  return absl::StrFormat("%s: %d x %d, %d non-zeros (%.2f per row)", name, m.rows(), m.cols(), m.nnz(),
                         m.rows() > 0 ? static_cast<double>(m.nnz()) / m.rows() : 0.0);
}

absl::Status WriteGoCorpora(const GoCorpora& c, const std::string& dir, bool libsvm) {
  std::vector<std::string> names;
  names.reserve(c.go_ids.size());
  for (size_t k = 0; k < c.go_ids.size(); ++k) {
    names.push_back(absl::StrCat(c.go_ids[k], "\t", k < c.go_ontology.size() ? c.go_ontology[k] : "", "\t",
                                 c.go_terms[k]));
  }
  TESSERA_RETURN_IF_ERROR(WriteLines(dir + "/go_features.tsv", names));
  std::string summary = DescribeCorpus("genes x GO", c.genes) + "\n";
  TESSERA_RETURN_IF_ERROR(WriteCsrBinary(dir + "/genes_go.csr", c.genes));
  TESSERA_RETURN_IF_ERROR(WriteLines(dir + "/genes_go.rows.txt", c.gene_ids));
  if (libsvm) TESSERA_RETURN_IF_ERROR(WriteLibsvm(dir + "/genes_go.svm", c.genes));
  if (c.pubmed.rows() > 0) {
    summary += DescribeCorpus("PubMed x GO", c.pubmed) + "\n";
    TESSERA_RETURN_IF_ERROR(WriteCsrBinary(dir + "/pubmed_go.csr", c.pubmed));
    TESSERA_RETURN_IF_ERROR(WriteLines(dir + "/pubmed_go.rows.txt", c.pmids));
    if (libsvm) TESSERA_RETURN_IF_ERROR(WriteLibsvm(dir + "/pubmed_go.svm", c.pubmed));
  }
  std::FILE* f = std::fopen((dir + "/corpora.txt").c_str(), "w");
  if (f == nullptr) return absl::PermissionDeniedError(absl::StrCat("cannot write ", dir, "/corpora.txt"));
  std::fputs(summary.c_str(), f);
  std::fclose(f);
  return absl::OkStatus();
}

}  // namespace som
}  // namespace tessera

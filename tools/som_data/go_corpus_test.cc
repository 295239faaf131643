// The converter on a tiny database with the real schema (no network).
#include "tools/som_data/go_corpus.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdlib>
#include <string>

namespace tessera {
namespace som {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

void Exec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_close(db);
}

// The tables and views of org.Hs.eg.sqlite / GO.sqlite that the converter
// reads, as Bioconductor defines them.
void MakeDatabases(const std::string& org, const std::string& go) {
  std::remove(org.c_str());
  std::remove(go.c_str());
  Exec(org, R"sql(
    CREATE TABLE genes (_id INTEGER PRIMARY KEY, gene_id VARCHAR(10) NOT NULL UNIQUE);
    CREATE TABLE go_bp (_id INTEGER NOT NULL, go_id CHAR(10) NOT NULL, evidence CHAR(3) NOT NULL);
    CREATE TABLE go_cc (_id INTEGER NOT NULL, go_id CHAR(10) NOT NULL, evidence CHAR(3) NOT NULL);
    CREATE TABLE go_mf (_id INTEGER NOT NULL, go_id CHAR(10) NOT NULL, evidence CHAR(3) NOT NULL);
    CREATE VIEW go AS
      SELECT _id,go_id,evidence, 'BP' AS 'ontology' FROM go_bp UNION
      SELECT _id,go_id,evidence, 'CC' FROM go_cc UNION
      SELECT _id,go_id,evidence, 'MF' FROM go_mf;
    CREATE TABLE pubmed (_id INTEGER NOT NULL, pubmed_id VARCHAR(10) NOT NULL);
    INSERT INTO genes VALUES (1, '1'), (2, '10'), (3, '100'), (4, '1000');
    -- gene 1: two BP terms (one with two evidence codes) and a CC term
    INSERT INTO go_bp VALUES (1, 'GO:0000002', 'IDA'), (1, 'GO:0000002', 'IEA'), (1, 'GO:0000009', 'TAS');
    INSERT INTO go_cc VALUES (1, 'GO:0005576', 'HDA');
    -- gene 2: an MF term; gene 3: none; gene 4: BP + MF
    INSERT INTO go_mf VALUES (2, 'GO:0003674', 'ND'), (4, 'GO:0003674', 'ND');
    INSERT INTO go_bp VALUES (4, 'GO:0000009', 'IMP');
    -- articles: 900 -> genes 1, 4; 12 -> gene 2; 77 -> gene 3 only (no GO: dropped)
    INSERT INTO pubmed VALUES (1, '900'), (4, '900'), (2, '12'), (3, '77'), (4, '12');
  )sql");
  Exec(go, R"sql(
    CREATE TABLE go_term (_id INTEGER PRIMARY KEY, go_id CHAR(10) NOT NULL UNIQUE, term VARCHAR(255) NOT NULL,
                          ontology VARCHAR(9) NOT NULL, definition TEXT NULL);
    INSERT INTO go_term VALUES (1, 'GO:0000002', 'mitochondrial genome maintenance', 'BP', ''),
                               (2, 'GO:0003674', 'molecular_function', 'MF', ''),
                               (3, 'GO:0005576', 'extracellular region', 'CC', ''),
                               (4, 'GO:9999999', 'unused', 'BP', '');
  )sql");
}

std::vector<int32_t> Row(const SparseBinaryMatrix& m, int64_t r) {
  return std::vector<int32_t>(m.row(r).begin(), m.row(r).end());
}

TEST(GoCorpus, BuildsGenesAndPubmedCorpora) {
  const std::string org = TempPath("org.sqlite"), go = TempPath("GO.sqlite");
  MakeDatabases(org, go);
  auto c = BuildGoCorpora(org, go, true);
  ASSERT_TRUE(c.ok()) << c.status();
  // Features: the 4 GO ids that annotate genes, ascending.
  EXPECT_EQ(c->go_ids, (std::vector<std::string>{"GO:0000002", "GO:0000009", "GO:0003674", "GO:0005576"}));
  EXPECT_EQ(c->go_terms, (std::vector<std::string>{"mitochondrial genome maintenance", "", "molecular_function",
                                                    "extracellular region"}));
  EXPECT_EQ(c->go_ontology, (std::vector<std::string>{"BP", "BP", "MF", "CC"}));
  // Genes with GO, in _id order: 1, 2, 4.
  ASSERT_EQ(c->genes.rows(), 3);
  EXPECT_EQ(c->genes.cols(), 4);
  EXPECT_EQ(c->gene_ids, (std::vector<std::string>{"1", "10", "1000"}));
  EXPECT_EQ(Row(c->genes, 0), (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(Row(c->genes, 1), (std::vector<int32_t>{2}));
  EXPECT_EQ(Row(c->genes, 2), (std::vector<int32_t>{1, 2}));
  // Articles in numeric PMID order: 12 (genes 2, 4), 900 (genes 1, 4).
  ASSERT_EQ(c->pubmed.rows(), 2);
  EXPECT_EQ(c->pmids, (std::vector<std::string>{"12", "900"}));
  EXPECT_EQ(Row(c->pubmed, 0), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(Row(c->pubmed, 1), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_TRUE(c->genes.Validate().ok());
  EXPECT_TRUE(c->pubmed.Validate().ok());
  EXPECT_EQ(DescribeCorpus("genes x GO", c->genes), "genes x GO: 3 x 4, 6 non-zeros (2.00 per row)");

  // Written files read back.
  const std::string dir = TempPath("");
  ASSERT_TRUE(WriteGoCorpora(*c, dir, true).ok());
  auto genes = ReadCsrBinary(dir + "/genes_go.csr");
  ASSERT_TRUE(genes.ok()) << genes.status();
  EXPECT_EQ(*genes, c->genes);
  auto pubmed = ReadCorpus(dir + "/pubmed_go.csr");
  ASSERT_TRUE(pubmed.ok());
  EXPECT_EQ(*pubmed, c->pubmed);
  LibsvmOptions options;
  options.num_features = 4;
  auto svm = ReadLibsvm(dir + "/pubmed_go.svm", options);
  ASSERT_TRUE(svm.ok()) << svm.status();
  EXPECT_EQ(svm->matrix, c->pubmed);
  auto names = ReadLines(dir + "/go_features.tsv", 4);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ((*names)[0], "GO:0000002\tBP\tmitochondrial genome maintenance");
  EXPECT_EQ(*ReadLines(dir + "/pubmed_go.rows.txt"), c->pmids);

  // Without PubMed or names.
  auto small = BuildGoCorpora(org, "", false);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->pubmed.rows(), 0);
  EXPECT_EQ(small->go_terms[0], "");
}

TEST(GoCorpus, ReportsMissingAndWrongDatabases) {
  EXPECT_EQ(BuildGoCorpora(TempPath("nope.sqlite"), "", false).status().code(), absl::StatusCode::kNotFound);
  const std::string empty = TempPath("empty.sqlite");
  std::remove(empty.c_str());
  Exec(empty, "CREATE TABLE t (x INTEGER);");
  auto bad = BuildGoCorpora(empty, "", false);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no such table"), absl::string_view::npos) << bad.status();
}

}  // namespace
}  // namespace som
}  // namespace tessera

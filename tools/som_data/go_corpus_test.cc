// The converter on a tiny database with the real schema (no network).
#include "tools/som_data/go_corpus.h"
#include "tools/som_data/go_test_databases.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace tessera {
namespace som {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
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
  ExecSql(empty, "CREATE TABLE t (x INTEGER);");
  auto bad = BuildGoCorpora(empty, "", false);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no such table"), absl::string_view::npos) << bad.status();
}

}  // namespace
}  // namespace som
}  // namespace tessera

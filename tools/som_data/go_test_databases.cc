#include "tools/som_data/go_test_databases.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdio>

namespace tessera {
namespace som {
void ExecSql(const std::string& path, const std::string& sql) {
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
  ExecSql(org, R"sql(
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
  ExecSql(go, R"sql(
    CREATE TABLE go_term (_id INTEGER PRIMARY KEY, go_id CHAR(10) NOT NULL UNIQUE, term VARCHAR(255) NOT NULL,
                          ontology VARCHAR(9) NOT NULL, definition TEXT NULL);
    INSERT INTO go_term VALUES (1, 'GO:0000002', 'mitochondrial genome maintenance', 'BP', ''),
                               (2, 'GO:0003674', 'molecular_function', 'MF', ''),
                               (3, 'GO:0005576', 'extracellular region', 'CC', ''),
                               (4, 'GO:9999999', 'unused', 'BP', '');
  )sql");
}

}  // namespace som
}  // namespace tessera

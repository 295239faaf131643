// Tiny org.Hs.eg.sqlite / GO.sqlite files with the real schema, for tests
// of the corpus converter and the first-use cache (no network).
#ifndef TESSERA_TOOLS_SOM_DATA_GO_TEST_DATABASES_H_
#define TESSERA_TOOLS_SOM_DATA_GO_TEST_DATABASES_H_

#include <string>

namespace tessera {
namespace som {

// Runs `sql` on the database at `path` (created if missing).
void ExecSql(const std::string& path, const std::string& sql);

// Genes 1, 10, 1000 have GO annotations (gene 100 has none); four GO terms
// annotate them; articles 900 and 12 link annotated genes. Fails the
// current test on a SQLite error.
void MakeDatabases(const std::string& org, const std::string& go);

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_TOOLS_SOM_DATA_GO_TEST_DATABASES_H_

// som_data: builds the genes x GO and PubMed x GO corpora for the SOM atlas
// from Debian's Bioconductor annotation packages (see go_corpus.h and
// build_go_corpora.sh, which downloads and unpacks them).
//
//   som_data --org_db=org.Hs.eg.sqlite [--go_db=GO.sqlite] --out_dir=DIR
//            [--no_pubmed] [--libsvm]
#include <cstdio>
#include <cstring>
#include <string>

#include "tools/som_data/go_corpus.h"

namespace {

bool Flag(const char* arg, const char* name, std::string* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

int Usage() {
  std::fprintf(stderr,
               "usage: som_data --org_db=org.Hs.eg.sqlite [--go_db=GO.sqlite] --out_dir=DIR [--no_pubmed] "
               "[--libsvm]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string org_db, go_db, out_dir;
  bool pubmed = true, libsvm = false;
  for (int i = 1; i < argc; ++i) {
    if (Flag(argv[i], "--org_db", &org_db) || Flag(argv[i], "--go_db", &go_db) ||
        Flag(argv[i], "--out_dir", &out_dir)) {
      continue;
    }
    if (std::strcmp(argv[i], "--no_pubmed") == 0) {
      pubmed = false;
    } else if (std::strcmp(argv[i], "--libsvm") == 0) {
      libsvm = true;
    } else {
      std::fprintf(stderr, "unknown argument: %s\n", argv[i]);
      return Usage();
    }
  }
  if (org_db.empty() || out_dir.empty()) return Usage();
  auto corpora = tessera::som::BuildGoCorpora(org_db, go_db, pubmed);
  if (!corpora.ok()) {
    std::fprintf(stderr, "som_data: %s\n", std::string(corpora.status().message()).c_str());
    return 1;
  }
  absl::Status written = tessera::som::WriteGoCorpora(*corpora, out_dir, libsvm);
  if (!written.ok()) {
    std::fprintf(stderr, "som_data: %s\n", std::string(written.message()).c_str());
    return 1;
  }
  std::printf("%s\n", tessera::som::DescribeCorpus("genes x GO", corpora->genes).c_str());
  if (pubmed) std::printf("%s\n", tessera::som::DescribeCorpus("PubMed x GO", corpora->pubmed).c_str());
  std::printf("features: %zu GO terms; written to %s\n", corpora->go_ids.size(), out_dir.c_str());
  return 0;
}

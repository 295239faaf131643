// The first-use cache without network: a stand-in `apt-get` (first on PATH)
// "downloads" .deb files built here with dpkg-deb from tiny databases with
// the real schema; the real dpkg-deb unpacks them.
#include "tools/som_data/genes_go_cache.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "services/som/corpus.h"
#include "tools/som_data/go_test_databases.h"

namespace tessera {
namespace som {
namespace {

namespace fs = std::filesystem;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

void WriteFile(const std::string& path, const std::string& text, bool executable = false) {
  std::ofstream(path) << text;
  if (executable) chmod(path.c_str(), 0755);
}

// A .deb of `package` holding `file` at `inside` (what Debian's package has).
void BuildDeb(const std::string& package, const std::string& file, const std::string& inside,
              const std::string& out_dir) {
  const std::string root = TempPath("debroot-" + package);
  fs::remove_all(root);
  fs::create_directories(root + "/DEBIAN");
  fs::create_directories(fs::path(root + inside).parent_path());
  fs::copy_file(file, root + inside);
  WriteFile(root + "/DEBIAN/control", "Package: " + package +
                                          "\nVersion: 3.16.0-1\nArchitecture: all\nMaintainer: test <t@example.org>\n"
                                          "Description: test stand-in\n");
  const std::string cmd = "dpkg-deb --build --root-owner-group '" + root + "' '" + out_dir + "/" + package +
                          "_3.16.0-1_all.deb' >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// PATH with a stand-in apt-get whose body is `script`.
void FakeAptGet(const std::string& script) {
  const std::string bin = TempPath("fakebin");
  fs::create_directories(bin);
  WriteFile(bin + "/apt-get", "#!/bin/sh\n" + script, /*executable=*/true);
  static const std::string original = std::getenv("PATH");
  setenv("PATH", (bin + ":" + original).c_str(), 1);
}

TEST(GenesGoCache, DownloadsUnpacksBuildsAndThenReusesTheCorpus) {
  const std::string repo = TempPath("repo");
  fs::remove_all(repo);
  fs::create_directories(repo);
  MakeDatabases(TempPath("org.Hs.eg.sqlite"), TempPath("GO.sqlite"));
  BuildDeb("r-bioc-org.hs.eg.db", TempPath("org.Hs.eg.sqlite"),
           "/usr/lib/R/site-library/org.Hs.eg.db/extdata/org.Hs.eg.sqlite", repo);
  BuildDeb("r-bioc-go.db", TempPath("GO.sqlite"), "/usr/lib/R/site-library/GO.db/extdata/GO.sqlite", repo);
  FakeAptGet("[ \"$1\" = download ] || exit 2\ncp '" + repo + "'/\"$2\"_*.deb . && echo \"Get: $2\"\n");

  GenesGoCacheOptions options;
  options.corpus_dir = TempPath("cache/som_data");
  options.debs_dir = TempPath("cache/debs");
  fs::remove_all(TempPath("cache"));
  std::vector<std::string> steps;
  options.progress = [&](const std::string& line) { steps.push_back(line); };
  auto files = EnsureGenesGoCorpus(options);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_TRUE(files->built_now);
  auto matrix = ReadCsrBinary(files->corpus);
  ASSERT_TRUE(matrix.ok()) << matrix.status();
  EXPECT_EQ(matrix->rows(), 3);  // genes 1, 10 and 1000; gene 100 has no GO term
  EXPECT_EQ(matrix->cols(), 4);
  ASSERT_GE(steps.size(), 4u);
  EXPECT_NE(steps.front().find("downloading Debian package r-bioc-org.hs.eg.db"), std::string::npos) << steps.front();
  // The unpacked databases are gone, the .debs stay for a rebuild.
  for (const auto& e : fs::directory_iterator(options.debs_dir)) {
    EXPECT_EQ(e.path().filename().string().find("unpacked"), std::string::npos) << e.path();
  }

  // Second use: nothing is downloaded (a failing apt-get would show).
  FakeAptGet("echo 'must not be called'; exit 1\n");
  steps.clear();
  auto again = EnsureGenesGoCorpus(options);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->built_now);
  EXPECT_TRUE(steps.empty());
}

TEST(GenesGoCache, AFailedDownloadSaysWhy) {
  FakeAptGet("echo 'E: Unable to locate package '\"$2\" >&2; exit 100\n");
  GenesGoCacheOptions options;
  options.corpus_dir = TempPath("nocache/som_data");
  options.debs_dir = TempPath("nocache/debs");
  fs::remove_all(TempPath("nocache"));
  auto files = EnsureGenesGoCorpus(options);
  ASSERT_EQ(files.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(files.status().message());
  EXPECT_NE(message.find("apt-get download r-bioc-org.hs.eg.db"), std::string::npos) << message;
  EXPECT_NE(message.find("exit 100"), std::string::npos) << message;
  EXPECT_NE(message.find("Unable to locate package r-bioc-org.hs.eg.db"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(options.corpus_dir + "/genes_go.csr"));
}

}  // namespace
}  // namespace som
}  // namespace tessera

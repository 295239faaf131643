#include "common/durable_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

// A fresh empty directory per test.
std::string TestDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(base ? base : "/tmp", "/durable_file_",
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(DurableFileTest, WritesAndOverwrites) {
  const std::string dir = TestDir();
  const std::string path = dir + "/out.bin";
  ASSERT_TRUE(WriteFileDurably(path, "first version").ok());
  EXPECT_EQ(ReadAll(path), "first version");
  ASSERT_TRUE(WriteFileDurably(path, std::string("two\0bytes", 9)).ok());
  EXPECT_EQ(ReadAll(path), std::string("two\0bytes", 9));
  ASSERT_TRUE(WriteFileDurably(path, "").ok());
  EXPECT_EQ(ReadAll(path), "");
  EXPECT_EQ(Entries(dir), std::vector<std::string>{"out.bin"});  // no temporary file left
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0600, 0600);
}

TEST(DurableFileTest, PiecesAreWrittenBackToBack) {
  const std::string dir = TestDir();
  const std::string big(3 << 20, 'x');
  ASSERT_TRUE(WriteFileDurably(dir + "/p", {"head:", big, "", ":tail"}).ok());
  EXPECT_EQ(ReadAll(dir + "/p"), absl::StrCat("head:", big, ":tail"));
}

TEST(DurableFileTest, WriterCallbackWritesTheTemporaryFileBesideTheTarget) {
  const std::string dir = TestDir();
  const std::string path = dir + "/data.txt";
  std::string seen;
  ASSERT_TRUE(WriteFileDurably(path, [&](const std::string& tmp) {
                seen = tmp;
                std::FILE* f = std::fopen(tmp.c_str(), "wb");
                if (f == nullptr) return absl::InternalError("fopen");
                std::fputs("via stdio", f);
                return std::fclose(f) == 0 ? absl::OkStatus() : absl::InternalError("fclose");
              }).ok());
  EXPECT_EQ(ReadAll(path), "via stdio");
  // Same directory (so the rename is atomic), hidden, ending in ".tmp".
  EXPECT_EQ(fs::path(seen).parent_path(), fs::path(dir));
  EXPECT_TRUE(absl::StartsWith(fs::path(seen).filename().string(), ".data.txt.")) << seen;
  EXPECT_TRUE(absl::EndsWith(seen, ".tmp")) << seen;
  EXPECT_FALSE(fs::exists(seen));
}

TEST(DurableFileTest, FailingWriterLeavesTheOldFileAndNoTemporary) {
  for (bool durable : {true, false}) {
    SCOPED_TRACE(durable);
    const std::string dir = TestDir();
    const std::string path = dir + "/keep.txt";
    ASSERT_TRUE(WriteFileDurably(path, "old").ok());
    const auto failing = [](const std::string& tmp) {
      std::ofstream(tmp) << "half of the new cont";
      return absl::DataLossError("the writer gave up");
    };
    const absl::Status s = durable ? WriteFileDurably(path, failing) : WriteFileAtomically(path, failing);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;  // the writer's own error
    EXPECT_EQ(s.message(), "the writer gave up");
    EXPECT_EQ(ReadAll(path), "old");
    EXPECT_EQ(Entries(dir), std::vector<std::string>{"keep.txt"});
  }
}

TEST(DurableFileTest, WriterThatCreatesNothingFails) {
  const std::string dir = TestDir();
  EXPECT_FALSE(WriteFileDurably(dir + "/x", [](const std::string&) { return absl::OkStatus(); }).ok());
  EXPECT_FALSE(WriteFileAtomically(dir + "/x", [](const std::string&) { return absl::OkStatus(); }).ok());
  EXPECT_TRUE(Entries(dir).empty());
}

TEST(DurableFileTest, MissingDirectoryIsAClearError) {
  const std::string dir = TestDir();
  const std::string path = dir + "/no/such/dir/file.json";
  for (const absl::Status& s : {WriteFileDurably(path, "{}"), WriteFileAtomically(path, "{}")}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), path)) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "No such file or directory")) << s;
  }
  EXPECT_TRUE(Entries(dir).empty());
}

TEST(DurableFileTest, PathNamingADirectoryIsRefused) {
  const std::string dir = TestDir();
  EXPECT_EQ(WriteFileDurably(dir + "/", "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteFileDurably("", "x").code(), absl::StatusCode::kInvalidArgument);
  // An existing directory cannot be replaced by a file.
  fs::create_directory(dir + "/sub");
  EXPECT_FALSE(WriteFileDurably(dir + "/sub", "x").ok());
  EXPECT_EQ(Entries(dir), std::vector<std::string>{"sub"});
}

TEST(DurableFileTest, AtomicWriteReplacesWithoutSyncing) {
  const std::string dir = TestDir();
  ASSERT_TRUE(WriteFileAtomically(dir + "/a", "one").ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/a", "two").ok());
  EXPECT_EQ(ReadAll(dir + "/a"), "two");
  EXPECT_EQ(Entries(dir), std::vector<std::string>{"a"});
}

TEST(DurableFileTest, SyncDirectory) {
  const std::string dir = TestDir();
  EXPECT_TRUE(SyncDirectory(dir).ok());
  const absl::Status missing = SyncDirectory(dir + "/missing");
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  EXPECT_TRUE(absl::StrContains(missing.message(), dir + "/missing")) << missing;
}

}  // namespace
}  // namespace tessera

// Files of tests: their temporary directories under $TEST_TMPDIR (/tmp
// outside Bazel), whole-file reads and writes, and existence checks.
#ifndef TESSERA_COMMON_TESTING_TEMP_FILES_H_
#define TESSERA_COMMON_TESTING_TEMP_FILES_H_

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tessera::testing {

// $TEST_TMPDIR, else /tmp.
inline std::string TestTmpDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  return base ? base : "/tmp";
}

// <TestTmpDir()>/<name>; nothing is created.
inline std::string TestTmpPath(const std::string& name) { return TestTmpDir() + "/" + name; }

// <TestTmpDir()>/<name>, emptied and created: each run starts clean.
inline std::string FreshTestDir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(TestTmpDir()) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

// The bytes of `path` ("" when it cannot be read).
inline std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Replaces `path` with `bytes`.
inline void WriteFileBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

inline bool PathExists(const std::string& path) { return std::filesystem::exists(path); }

}  // namespace tessera::testing

#endif  // TESSERA_COMMON_TESTING_TEMP_FILES_H_

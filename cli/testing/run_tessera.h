// For tests of the `tessera` binary as users run it (data = ["//cli:tessera"]):
// runs it with arguments, capturing the exit code, stdout and stderr.
//
//   CliResult r = RunTessera({"recon", "ct", "--geometry", g, ...});
//   EXPECT_EQ(r.code, 2) << r.err;
#ifndef TESSERA_CLI_TESTING_RUN_TESSERA_H_
#define TESSERA_CLI_TESTING_RUN_TESSERA_H_

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tessera::cli::testing {

struct CliResult {
  int code = -1;  // exit code; -1 when it did not exit normally
  std::string out, err;
};

// $TEST_TMPDIR/name.
inline std::string TestTmp(const std::string& name) { return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name); }

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs $TEST_SRCDIR/tessera/cli/tessera with `args` (each single-quoted: no
// argument may contain a single quote).
inline CliResult RunTessera(const std::vector<std::string>& args) {
  std::string cmd = absl::StrCat("'", std::getenv("TEST_SRCDIR"), "/tessera/cli/tessera'");
  for (const std::string& a : args) absl::StrAppend(&cmd, " '", a, "'");
  const std::string out = TestTmp("tessera-stdout.txt"), err = TestTmp("tessera-stderr.txt");
  absl::StrAppend(&cmd, " >'", out, "' 2>'", err, "'");
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadWholeFile(out);
  r.err = ReadWholeFile(err);
  return r;
}

}  // namespace tessera::cli::testing

#endif  // TESSERA_CLI_TESTING_RUN_TESSERA_H_

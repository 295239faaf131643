// Test helpers for running the `tessera` binary as a child process: its
// stdout on a pipe read line by line, its exit code, kill -9.
#ifndef TESSERA_TESTS_PROCESS_TESTING_H_
#define TESSERA_TESTS_PROCESS_TESTING_H_

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"

extern char** environ;

namespace tessera::testing {

inline std::string TesseraBinary() { return std::string(std::getenv("TEST_SRCDIR")) + "/tessera/cli/tessera"; }
inline std::string TempDir() { return std::getenv("TEST_TMPDIR"); }

// A child process with its stdout (and stderr) on a pipe we read line by line.
class Child {
 public:
  // `stderr_name`: file under the test's temporary directory for its stderr.
  explicit Child(std::vector<std::string> args, const std::string& stderr_name = "child_stderr.txt") {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_addopen(&actions, 2, (TempDir() + "/" + stderr_name).c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    std::vector<char*> argv;
    args.insert(args.begin(), TesseraBinary());
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    out_ = fdopen(fds[0], "r");
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_) fclose(out_);
  }
  // Next stdout line, or "" at EOF.
  std::string ReadLine() {
    char buf[4096];
    if (fgets(buf, sizeof(buf), out_) == nullptr) return "";
    std::string line(buf);
    if (!line.empty() && line.back() == '\n') line.pop_back();
    return line;
  }
  std::string ReadAll() {
    std::string all, line;
    while (!(line = ReadLine()).empty() || !feof(out_)) all += line + "\n";
    return all;
  }
  // Exit code, or -1 if it did not exit within `timeout`.
  int WaitExit(std::chrono::seconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      int status = 0;
      pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  pid_t pid() const { return pid_; }
  // kill -9 and reap: the process gets no chance to clean up.
  void Kill9() {
    if (pid_ <= 0 || reaped_) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    reaped_ = true;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  FILE* out_ = nullptr;
};

// A synthetic fingerprint template as xyt text: 35 minutiae of `finger`
// (seeded), `impression` dropping a few and shifting the rest by a pixel or
// two, so impressions of one finger match each other best.
inline std::string SyntheticXyt(int finger, int impression) {
  std::srand(100 + finger);
  std::string text;
  for (int m = 0; m < 35; ++m) {
    const int x = 40 + std::rand() % 220, y = 40 + std::rand() % 300, a = std::rand() % 360;
    if ((m + impression) % 9 == 0) continue;
    absl::StrAppend(&text, x + impression % 3, " ", y + impression % 2, " ", a, " 60\n");
  }
  return text;
}

inline int PortFrom(const std::string& line, const std::string& key) {
  int port = -1;
  EXPECT_TRUE(absl::StartsWith(line, key + "=")) << line;
  EXPECT_TRUE(absl::SimpleAtoi(line.substr(key.size() + 1), &port)) << line;
  return port;
}

// One `tessera ARGS` run to its end: the exit code, stdout, and stderr (kept in
// TempDir()/STDERR_FILE, read back once the process exited).
struct CliRun {
  int code;
  std::string out;
  std::string err;
};

inline CliRun RunTessera(const std::vector<std::string>& args, const std::string& stderr_file,
                         std::chrono::seconds timeout = std::chrono::seconds(120)) {
  Child c(args, stderr_file);
  std::string out = c.ReadAll();
  const int code = c.WaitExit(timeout);
  std::ifstream err_file(TempDir() + "/" + stderr_file);
  std::stringstream err;
  err << err_file.rdbuf();
  return {code, out, err.str()};
}

}  // namespace tessera::testing

#endif  // TESSERA_TESTS_PROCESS_TESTING_H_

// Access control and the audit trail across real processes: `tessera serve --token-file
// --audit-log`, `tessera job list --token-file` (allowed, refused without a token, refused for
// a missing role), then `tessera audit verify` on the intact log (exit 0) and on copies with an
// edited, a deleted and two reordered lines (exit 1 naming the first bad seq and why), and
// `tessera audit show` filters; serve refuses a non-loopback host without TLS and tokens.
#include <signal.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "tests/process_testing.h"

namespace tessera::testing {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return absl::StrSplit(ss.str(), '\n', absl::SkipEmpty());
}

void WriteLines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path, std::ios::trunc);
  for (const auto& l : lines) out << l << "\n";
}

struct CliRun {
  int code;
  std::string out;
};

CliRun Tessera(const std::vector<std::string>& args, const std::string& log) {
  Child c(args, log);
  std::string out = c.ReadAll();
  return {c.WaitExit(std::chrono::seconds(60)), out};
}

TEST(AuditProcessTest, TokensRolesAndVerify) {
  const std::string dir = TempDir();
  const std::string tokens = dir + "/tokens";
  const std::string audit = dir + "/audit.jsonl";
  std::ofstream(tokens) << "# server tokens\n"
                           "reader-token-0123456789abcdef rita reader\n"
                           "enroller-token-0123456789abcdef eddie enroller\n";
  std::ofstream(dir + "/rita.token") << "reader-token-0123456789abcdef\n";
  {
    Child serve({"serve", "--grpc-port=0", "--metrics-port=-1", "--drain-timeout-s=1", "--services=volume",
                 "--data-root=" + dir, "--state-dir=" + dir + "/state", "--token-file=" + tokens,
                 "--audit-log=" + audit},
                "serve.txt");
    const int port = PortFrom(serve.ReadLine(), "grpc_port");
    serve.ReadLine();
    const std::string server = absl::StrCat("127.0.0.1:", port);

    CliRun ok = Tessera({"job", "list", "--server", server, "--token-file", dir + "/rita.token"}, "list_ok.txt");
    EXPECT_EQ(ok.code, 0) << ok.out;
    CliRun none = Tessera({"job", "list", "--server", server}, "list_none.txt");
    EXPECT_EQ(none.code, 1);
    CliRun denied = Tessera({"job", "cancel", "--server", server, "--token-file", dir + "/rita.token", "job-1"},
                         "cancel_denied.txt");
    EXPECT_EQ(denied.code, 1);
    kill(serve.pid(), SIGTERM);
    EXPECT_EQ(serve.WaitExit(std::chrono::seconds(30)), 0);
  }
  std::ifstream err(dir + "/cancel_denied.txt");
  std::stringstream errs;
  errs << err.rdbuf();
  EXPECT_THAT(errs.str(), HasSubstr("enroller"));

  const std::vector<std::string> lines = Lines(audit);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_THAT(lines[0], HasSubstr("\"principal\":\"rita\""));
  EXPECT_THAT(lines[0], HasSubstr("\"outcome\":\"OK\""));
  EXPECT_THAT(lines[1], HasSubstr("\"outcome\":\"UNAUTHENTICATED\""));
  EXPECT_THAT(lines[2], HasSubstr("\"outcome\":\"PERMISSION_DENIED\""));
  EXPECT_THAT(lines[2], HasSubstr("\"request_id\":\"job-1\""));

  CliRun verify = Tessera({"audit", "verify", "--log", audit}, "verify.txt");
  EXPECT_EQ(verify.code, 0) << verify.out;
  EXPECT_THAT(verify.out, HasSubstr("OK: 3 records"));

  CliRun show = Tessera({"audit", "show", "--log", audit, "--principal", "rita", "--method", "Cancel"}, "show.txt");
  EXPECT_EQ(show.code, 0);
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(show.out, '\n', absl::SkipEmpty())).size(), 1u) << show.out;
  CliRun since = Tessera({"audit", "show", "--log", audit, "--since", "2999-01-01T00:00:00Z"}, "since.txt");
  EXPECT_EQ(since.out, "");

  struct Tamper {
    std::string name;
    std::vector<std::string> lines;
    std::string expect;
  };
  std::vector<Tamper> tampers = {
      {"edited", lines, "BROKEN at seq 2"},
      {"deleted", {lines[0], lines[2]}, "BROKEN at seq 2"},
      {"reordered", {lines[0], lines[2], lines[1]}, "BROKEN at seq 2"},
  };
  tampers[0].lines[1] = absl::StrReplaceAll(lines[1], {{"UNAUTHENTICATED", "OK"}});
  for (const Tamper& t : tampers) {
    const std::string copy = dir + "/" + t.name + ".jsonl";
    WriteLines(copy, t.lines);
    CliRun r = Tessera({"audit", "verify", "--log", copy}, "verify_" + t.name + ".txt");
    EXPECT_EQ(r.code, 1) << t.name << ": " << r.out;
    EXPECT_THAT(r.out, HasSubstr(t.expect)) << t.name;
    EXPECT_THAT(r.out, HasSubstr(t.name)) << r.out;
  }
}

TEST(AuditProcessTest, NonLoopbackNeedsTlsAndTokens) {
  Child serve({"serve", "--host=0.0.0.0", "--grpc-port=0", "--metrics-port=-1", "--services=volume"},
              "serve_open.txt");
  serve.ReadAll();
  EXPECT_EQ(serve.WaitExit(std::chrono::seconds(30)), 1);
  std::ifstream err(TempDir() + "/serve_open.txt");
  std::stringstream errs;
  errs << err.rdbuf();
  EXPECT_THAT(errs.str(), HasSubstr("--insecure"));
  EXPECT_THAT(errs.str(), HasSubstr("TLS"));
}

}  // namespace
}  // namespace tessera::testing

// Issue 31, job ownership across real processes: `tessera serve --token-file
// --audit-log` with named galleries; an admin of "national" submits a
// fingerprint search job there. A reader of "default" and an enroller of
// another gallery get NOT_FOUND for it (get, result, watch, cancel: worded as
// for a job that does not exist), and its job still runs to the end; the
// owner and a gallery admin read it; a non-admin lists only its own jobs; the
// audit records of the reads name the job's gallery; the owner deletes its
// results and the job stays listed as a tombstone.
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/process_testing.h"

namespace tessera::testing {
namespace {

using ::testing::HasSubstr;

// Runs `tessera ARGS`: its exit code, stdout, and stderr (kept in NAME.txt).
CliRun Tessera(const std::vector<std::string>& args, const std::string& name) {
  return RunTessera(args, name + ".txt", std::chrono::seconds(60));
}

std::string Xyt(int finger, int impression) { return SyntheticXyt(finger, impression); }

// "job-..." of a JobInfo printed as JSON by `tessera job submit`.
std::string JobIdOf(const std::string& json) {
  const size_t at = json.find("\"job_id\":\"");
  if (at == std::string::npos) return "";
  const size_t start = at + 10;
  return json.substr(start, json.find('"', start) - start);
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return absl::StrSplit(ss.str(), '\n', absl::SkipEmpty());
}

TEST(JobOwnershipProcessTest, OnlyTheOwnerAndGalleryAdminsSeeAJob) {
  const std::string dir = TempDir() + "/own";
  const std::string root = dir + "/galleries";
  ASSERT_EQ(std::system(("mkdir -p " + root).c_str()), 0);
  for (int f = 0; f < 3; ++f) std::ofstream(absl::StrCat(dir, "/f", f, ".xyt")) << Xyt(f, 0);
  std::ofstream(dir + "/probe.xyt") << Xyt(1, 1);
  for (const std::string gallery : {"national", "regional"}) {
    CliRun enroll = Tessera({"fp", "enroll", "--gallery", root + "/" + gallery, "--ids", "a,b,c", dir + "/f0.xyt",
                             dir + "/f1.xyt", dir + "/f2.xyt"},
                            "enroll_" + gallery);
    ASSERT_EQ(enroll.code, 0) << enroll.out;
  }
  struct Principal {
    std::string name, line;
  };
  const std::vector<Principal> principals = {
      {"root", "admin galleries=national"},        // admin of national (and nothing else)
      {"rita", "reader"},                          // a reader of "default"
      {"eve", "enroller galleries=regional"},      // an enroller of another gallery
      {"nadia", "admin galleries=national:admin"}, // another admin of national
      {"olga", "reader galleries=national:reader"},  // a reader of national, not the owner
  };
  {
    std::ofstream tokens(dir + "/tokens");
    for (const Principal& p : principals) {
      const std::string token = p.name + "-token-0123456789abcdef";
      tokens << token << " " << p.name << " " << p.line << "\n";
      std::ofstream(dir + "/" + p.name + ".token") << token << "\n";
    }
  }
  const std::string audit = dir + "/audit.jsonl";
  Child serve({"serve", "--grpc-port=0", "--metrics-port=-1", "--drain-timeout-s=1", "--services=fingerprint",
               "--data-root=" + dir, "--state-dir=" + dir + "/state", "--galleries-root=" + root,
               "--token-file=" + dir + "/tokens", "--audit-log=" + audit},
              "serve_own");
  const int port = PortFrom(serve.ReadLine(), "grpc_port");
  serve.ReadLine();
  const std::string server = absl::StrCat("127.0.0.1:", port);
  const auto job = [&](const std::string& who, std::vector<std::string> args, const std::string& name) {
    std::vector<std::string> full = {"job", args[0], "--server", server, "--token-file", dir + "/" + who + ".token"};
    full.insert(full.end(), args.begin() + 1, args.end());
    return Tessera(full, name);
  };

  CliRun submitted =
      job("root", {"submit", "--watch", "fp", "search", "--gallery", "national", dir + "/probe.xyt"}, "submit_root");
  ASSERT_EQ(submitted.code, 0) << submitted.out;
  const std::string id = JobIdOf(submitted.out);
  ASSERT_FALSE(id.empty()) << submitted.out;
  EXPECT_THAT(submitted.out, HasSubstr("\"owner\":\"root\""));
  EXPECT_THAT(submitted.out, HasSubstr("\"gallery\":\"national\""));

  // Those who may not see it: NOT_FOUND for every call, worded as for no job.
  for (const std::string who : {"rita", "eve", "olga"}) {
    for (const std::string verb : {"get", "result", "cancel", "watch"}) {
      CliRun r = job(who, {verb, id}, absl::StrCat(who, "_", verb));
      EXPECT_EQ(r.code, 1) << who << " " << verb << ": " << r.out;
      if (verb == "cancel" && who != "eve") {  // readers may cancel nothing (role, before any lookup)
        EXPECT_THAT(r.err, HasSubstr("requires role 'enroller'")) << who;
        continue;
      }
      EXPECT_THAT(r.err, HasSubstr(absl::StrCat("no job '", id, "'"))) << who << " " << verb;
      EXPECT_THAT(r.err, HasSubstr("(5)")) << who << " " << verb;  // NOT_FOUND
    }
    CliRun listed = job(who, {"list"}, who + "_list");
    EXPECT_EQ(listed.code, 0) << listed.err;
    EXPECT_THAT(listed.out, ::testing::Not(HasSubstr(id))) << who;
    CliRun others = job(who, {"list", "--owner", "root"}, who + "_list_root");
    EXPECT_EQ(others.code, 1) << others.out;  // PERMISSION_DENIED: only its own
  }
  // The refused cancels did not touch it.
  CliRun owner = job("root", {"result", id}, "root_result");
  EXPECT_EQ(owner.code, 0) << owner.out;
  EXPECT_THAT(owner.out, HasSubstr("candidates"));
  CliRun admin = job("nadia", {"get", id}, "nadia_get");
  EXPECT_EQ(admin.code, 0) << admin.out;
  EXPECT_THAT(admin.out, HasSubstr("JOB_STATE_SUCCEEDED"));
  // Issue 35: the CLI's submit sent a traceparent; the job keeps its trace id and `job get` prints it.
  EXPECT_THAT(admin.out, ::testing::ContainsRegex("\"trace_id\":\"[0-9a-f]{32}\"")) << admin.out;
  CliRun admin_list = job("nadia", {"list", "--gallery", "national"}, "nadia_list");
  EXPECT_THAT(admin_list.out, HasSubstr(id));

  // Deletion: not for others (NOT_FOUND); the owner erases the results, the job stays as a tombstone.
  CliRun eve_delete = job("eve", {"delete", id}, "eve_delete");
  EXPECT_EQ(eve_delete.code, 1);
  EXPECT_THAT(eve_delete.err, HasSubstr("(5)"));
  CliRun deleted = job("root", {"delete", id}, "root_delete");
  EXPECT_EQ(deleted.code, 0) << deleted.err;
  EXPECT_THAT(deleted.out, HasSubstr("\"results_deleted_reason\":\"deleted by root\""));
  CliRun after = job("root", {"result", id}, "root_result_after");
  EXPECT_EQ(after.code, 1);
  EXPECT_THAT(after.err, HasSubstr("its results were deleted"));

  kill(serve.pid(), SIGTERM);
  EXPECT_EQ(serve.WaitExit(std::chrono::seconds(30)), 0);

  // Every read of the job names its gallery in the audit trail, refusals too.
  int owner_reads = 0, refused_reads = 0;
  for (const std::string& line : Lines(audit)) {
    if (!absl::StrContains(line, id)) continue;
    const bool national = absl::StrContains(line, "\"gallery\":\"national\"");
    if (absl::StrContains(line, "\"principal\":\"root\"") && absl::StrContains(line, "/GetResult\"")) {
      EXPECT_TRUE(national) << line;
      ++owner_reads;
    }
    if (absl::StrContains(line, "\"outcome\":\"NOT_FOUND\"")) ++refused_reads;
  }
  EXPECT_EQ(owner_reads, 2);              // before and after the deletion
  EXPECT_EQ(refused_reads, 3 * 3 + 2);  // get, result, watch each; eve's cancel and delete
}

}  // namespace
}  // namespace tessera::testing

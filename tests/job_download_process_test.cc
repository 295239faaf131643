// Issue 35, `tessera job download` against a real `tessera serve`: a small
// registration job's result files come back byte for byte into --out, a
// truncated copy resumes from its size, an unknown name is NOT_FOUND and a
// name with ".." is refused before any call; the server hosts OperatorService.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/nifti_io.h"
#include "kernels/registration/pipeline/synthetic.h"
#include "tests/process_testing.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

CliRun Tessera(const std::vector<std::string>& args, const std::string& name) {
  return RunTessera(args, name + ".txt");
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(JobDownloadProcessTest, DownloadsAndResumesAJobsResultFiles) {
  const std::string dir = TempDir() + "/download";
  fs::create_directories(dir);
  registration::Phantom p = registration::MakePhantom(20).value();
  ASSERT_TRUE(WriteNifti(p.image, dir + "/fixed.nii.gz").ok());
  ASSERT_TRUE(WriteNifti(p.image, dir + "/moving.nii.gz").ok());
  Child serve({"serve", "--grpc-port=0", "--metrics-port=-1", "--drain-timeout-s=1", "--services=registration",
               "--data-root=" + dir, "--state-dir=" + dir + "/state", "--device=cpu"},
              "serve_download");
  const int port = PortFrom(serve.ReadLine(), "grpc_port");
  serve.ReadLine();
  const std::string server = absl::StrCat("127.0.0.1:", port);

  CliRun submitted = Tessera({"job", "submit", "--server", server, "--watch", "register", "--fixed",
                              dir + "/fixed.nii.gz", "--moving", dir + "/moving.nii.gz", "--metric", "mse", "--stages",
                              "rigid", "--scales", "1", "--device", "cpu", "--out", dir + "/regout"},
                             "submit");
  ASSERT_EQ(submitted.code, 0) << submitted.out << submitted.err;
  const nlohmann::json info = nlohmann::json::parse(submitted.out.substr(0, submitted.out.find('\n')));
  const std::string id = info["job_id"];
  CliRun result = Tessera({"job", "result", "--server", server, id}, "result");
  ASSERT_EQ(result.code, 0) << result.err;
  const nlohmann::json files = nlohmann::json::parse(result.out)["files"];
  ASSERT_GE(files.size(), 2u) << result.out;

  const std::string out = dir + "/dl";
  CliRun all = Tessera({"job", "download", "--server", server, "--out", out, id}, "download_all");
  ASSERT_EQ(all.code, 0) << all.err;
  for (const auto& f : files) {
    const std::string name = f["name"];
    EXPECT_THAT(all.out, HasSubstr(name));
    EXPECT_TRUE(ReadAll(out + "/" + name) == ReadAll(f["path"].get<std::string>())) << name;
  }

  // A broken download: the first half is there; the rest is fetched.
  const std::string name = files[0]["name"];
  const std::string whole = ReadAll(out + "/" + name);
  ASSERT_GT(whole.size(), 2u);
  std::ofstream(out + "/" + name, std::ios::binary | std::ios::trunc) << whole.substr(0, whole.size() / 2);
  CliRun resumed = Tessera({"job", "download", "--server", server, "--out", out, "--name", name, id}, "resume");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_THAT(resumed.out, HasSubstr("resumed"));
  EXPECT_TRUE(ReadAll(out + "/" + name) == whole);

  CliRun unknown = Tessera({"job", "download", "--server", server, "--out", out, "--name", "nope.nii", id}, "unknown");
  EXPECT_EQ(unknown.code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("no result file"));
  CliRun dotdot = Tessera({"job", "download", "--server", server, "--out", out, "--name", "../jobs.db", id}, "dotdot");
  EXPECT_EQ(dotdot.code, 2);
  EXPECT_FALSE(fs::exists(dir + "/jobs.db"));

  // Every role hosts OperatorService (the serving line lists it).
  serve.Kill9();
  EXPECT_THAT(ReadAll(TempDir() + "/serve_download"), HasSubstr("tessera.v1.OperatorService"));
}

}  // namespace
}  // namespace tessera::testing

// Access control and the audit trail across real processes: `tessera serve --token-file
// --audit-log`, `tessera job list --token-file` (allowed, refused without a token, refused for
// a missing role), then `tessera audit verify` on the intact log (exit 0) and on copies with an
// edited, a deleted and two reordered lines (exit 1 naming the first bad seq and why), and
// `tessera audit show` filters; serve refuses a non-loopback host without TLS and tokens; named
// galleries made by `tessera fp enroll` under --galleries-root are served with per-gallery grants
// (search and job submission refused on an ungranted gallery, audited with its name).
#include <algorithm>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include <grpcpp/create_channel.h>

#include "services/server/audit_log.h"
#include "services/server/bearer_channel.h"
#include "tessera/v1/fingerprint.grpc.pb.h"
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

CliRun Tessera(const std::vector<std::string>& args, const std::string& log) {
  return RunTessera(args, log, std::chrono::seconds(60));
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

// Issue 31: `serve --audit-key-file` keys the chain. A copy edited and
// re-chained without the key passes the plain check and fails `verify
// --key-file`; a copy with its last record cut fails `verify --expect-head`
// against the head `tessera audit head` printed.
TEST(AuditProcessTest, KeyedAuditAndStoredHeadCatchForgeryAndCuts) {
  const std::string dir = TempDir() + "/keyed";
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  const std::string audit = dir + "/audit.jsonl", key = dir + "/audit.key";
  std::ofstream(dir + "/tokens") << "reader-token-0123456789abcdef rita reader\n";
  std::ofstream(dir + "/rita.token") << "reader-token-0123456789abcdef\n";
  std::ofstream(key) << "0123456789abcdef0123456789abcdef-audit-secret\n";
  {
    Child serve({"serve", "--grpc-port=0", "--metrics-port=-1", "--drain-timeout-s=1", "--services=volume",
                 "--data-root=" + dir, "--state-dir=" + dir + "/state", "--token-file=" + dir + "/tokens",
                 "--audit-log=" + audit, "--audit-key-file=" + key},
                "serve_keyed.txt");
    const std::string server = absl::StrCat("127.0.0.1:", PortFrom(serve.ReadLine(), "grpc_port"));
    serve.ReadLine();
    for (int i = 0; i < 3; ++i) {
      CliRun r = Tessera({"job", "list", "--server", server, "--token-file", dir + "/rita.token"}, "keyed_list.txt");
      EXPECT_EQ(r.code, 0);
    }
    kill(serve.pid(), SIGTERM);
    EXPECT_EQ(serve.WaitExit(std::chrono::seconds(30)), 0);
  }
  CliRun head = Tessera({"audit", "head", "--log", audit}, "keyed_head.txt");
  ASSERT_EQ(head.code, 0);
  const std::string expect = std::string(absl::StripAsciiWhitespace(head.out));
  EXPECT_TRUE(absl::StartsWith(expect, "3:")) << expect;
  CliRun keyed = Tessera({"audit", "verify", "--log", audit, "--key-file", key, "--expect-head", expect},
                         "keyed_verify.txt");
  EXPECT_EQ(keyed.code, 0) << keyed.out;
  CliRun unkeyed = Tessera({"audit", "verify", "--log", audit}, "keyed_verify_plain.txt");
  EXPECT_EQ(unkeyed.code, 0);
  EXPECT_THAT(unkeyed.out, HasSubstr("not checked: give --key-file"));

  // Forged: a record edited and every link recomputed with plain SHA-256.
  std::vector<std::string> lines = Lines(audit);
  ASSERT_EQ(lines.size(), 3u);
  lines[1] = absl::StrReplaceAll(lines[1], {{"\"principal\":\"rita\"", "\"principal\":\"nobody\""}});
  std::string prev(64, '0');
  for (std::string& line : lines) {
    const size_t k = line.find(",\"key\":\"");
    if (k != std::string::npos) line.erase(k, 8 + 16 + 1);
    line = absl::StrCat(line.substr(0, line.rfind(",\"prev_hash\":\"")), ",\"prev_hash\":\"", prev, "\"");
    prev = AuditLineHash(absl::StrCat(line, "}"), prev);
    line = absl::StrCat(line, ",\"hash\":\"", prev, "\"}");
  }
  WriteLines(dir + "/forged.jsonl", lines);
  EXPECT_EQ(Tessera({"audit", "verify", "--log", dir + "/forged.jsonl"}, "forged_plain.txt").code, 0);
  CliRun forged = Tessera({"audit", "verify", "--log", dir + "/forged.jsonl", "--key-file", key}, "forged.txt");
  EXPECT_EQ(forged.code, 1);
  EXPECT_THAT(forged.out, HasSubstr("without the key"));

  // Cut: the last record removed.
  std::vector<std::string> cut = Lines(audit);
  cut.pop_back();
  WriteLines(dir + "/cut.jsonl", cut);
  CliRun cut_run = Tessera({"audit", "verify", "--log", dir + "/cut.jsonl", "--key-file", key, "--expect-head", expect},
                           "cut.txt");
  EXPECT_EQ(cut_run.code, 1);
  EXPECT_THAT(cut_run.out, HasSubstr("cut: the log ends at seq 2"));
}

std::string Xyt(int finger, int impression) { return SyntheticXyt(finger, impression); }

// Galleries ROOT/<name> (made offline by `tessera fp enroll`), each holding
// the templates a, b, c of fingers 0..2 (files under `dir`).
void MakeGalleries(const std::string& dir, const std::string& root, const std::vector<std::string>& names) {
  ASSERT_EQ(std::system(("mkdir -p " + root).c_str()), 0);
  for (int f = 0; f < 3; ++f) std::ofstream(absl::StrCat(dir, "/f", f, ".xyt")) << Xyt(f, 0);
  for (const std::string& gallery : names) {
    CliRun made = Tessera({"fp", "enroll", "--gallery", root + "/" + gallery, "--ids", "a,b,c", dir + "/f0.xyt",
                           dir + "/f1.xyt", dir + "/f2.xyt"},
                          "enroll_" + gallery + ".txt");
    ASSERT_EQ(made.code, 0) << made.out;
  }
}

// kill -9 while searches are being answered: every answered search has its audit record, and
// the chain verifies and continues after a restart.
TEST(AuditProcessTest, Kill9LosesNoRecordOfAnAnsweredSearch) {
  const std::string dir = TempDir() + "/kill9";
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  const std::string tokens = dir + "/tokens";
  const std::string audit = dir + "/audit.jsonl";
  const std::string token = "enroller-token-0123456789abcdef";
  std::ofstream(tokens) << token << " eddie enroller\n";
  const std::vector<std::string> flags = {"serve", "--grpc-port=0", "--metrics-port=-1", "--services=fingerprint",
                                          "--data-root=" + dir, "--state-dir=" + dir + "/state",
                                          "--gallery-dir=" + dir + "/gallery", "--token-file=" + tokens,
                                          "--audit-log=" + audit};
  std::atomic<int> answered{0};
  {
    Child serve(flags, "serve_kill9.txt");
    const int port = PortFrom(serve.ReadLine(), "grpc_port");
    serve.ReadLine();
    auto channel = CreateBearerChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials(),
                                       grpc::ChannelArguments(), token);
    auto stub = tessera::v1::FingerprintService::NewStub(channel);
    for (int f = 0; f < 5; ++f) {
      grpc::ClientContext ctx;
      tessera::v1::EnrollRequest req;
      req.set_id(absl::StrCat("finger", f));
      req.mutable_record()->set_data(Xyt(f, 0));
      tessera::v1::EnrollResponse resp;
      ASSERT_TRUE(stub->Enroll(&ctx, req, &resp).ok());
    }
    std::atomic<bool> stop{false};
    std::vector<std::thread> clients;
    for (int t = 0; t < 4; ++t) {
      clients.emplace_back([&, t] {
        for (int i = 0; !stop; ++i) {
          grpc::ClientContext ctx;
          ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
          tessera::v1::SearchRequest req;
          req.mutable_probe()->set_data(Xyt((t + i) % 5, 1));
          req.set_top_k(3);
          tessera::v1::SearchResponse resp;
          if (stub->Search(&ctx, req, &resp).ok()) ++answered;
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    serve.Kill9();
    stop = true;
    for (auto& c : clients) c.join();
  }
  EXPECT_GT(answered.load(), 0);
  int searches = 0;
  for (const std::string& line : Lines(audit)) {
    if (absl::StrContains(line, "/Search\"") && absl::StrContains(line, "\"outcome\":\"OK\"")) ++searches;
  }
  EXPECT_GE(searches, answered.load());
  CliRun verify = Tessera({"audit", "verify", "--log", audit}, "verify_kill9.txt");
  EXPECT_EQ(verify.code, 0) << verify.out;
  // A restart continues the chain.
  {
    Child serve(flags, "serve_kill9_again.txt");
    const int port = PortFrom(serve.ReadLine(), "grpc_port");
    serve.ReadLine();
    auto stub = tessera::v1::FingerprintService::NewStub(CreateBearerChannel(
        absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials(), grpc::ChannelArguments(), token));
    grpc::ClientContext ctx;
    tessera::v1::ListResponse resp;
    EXPECT_TRUE(stub->List(&ctx, tessera::v1::ListRequest(), &resp).ok());
    EXPECT_EQ(resp.gallery_size(), 5);
    kill(serve.pid(), SIGTERM);
    EXPECT_EQ(serve.WaitExit(std::chrono::seconds(30)), 0);
  }
  verify = Tessera({"audit", "verify", "--log", audit}, "verify_kill9_again.txt");
  EXPECT_EQ(verify.code, 0) << verify.out;
  EXPECT_THAT(verify.out, HasSubstr(absl::StrCat("OK: ", searches + 5 + 1, " records")));
}

// Galleries made offline (`tessera fp enroll --gallery ROOT/NAME`) are served as named galleries;
// a principal granted one searches it, directly and as a job, and is refused the other.
TEST(AuditProcessTest, NamedGalleriesWithGrants) {
  const std::string dir = TempDir() + "/named";
  const std::string root = dir + "/galleries";
  ASSERT_EQ(std::system(("mkdir -p " + root).c_str()), 0);
  for (int f = 0; f < 3; ++f) std::ofstream(absl::StrCat(dir, "/f", f, ".xyt")) << Xyt(f, 0);
  std::ofstream(dir + "/probe.xyt") << Xyt(1, 1);
  CliRun lab = Tessera({"fp", "enroll", "--gallery", root + "/lab", "--ids", "lab0,lab1,lab2", dir + "/f0.xyt",
                        dir + "/f1.xyt", dir + "/f2.xyt"},
                       "enroll_lab.txt");
  ASSERT_EQ(lab.code, 0) << lab.out;
  CliRun national = Tessera({"fp", "enroll", "--gallery", root + "/national", "--ids", "nat1", dir + "/f1.xyt"},
                            "enroll_national.txt");
  ASSERT_EQ(national.code, 0) << national.out;
  const std::string token = "lab-token-0123456789abcdef";
  std::ofstream(dir + "/tokens") << token << " examiner enroller galleries=lab\n";
  std::ofstream(dir + "/lab.token") << token << "\n";
  const std::string audit = dir + "/audit.jsonl";
  Child serve({"serve", "--grpc-port=0", "--metrics-port=-1", "--drain-timeout-s=1", "--services=fingerprint",
               "--data-root=" + dir, "--state-dir=" + dir + "/state", "--galleries-root=" + root,
               "--token-file=" + dir + "/tokens", "--audit-log=" + audit},
              "serve_named.txt");
  const int port = PortFrom(serve.ReadLine(), "grpc_port");
  serve.ReadLine();
  const std::string server = absl::StrCat("127.0.0.1:", port);
  auto stub = tessera::v1::FingerprintService::NewStub(
      CreateBearerChannel(server, grpc::InsecureChannelCredentials(), grpc::ChannelArguments(), token));
  auto search = [&](const std::string& gallery, tessera::v1::SearchResponse* resp) {
    grpc::ClientContext ctx;
    tessera::v1::SearchRequest req;
    req.set_gallery(gallery);
    req.mutable_probe()->set_data(Xyt(1, 1));
    return stub->Search(&ctx, req, resp);
  };
  tessera::v1::SearchResponse resp;
  ASSERT_TRUE(search("lab", &resp).ok());
  ASSERT_GT(resp.candidates_size(), 0);
  EXPECT_EQ(resp.candidates(0).id(), "lab1");
  const grpc::Status refused = search("national", &resp);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(refused.error_message(), HasSubstr("principal 'examiner' may not search gallery 'national'"));
  // As jobs: the spec's gallery is checked at submission.
  CliRun job = Tessera({"job", "submit", "--server", server, "--token-file", dir + "/lab.token", "--watch", "fp",
                        "search", "--gallery", "lab", dir + "/probe.xyt"},
                       "job_lab.txt");
  EXPECT_EQ(job.code, 0) << job.out;
  CliRun denied = Tessera({"job", "submit", "--server", server, "--token-file", dir + "/lab.token", "fp", "search",
                           "--gallery", "national", dir + "/probe.xyt"},
                          "job_national.txt");
  EXPECT_EQ(denied.code, 1) << denied.out;
  kill(serve.pid(), SIGTERM);
  EXPECT_EQ(serve.WaitExit(std::chrono::seconds(30)), 0);

  int refusals = 0, lab_submits = 0;
  for (const std::string& line : Lines(audit)) {
    if (absl::StrContains(line, "\"gallery\":\"national\",\"outcome\":\"PERMISSION_DENIED\"")) ++refusals;
    if (absl::StrContains(line, "/Submit\"") && absl::StrContains(line, "\"gallery\":\"lab\",\"outcome\":\"OK\"")) {
      ++lab_submits;
    }
  }
  EXPECT_EQ(refusals, 2);  // the search and the job
  EXPECT_EQ(lab_submits, 1);
  CliRun verify = Tessera({"audit", "verify", "--log", audit}, "verify_named.txt");
  EXPECT_EQ(verify.code, 0) << verify.out;
  // The same two refusals, found by filtering on gallery and outcome.
  CliRun refusal_rows = Tessera(
      {"audit", "show", "--log", audit, "--gallery", "national", "--outcome", "PERMISSION_DENIED"}, "show_named.txt");
  EXPECT_EQ(refusal_rows.code, 0);
  EXPECT_EQ(std::count(refusal_rows.out.begin(), refusal_rows.out.end(), '\n'), 2) << refusal_rows.out;
}

// Issue 31: DeleteGallery (an admin of that gallery) leaves nothing of the
// gallery on disk, is refused to others and for "default", and is audited.
TEST(AuditProcessTest, DeleteGalleryLeavesNothingOnDisk) {
  const std::string dir = TempDir() + "/delete_gallery";
  const std::string root = dir + "/galleries";
  ASSERT_NO_FATAL_FAILURE(MakeGalleries(dir, root, {"lab", "national"}));
  const std::string lab_admin = "lab-admin-token-0123456789abcdef", examiner = "examiner-token-0123456789abcdef";
  std::ofstream(dir + "/tokens") << lab_admin << " lee admin galleries=lab,default\n"
                                 << examiner << " eddie enroller galleries=national\n";
  const std::string audit = dir + "/audit.jsonl";
  Child serve({"serve", "--grpc-port=0", "--metrics-port=-1", "--drain-timeout-s=1", "--services=fingerprint",
               "--data-root=" + dir, "--state-dir=" + dir + "/state", "--galleries-root=" + root,
               "--token-file=" + dir + "/tokens", "--audit-log=" + audit},
              "serve_delete_gallery.txt");
  const std::string server = absl::StrCat("127.0.0.1:", PortFrom(serve.ReadLine(), "grpc_port"));
  serve.ReadLine();
  const auto delete_gallery = [&](const std::string& token, const std::string& gallery, tessera::v1::GalleryInfo* out) {
    auto stub = tessera::v1::FingerprintService::NewStub(
        CreateBearerChannel(server, grpc::InsecureChannelCredentials(), grpc::ChannelArguments(), token));
    grpc::ClientContext ctx;
    tessera::v1::DeleteGalleryRequest req;
    req.set_gallery(gallery);
    return stub->DeleteGallery(&ctx, req, out);
  };
  tessera::v1::GalleryInfo info;
  EXPECT_EQ(delete_gallery(examiner, "national", &info).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(delete_gallery(lab_admin, "national", &info).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(delete_gallery(lab_admin, "default", &info).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  const grpc::Status deleted = delete_gallery(lab_admin, "lab", &info);
  ASSERT_TRUE(deleted.ok()) << deleted.error_message();
  EXPECT_EQ(info.size(), 3);
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    EXPECT_THAT(entry.path().filename().string(), ::testing::Not(HasSubstr("lab"))) << entry.path();
  }
  EXPECT_TRUE(std::filesystem::exists(root + "/national"));
  EXPECT_EQ(delete_gallery(lab_admin, "lab", &info).error_code(), grpc::StatusCode::NOT_FOUND);  // gone
  kill(serve.pid(), SIGTERM);
  EXPECT_EQ(serve.WaitExit(std::chrono::seconds(30)), 0);
  int audited = 0;
  for (const std::string& line : Lines(audit)) {
    if (absl::StrContains(line, "/DeleteGallery\"") && absl::StrContains(line, "\"gallery\":\"lab\",\"outcome\":\"OK\"")) {
      ++audited;
    }
  }
  EXPECT_EQ(audited, 1);
}

// Flips one byte of the first record of `gallery`'s log (its CRC fails;
// records follow it), so the gallery no longer opens.
void DamageGalleryLog(const std::string& gallery) {
  std::string log_file;
  for (const auto& entry : std::filesystem::directory_iterator(gallery)) {
    if (absl::StartsWith(entry.path().filename().string(), "log-")) log_file = entry.path().string();
  }
  ASSERT_FALSE(log_file.empty()) << "no log in " << gallery;
  std::fstream f(log_file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(40);
  char c = 0;
  f.read(&c, 1);
  c ^= 0x5a;
  f.seekp(40);
  f.write(&c, 1);
}

// Issue 31: a damaged gallery is unavailable alone: the server starts, its
// calls get DATA_LOSS naming the damage, the other galleries and services
// serve. When the damaged one is "default", gRPC health reports the
// FingerprintService NOT_SERVING (readiness and the other services stay SERVING).
class DamagedGalleryTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DamagedGalleryTest, IsUnavailableAlone) {
  const std::string broken_name = GetParam();
  const std::string dir = TempDir() + "/damaged_" + broken_name;
  const std::string root = dir + "/galleries";
  ASSERT_NO_FATAL_FAILURE(MakeGalleries(dir, root, {"good", broken_name}));
  ASSERT_NO_FATAL_FAILURE(DamageGalleryLog(root + "/" + broken_name));
  Child serve({"serve", "--grpc-port=0", "--metrics-port=-1", "--drain-timeout-s=1", "--services=fingerprint,volume",
               "--data-root=" + dir, "--state-dir=" + dir + "/state", "--galleries-root=" + root},
              "serve_damaged_" + broken_name + ".txt");
  const std::string server = absl::StrCat("127.0.0.1:", PortFrom(serve.ReadLine(), "grpc_port"));
  serve.ReadLine();
  auto stub = tessera::v1::FingerprintService::NewStub(grpc::CreateChannel(server, grpc::InsecureChannelCredentials()));
  const auto search = [&](const std::string& gallery, tessera::v1::SearchResponse* resp) {
    grpc::ClientContext ctx;
    tessera::v1::SearchRequest req;
    req.set_gallery(gallery);
    req.mutable_probe()->set_data(Xyt(1, 1));
    return stub->Search(&ctx, req, resp);
  };
  tessera::v1::SearchResponse resp;
  const grpc::Status good = search("good", &resp);
  ASSERT_TRUE(good.ok()) << good.error_message();
  EXPECT_GT(resp.candidates_size(), 0);
  const grpc::Status broken = search(broken_name, &resp);
  EXPECT_EQ(broken.error_code(), grpc::StatusCode::DATA_LOSS) << broken.error_message();
  EXPECT_THAT(broken.error_message(), HasSubstr("gallery '" + broken_name + "' could not be opened"));
  EXPECT_THAT(broken.error_message(), HasSubstr("log-"));
  const auto health = [&](const std::string& service) {
    return Tessera({"health", "--server=" + server, "--service=" + service, "--quiet"},
                   "damaged_health_" + broken_name + ".txt")
        .code;
  };
  EXPECT_EQ(health("readiness"), 0);  // the server as a whole serves
  EXPECT_EQ(health("tessera.v1.VolumeService"), 0);
  EXPECT_EQ(health("tessera.v1.FingerprintService"), broken_name == "default" ? 1 : 0);
  kill(serve.pid(), SIGTERM);
  EXPECT_EQ(serve.WaitExit(std::chrono::seconds(30)), 0);
}

INSTANTIATE_TEST_SUITE_P(NamedOrDefault, DamagedGalleryTest, ::testing::Values("broken", "default"));

// Starts a scheduler over the worker at `worker_address` with `extra` flags and
// says whether it ever reports that worker healthy (the worker answered its
// Describe probe), then stops the scheduler.
bool SchedulerSeesHealthyWorker(const std::string& dir, const std::string& worker_address,
                                const std::vector<std::string>& extra, const std::string& name) {
  std::vector<std::string> args = {"serve", "--role=scheduler", "--grpc-port=0", "--metrics-port=-1",
                                   "--data-root=" + dir, "--state-dir=" + dir + "/" + name,
                                   "--worker=" + worker_address};
  args.insert(args.end(), extra.begin(), extra.end());
  Child scheduler(args, name + ".txt");
  const std::string address = absl::StrCat("127.0.0.1:", PortFrom(scheduler.ReadLine(), "grpc_port"));
  scheduler.ReadLine();
  bool ok = false;
  for (int i = 0; i < 25 && !ok; ++i) {
    CliRun workers = Tessera({"job", "workers", "--server", address}, name + "_workers.txt");
    ok = absl::StrContains(workers.out, "\"healthy\":true");
    if (!ok) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  kill(scheduler.pid(), SIGTERM);
  EXPECT_EQ(scheduler.WaitExit(std::chrono::seconds(30)), 0);
  return ok;
}

// A scheduler reaches a worker that requires tokens only with --peer-token-file.
TEST(AuditProcessTest, SchedulerSendsItsPeerTokenToWorkers) {
  const std::string dir = TempDir() + "/peer";
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  std::ofstream(dir + "/worker_tokens") << "scheduler-token-0123456789abcdef sched admin\n";
  std::ofstream(dir + "/sched.token") << "scheduler-token-0123456789abcdef\n";
  Child worker({"serve", "--role=worker", "--grpc-port=0", "--metrics-port=-1", "--services=volume",
                "--data-root=" + dir, "--state-dir=" + dir + "/w", "--token-file=" + dir + "/worker_tokens",
                "--audit-log=" + dir + "/worker_audit.jsonl"},
               "peer_worker.txt");
  const std::string worker_address = absl::StrCat("127.0.0.1:", PortFrom(worker.ReadLine(), "grpc_port"));
  worker.ReadLine();
  const auto healthy = [&](const std::vector<std::string>& extra, const std::string& name) {
    return SchedulerSeesHealthyWorker(dir, worker_address, extra, name);
  };
  EXPECT_TRUE(healthy({"--peer-token-file=" + dir + "/sched.token"}, "with_token"));
  EXPECT_FALSE(healthy({}, "without_token"));
  kill(worker.pid(), SIGTERM);
  EXPECT_EQ(worker.WaitExit(std::chrono::seconds(30)), 0);
  const std::vector<std::string> audit = Lines(dir + "/worker_audit.jsonl");
  int described = 0, refused = 0;
  for (const std::string& line : audit) {
    if (!absl::StrContains(line, "WorkerService/Describe")) continue;
    if (absl::StrContains(line, "\"principal\":\"sched\"")) ++described;
    if (absl::StrContains(line, "UNAUTHENTICATED")) ++refused;
  }
  EXPECT_GT(described, 0) << audit.size();
  EXPECT_GT(refused, 0) << audit.size() << " " << (audit.empty() ? std::string() : audit.back());
}

// Workers serving TLS: the scheduler reaches them with --peer-tls-ca, checking
// one peer certificate name (--peer-tls-server-name) for all of them; without
// TLS, or with the wrong name, it cannot.
TEST(AuditProcessTest, SchedulerReachesTlsWorkersWithPeerTls) {
  const std::string dir = TempDir() + "/peer_tls";
  const std::string script = absl::StrCat(
      "set -e; rm -rf '", dir, "'; mkdir -p '", dir, "'; cd '", dir, "';",
      "K='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes';",
      "openssl req -x509 $K -keyout ca.key -out ca.pem -days 2 -subj '/CN=Tessera Test CA' 2>/dev/null;",
      "openssl req $K -keyout peer.key -out peer.csr -subj '/CN=tessera-peer' 2>/dev/null;",
      "printf 'subjectAltName=DNS:tessera-peer\\nbasicConstraints=CA:FALSE\\nextendedKeyUsage=serverAuth\\n' > peer.ext;",
      "openssl x509 -req -in peer.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out peer.pem -days 2 "
      "-extfile peer.ext 2>/dev/null");
  ASSERT_EQ(std::system(script.c_str()), 0) << script;
  std::ofstream(dir + "/worker_tokens") << "scheduler-token-0123456789abcdef sched admin\n";
  std::ofstream(dir + "/sched.token") << "scheduler-token-0123456789abcdef\n";
  Child worker({"serve", "--role=worker", "--grpc-port=0", "--metrics-port=-1", "--services=volume",
                "--data-root=" + dir, "--state-dir=" + dir + "/w", "--token-file=" + dir + "/worker_tokens",
                "--tls-cert=" + dir + "/peer.pem", "--tls-key=" + dir + "/peer.key"},
               "peer_tls_worker.txt");
  const std::string worker_address = absl::StrCat("127.0.0.1:", PortFrom(worker.ReadLine(), "grpc_port"));
  worker.ReadLine();
  const std::string token = "--peer-token-file=" + dir + "/sched.token";
  EXPECT_TRUE(SchedulerSeesHealthyWorker(
      dir, worker_address, {token, "--peer-tls-ca=" + dir + "/ca.pem", "--peer-tls-server-name=tessera-peer"},
      "tls_ok"));
  EXPECT_FALSE(SchedulerSeesHealthyWorker(dir, worker_address, {token}, "tls_plaintext"));
  EXPECT_FALSE(SchedulerSeesHealthyWorker(
      dir, worker_address, {token, "--peer-tls-ca=" + dir + "/ca.pem", "--peer-tls-server-name=someone-else"},
      "tls_wrong_name"));
  // A name override without a CA is a usage error.
  Child bad({"serve", "--role=scheduler", "--grpc-port=0", "--metrics-port=-1", "--state-dir=" + dir + "/bad",
             "--worker=" + worker_address, "--peer-tls-server-name=tessera-peer"},
            "peer_tls_bad.txt");
  EXPECT_EQ(bad.WaitExit(std::chrono::seconds(20)), 2);
  kill(worker.pid(), SIGTERM);
  EXPECT_EQ(worker.WaitExit(std::chrono::seconds(30)), 0);
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

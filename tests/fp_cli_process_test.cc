// `tessera fp` as users run it, one process per command on a gallery
// directory: enroll files (ids from file names or --ids), search printing
// JSON in probe order, list, delete, the exit codes of bad input, and `fp
// check` finding a record deleted from the gallery log (the hash chain). Uses
// FVC2002 DB1 templates when the shared data is present, else xyt files
// written here.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/fingerprint/extract/synthetic_print.h"
#include "services/fingerprint/image/image_test_encoders.h"

extern char** environ;

namespace tessera {
namespace {

std::string TesseraBinary() { return std::string(std::getenv("TEST_SRCDIR")) + "/tessera/cli/tessera"; }
std::string TempDir() { return std::getenv("TEST_TMPDIR"); }

struct Result {
  int code = -1;
  std::string out;
};

Result RunTessera(std::vector<std::string> args) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, (TempDir() + "/fp_stderr.txt").c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  args.insert(args.begin(), TesseraBinary());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  EXPECT_EQ(posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  Result r;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) r.out.append(buf, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// Template files named <finger>_<impression>.<ext> for 4 fingers x 8.
std::vector<std::string> TemplateFiles() {
  std::vector<std::string> files;
  const std::string db1 = "/work/shared/data/fingerprint/fvc2002/DB1_B";
  const char* env = std::getenv("TESSERA_FINGERPRINT_DATA");
  const std::string dir = env != nullptr ? std::string(env) + "/fvc2002/DB1_B" : db1;
  if (Exists(dir + "/101_1.iso")) {
    for (int f = 101; f <= 104; ++f) {
      for (int i = 1; i <= 8; ++i) files.push_back(absl::StrCat(dir, "/", f, "_", i, ".iso"));
    }
    return files;
  }
  std::mt19937 rng(3);
  for (int f = 101; f <= 104; ++f) {
    std::vector<std::array<int, 3>> base;
    for (int m = 0; m < 35; ++m) base.push_back({40 + int(rng() % 220), 40 + int(rng() % 300), int(rng() % 360)});
    for (int i = 1; i <= 8; ++i) {
      const std::string path = absl::StrCat(TempDir(), "/", f, "_", i, ".xyt");
      std::ofstream out(path);
      for (const auto& m : base) {
        if (rng() % 10 == 0) continue;
        out << m[0] + int(rng() % 3) << " " << m[1] + int(rng() % 3) << " " << m[2] << " 60\n";
      }
      files.push_back(path);
    }
  }
  return files;
}

TEST(FpCliProcessTest, EnrollSearchListDelete) {
  const std::vector<std::string> files = TemplateFiles();
  const std::string gallery = TempDir() + "/gallery";
  std::vector<std::string> enroll = {"fp", "enroll", "--gallery", gallery};
  std::vector<std::string> probes;
  for (const std::string& f : files) {
    (absl::EndsWith(f.substr(0, f.rfind('.')), "_8") ? probes : enroll).push_back(f);
  }
  Result r = RunTessera(enroll);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"enrolled\": 28")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"gallery_size\": 28")) << r.out;

  // Again, the same file: a retry (issue 31), OK and nothing added.
  r = RunTessera({"fp", "enroll", "--gallery", gallery, enroll[4]});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"gallery_size\": 28")) << r.out;
  // An existing id with other bytes: exit 1, ALREADY_EXISTS in the JSON.
  r = RunTessera({"fp", "enroll", "--gallery", gallery, "--ids", enroll[4].substr(enroll[4].rfind('/') + 1,
                                                                                   enroll[4].rfind('.') - enroll[4].rfind('/') - 1),
                  enroll[5]});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StrContains(r.out, "ALREADY_EXISTS")) << r.out;
  // Explicit ids; a truncated file is rejected with the parser's message.
  const std::string broken = TempDir() + "/broken.iso";
  {
    std::ifstream in(probes[0], std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(broken, std::ios::binary) << (absl::EndsWith(probes[0], ".iso") ? bytes.substr(0, bytes.size() - 5)
                                                                                   : std::string("FMR\0 20", 7));
  }
  r = RunTessera({"fp", "enroll", "--gallery", gallery, "--ids", "extra,broken", probes[1], broken});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StrContains(r.out, "\"enrolled\": 1")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "INVALID_ARGUMENT")) << r.out;

  // Search: JSON with the probes in the order given, mates first.
  std::vector<std::string> search = {"fp", "search", "--gallery", gallery, "--top", "3"};
  std::vector<std::string> order = {probes[3], probes[0], probes[2]};
  search.insert(search.end(), order.begin(), order.end());
  r = RunTessera(search);
  ASSERT_EQ(r.code, 0) << r.out;
  size_t pos = 0;
  for (const std::string& p : order) {
    const std::string name = p.substr(p.rfind('/') + 1, p.rfind('.') - p.rfind('/') - 1);  // "104_8"
    const size_t at = r.out.find(absl::StrCat("{\"probe\": \"", name, "\", \"candidates\": [{\"id\": \""), pos);
    ASSERT_NE(at, std::string::npos) << name << " after byte " << pos << " in\n" << r.out;
    pos = at + 1;
    const size_t id = r.out.find("\"id\": \"", at) + 7;
    EXPECT_EQ(r.out.substr(id, 4), name.substr(0, 4)) << "rank 1 of " << name << ":\n" << r.out;
  }
  EXPECT_EQ(r.out.front(), '[');

  r = RunTessera({"fp", "list", "--gallery", gallery});
  ASSERT_EQ(r.code, 0);
  EXPECT_TRUE(absl::StrContains(r.out, "\"count\": 29")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"101_1\"")) << r.out;

  r = RunTessera({"fp", "delete", "--gallery", gallery, "101_1", "nobody"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StrContains(r.out, "\"deleted\": [\"101_1\"], \"not_found\": [\"nobody\"]")) << r.out;
  r = RunTessera({"fp", "list", "--gallery", gallery});
  EXPECT_TRUE(absl::StrContains(r.out, "\"count\": 28")) << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, "\"101_1\"")) << r.out;

  // Erasure (issue 31): after `fp compact` no file of the gallery holds the
  // deleted template's bytes (before it, its log record still does).
  std::string erased;
  {
    std::ifstream in(files[0], std::ios::binary);  // 101_1
    erased.assign((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  const auto copies = [&] {
    int n = 0;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(gallery)) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path(), std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (bytes.find(erased) != std::string::npos) ++n;
    }
    return n;
  };
  ASSERT_FALSE(erased.empty());
  EXPECT_GT(copies(), 0);
  r = RunTessera({"fp", "compact", "--gallery", gallery});
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"gallery_size\": 28")) << r.out;
  EXPECT_EQ(copies(), 0);
  r = RunTessera({"fp", "list", "--gallery", gallery});
  EXPECT_TRUE(absl::StrContains(r.out, "\"count\": 28")) << r.out;

  // Usage errors.
  EXPECT_EQ(RunTessera({"fp", "search", probes[0]}).code, 2);          // no --gallery
  EXPECT_EQ(RunTessera({"fp", "frobnicate", "--gallery", gallery}).code, 2);
  EXPECT_EQ(RunTessera({"fp", "search", "--gallery", gallery, "--top", "0", probes[0]}).code, 2);
}

// Images through the CLI: `fp extract` writes templates and overlays and
// flags low quality, `fp enroll` and `fp search` take images (told apart from
// templates by content) and refuse those below --min-quality.
TEST(FpCliProcessTest, ImagesExtractEnrollAndSearch) {
  const auto write_png = [](const std::string& name, uint32_t finger, uint32_t impression, double noise) {
    fingerprint::PngSpec spec = fingerprint::GrayPng(
        fingerprint::SyntheticPrint({.finger = finger, .impression = impression, .noise = noise}));
    spec.x_ppm = 19685;  // 500 ppi
    const std::string path = absl::StrCat(TempDir(), "/", name, ".png");
    std::ofstream(path, std::ios::binary) << fingerprint::EncodePng(spec);
    return path;
  };
  std::vector<std::string> enrolled, probes;
  for (uint32_t f = 1; f <= 3; ++f) {
    enrolled.push_back(write_png(absl::StrCat("finger", f), f, 0, 8));
    probes.push_back(write_png(absl::StrCat("latent", f), f, 1, 8));
  }
  const std::string noisy = write_png("noisy", 1, 2, 70);
  const std::string garbage = TempDir() + "/garbage.png";
  std::ofstream(garbage, std::ios::binary) << "\x89PNG\r\n\x1a\n and then nothing";

  const std::string out = TempDir() + "/extracted";
  Result r = RunTessera({"fp", "extract", "--out", out, "--overlay", "--min-quality", "90", enrolled[0], noisy, garbage});
  EXPECT_EQ(r.code, 1) << r.out;  // the garbage
  EXPECT_TRUE(absl::StrContains(r.out, "\"image_format\": \"png\"")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"below_min_quality\": true")) << r.out;  // the noisy one
  EXPECT_TRUE(absl::StrContains(r.out, "INVALID_ARGUMENT")) << r.out;
  EXPECT_TRUE(Exists(out + "/finger1.iso"));
  EXPECT_TRUE(Exists(out + "/finger1.overlay.png"));
  EXPECT_TRUE(Exists(out + "/noisy.iso"));
  r = RunTessera({"fp", "extract", "--out", out, "--format", "ansi", enrolled[1]});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(Exists(out + "/finger2.ansi"));

  const std::string gallery = TempDir() + "/image_gallery";
  std::vector<std::string> enroll = {"fp", "enroll", "--gallery", gallery};
  enroll.insert(enroll.end(), enrolled.begin(), enrolled.end());
  enroll.push_back(out + "/noisy.iso");  // a template among the images
  r = RunTessera(enroll);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"enrolled\": 4")) << r.out;
  r = RunTessera({"fp", "search", "--gallery", gallery, "--top", "1", probes[2], probes[0]});
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "{\"probe\": \"latent3\", \"quality\": ")) << r.out;
  const size_t third = r.out.find("latent3"), first = r.out.find("latent1");
  ASSERT_NE(third, std::string::npos);
  ASSERT_NE(first, std::string::npos);
  EXPECT_LT(third, first);
  EXPECT_EQ(r.out.substr(r.out.find("\"id\": \"", third) + 7, 7), "finger3") << r.out;
  EXPECT_TRUE(absl::StrContains(r.out.substr(r.out.find("\"id\": \"", first) + 7, 7), "1")) << r.out;

  r = RunTessera({"fp", "enroll", "--gallery", gallery, "--min-quality", "90", noisy});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "FAILED_PRECONDITION")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "image quality")) << r.out;
  EXPECT_EQ(RunTessera({"fp", "extract", enrolled[0]}).code, 2);  // no --out
  EXPECT_EQ(RunTessera({"fp", "extract", "--out", out, enrolled[0], out + "/finger1.png"}).code, 2);  // one stem twice
  EXPECT_EQ(RunTessera({"fp", "extract", "--out", out, "--format", "xyt", enrolled[0]}).code, 2);
  EXPECT_EQ(RunTessera({"fp", "extract", "--out", out, "--min-quality", "101", enrolled[0]}).code, 2);
}

// ANSI/NIST-ITL transactions through the CLI: NIST's ten-print card enrolls
// one template per finger (slaps reported as skipped) under its TCN as the
// subject, and NIST's slap transaction (two plain thumbs: a card, not a
// latent) is a ten-print search that finds the card's subject on both thumbs.
TEST(FpCliProcessTest, TransactionsEnrollAndSearchPerFinger) {
  const char* env = std::getenv("TESSERA_FINGERPRINT_DATA");
  const std::string nist = (env != nullptr ? std::string(env) : std::string("/work/shared/data/fingerprint")) + "/nist";
  const std::string card = nist + "/ansi-nist-reference/type-14-tpcard-nqm.an2";
  const std::string slaps = nist + "/libbiomeval/type4-slaps.an2k";
  if (!Exists(card) || !Exists(slaps)) GTEST_SKIP() << "no NIST data at " << nist;
  const std::string gallery = TempDir() + "/card_gallery";
  Result r = RunTessera({"fp", "enroll", "--gallery", gallery, card});
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"enrolled\": 12")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "type-14-tpcard-nqm_13")) << r.out;  // a slap, skipped
  EXPECT_TRUE(absl::StrContains(r.out, "UNIMPLEMENTED")) << r.out;
  r = RunTessera({"fp", "search", "--gallery", gallery, "--top", "1", slaps});
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "{\"probe\": \"type4-slaps\", \"mode\": \"ten-print\"")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"subjects\": [{\"subject\": \"jck tenprint card nqm\"")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"id\": \"type-14-tpcard-nqm_11\"")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"id\": \"type-14-tpcard-nqm_12\"")) << r.out;
  // A truncated transaction: exit 1 with the reader's message.
  const std::string cut = TempDir() + "/cut.an2";
  {
    std::ifstream in(card, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 3);
  }
  r = RunTessera({"fp", "enroll", "--gallery", gallery, cut});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "INVALID_ARGUMENT")) << r.out;
}

// A complete record cut out of the middle of the log (its neighbours intact, so
// every CRC still passes): `fp check` names the gap and exits 1; the gallery
// is refused rather than opened without it.
TEST(FpCliProcessTest, CheckFindsARecordDeletedFromTheLog) {
  const std::vector<std::string> files = TemplateFiles();
  const std::string gallery = TempDir() + "/chained";
  Result r = RunTessera({"fp", "enroll", "--gallery", gallery, files[0], files[1], files[2]});
  ASSERT_EQ(r.code, 0) << r.out;
  r = RunTessera({"fp", "check", "--gallery", gallery});
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"chain_records\": 3")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"legacy_records\": 0")) << r.out;

  const std::string log = gallery + "/log-0000000000000001";
  std::string bytes;
  {
    std::ifstream in(log, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // Records are framed as u32 length | u32 CRC | payload (little endian).
  auto record_size = [&](size_t at) {
    uint32_t len = 0;
    std::memcpy(&len, bytes.data() + at, 4);
    return 8 + static_cast<size_t>(len);
  };
  const size_t second = record_size(0);
  ASSERT_LT(second + record_size(second), bytes.size());
  bytes.erase(second, record_size(second));
  std::ofstream(log, std::ios::binary | std::ios::trunc) << bytes;

  r = RunTessera({"fp", "check", "--gallery", gallery});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"clean\": false")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "record 3 follows record 1 (record 2 deleted or moved)")) << r.out;
  r = RunTessera({"fp", "list", "--gallery", gallery});
  EXPECT_EQ(r.code, 1) << r.out;
}

// Issue 31: the head `fp check` prints, kept elsewhere, anchors the gallery's
// chain: the last record cut off (the chain still intact) fails
// `fp check --expect-head`; a rewritten head fails too.
TEST(FpCliProcessTest, CheckAgainstAStoredHeadFindsACutTail) {
  const std::vector<std::string> files = TemplateFiles();
  const std::string gallery = TempDir() + "/anchored";
  Result r = RunTessera({"fp", "enroll", "--gallery", gallery, files[0], files[1], files[2]});
  ASSERT_EQ(r.code, 0) << r.out;
  r = RunTessera({"fp", "check", "--gallery", gallery});
  ASSERT_EQ(r.code, 0) << r.out;
  const size_t at = r.out.find("\"head\": \"");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string head = r.out.substr(at + 9, r.out.find('"', at + 9) - at - 9);
  EXPECT_TRUE(absl::StartsWith(head, "3:")) << head;
  r = RunTessera({"fp", "check", "--gallery", gallery, "--expect-head", head});
  EXPECT_EQ(r.code, 0) << r.out;

  // The last record cut off: every remaining record and link is intact.
  const std::string log = gallery + "/log-0000000000000001";
  std::string bytes;
  {
    std::ifstream in(log, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  size_t last = 0;
  for (size_t at_record = 0; at_record < bytes.size();) {
    uint32_t len = 0;
    std::memcpy(&len, bytes.data() + at_record, 4);
    last = at_record;
    at_record += 8 + len;
  }
  bytes.resize(last);
  std::ofstream(log, std::ios::binary | std::ios::trunc) << bytes;
  r = RunTessera({"fp", "check", "--gallery", gallery});
  EXPECT_EQ(r.code, 0) << r.out;  // on its own, a shorter chain looks fine
  r = RunTessera({"fp", "check", "--gallery", gallery, "--expect-head", head});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "cut: the gallery's chain ends at record 2")) << r.out;
  std::string rewritten = head;
  rewritten.replace(0, 1, "2");
  r = RunTessera({"fp", "check", "--gallery", gallery, "--expect-head", rewritten});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "another head")) << r.out;
}

}  // namespace
}  // namespace tessera

// The audit trail's chain: records verify; an edited, deleted or reordered line is found with
// the first bad seq; rotation keeps the chain across files; reopening continues it.
#include "services/server/audit_log.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

std::string TmpDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name, "_", getpid());
  if (std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()) != 0) ADD_FAILURE() << dir;
  return dir;
}

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

AuditEvent Event(int i) {
  AuditEvent e;
  e.principal = i % 2 ? "alice" : "bob \"the\" analyst";
  e.peer = "ipv4:127.0.0.1:5000";
  e.method = "/tessera.v1.FingerprintService/Search";
  e.request_id = absl::StrCat("req-", i);
  e.outcome = "OK";
  e.details_json = absl::StrCat("{\"candidates\":[[[\"id", i, "\",0.5]]]}");
  return e;
}

std::string WriteLog(const std::string& dir, int n, int64_t max_bytes = 1 << 20) {
  const std::string path = dir + "/audit.jsonl";
  auto log = AuditLog::Open(path, max_bytes);
  EXPECT_TRUE(log.ok()) << log.status();
  for (int i = 1; i <= n; ++i) {
    auto seq = (*log)->Append(Event(i));
    EXPECT_TRUE(seq.ok());
    EXPECT_EQ(*seq, i);
  }
  return path;
}

TEST(AuditLogTest, ChainVerifiesAndParses) {
  const std::string path = WriteLog(TmpDir("audit_ok"), 5);
  auto r = VerifyAuditLog(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->ok) << r->reason;
  EXPECT_EQ(r->records, 5);
  auto records = ReadAuditLog(path);
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 5u);
  EXPECT_EQ((*records)[0].seq, 1);
  EXPECT_EQ((*records)[0].prev_hash, std::string(64, '0'));
  EXPECT_EQ((*records)[1].principal, "bob \"the\" analyst");
  EXPECT_EQ((*records)[1].prev_hash, (*records)[0].hash);
  EXPECT_THAT((*records)[2].line, HasSubstr("\"candidates\":[[[\"id3\",0.5]]]"));
}

// Issue 35: records carry the call's trace id; a log whose older records have none (written
// before traces) verifies across the change, and an edited trace id breaks the chain.
TEST(AuditLogTest, TraceIdsAreRecordedAndOlderRecordsWithoutOneStillVerify) {
  const std::string path = WriteLog(TmpDir("audit_trace"), 2);  // records without trace_id
  {
    auto log = AuditLog::Open(path);
    ASSERT_TRUE(log.ok()) << log.status();
    AuditEvent e = Event(3);
    e.trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    ASSERT_TRUE((*log)->Append(e).ok());
  }
  auto r = VerifyAuditLog(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->ok) << r->reason;
  EXPECT_EQ(r->records, 3);
  auto records = ReadAuditLog(path);
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 3u);
  EXPECT_EQ((*records)[0].trace_id, "");
  EXPECT_EQ((*records)[2].trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_THAT((*records)[2].line, HasSubstr("\"outcome\":\"OK\",\"trace_id\":\"4bf92f3577b34da6a3ce929d0e0e4736\",\"details\""));

  std::vector<std::string> lines = Lines(path);
  lines[2] = absl::StrReplaceAll(lines[2], {{"4bf92f3577b34da6", "0000000000000001"}});
  WriteLines(path, lines);
  r = VerifyAuditLog(path);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->ok);
  EXPECT_EQ(r->first_bad_seq, 3);
}

TEST(AuditLogTest, EditedLineIsFound) {
  const std::string path = WriteLog(TmpDir("audit_edit"), 5);
  std::vector<std::string> lines = Lines(path);
  lines[2] = absl::StrReplaceAll(lines[2], {{"\"id3\",0.5", "\"id9\",0.5"}});
  WriteLines(path, lines);
  auto r = VerifyAuditLog(path);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->ok);
  EXPECT_EQ(r->first_bad_seq, 3);
  EXPECT_THAT(r->reason, HasSubstr("edited"));
  EXPECT_EQ(r->line, 3);
}

TEST(AuditLogTest, DeletedLineIsFound) {
  const std::string path = WriteLog(TmpDir("audit_delete"), 5);
  std::vector<std::string> lines = Lines(path);
  lines.erase(lines.begin() + 1);
  WriteLines(path, lines);
  auto r = VerifyAuditLog(path);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->ok);
  EXPECT_EQ(r->first_bad_seq, 2);
  EXPECT_THAT(r->reason, HasSubstr("deleted"));
}

TEST(AuditLogTest, ReorderedLinesAreFound) {
  const std::string path = WriteLog(TmpDir("audit_reorder"), 5);
  std::vector<std::string> lines = Lines(path);
  std::swap(lines[1], lines[2]);
  WriteLines(path, lines);
  auto r = VerifyAuditLog(path);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->ok);
  EXPECT_EQ(r->first_bad_seq, 2);
  EXPECT_THAT(r->reason, HasSubstr("reordered"));
}

TEST(AuditLogTest, RecomputedHashStillBreaksTheChain) {
  // An editor who recomputes the edited record's own hash breaks the next record's link.
  const std::string path = WriteLog(TmpDir("audit_rehash"), 4);
  std::vector<std::string> lines = Lines(path);
  auto rec = ParseAuditLine(lines[1]);
  ASSERT_TRUE(rec.ok());
  std::string body = lines[1].substr(0, lines[1].rfind(",\"hash\":\""));
  body = absl::StrReplaceAll(body, {{"req-2", "req-X"}});
  lines[1] = absl::StrCat(body, ",\"hash\":\"", AuditLineHash(body + "}", rec->prev_hash), "\"}");
  WriteLines(path, lines);
  auto r = VerifyAuditLog(path);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->ok);
  EXPECT_EQ(r->first_bad_seq, 3);
  EXPECT_THAT(r->reason, HasSubstr("chain broken"));
}

TEST(AuditLogTest, RotationKeepsTheChainAndReopenContinues) {
  const std::string dir = TmpDir("audit_rotate");
  const std::string path = WriteLog(dir, 20, /*max_bytes=*/1000);
  std::vector<std::string> files = AuditLogFiles(path);
  ASSERT_GE(files.size(), 3u);
  EXPECT_EQ(files.back(), path);
  // The first record of each newer file carries the last hash of the older one.
  for (size_t i = 1; i < files.size(); ++i) {
    auto older = ParseAuditLine(Lines(files[i - 1]).back());
    auto newer = ParseAuditLine(Lines(files[i]).front());
    ASSERT_TRUE(older.ok() && newer.ok());
    EXPECT_EQ(newer->prev_hash, older->hash);
    EXPECT_EQ(newer->seq, older->seq + 1);
  }
  {
    auto log = AuditLog::Open(path, 1000);
    ASSERT_TRUE(log.ok());
    auto seq = (*log)->Append(Event(21));
    ASSERT_TRUE(seq.ok());
    EXPECT_EQ(*seq, 21);
  }
  auto r = VerifyAuditLog(path);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->ok) << r->reason << " at seq " << r->first_bad_seq;
  EXPECT_EQ(r->records, 21);
  // Removing a whole rotated file in the middle is found as deleted records.
  ASSERT_EQ(std::rename(files[1].c_str(), (dir + "/elsewhere").c_str()), 0);
  ASSERT_EQ(std::rename(files[0].c_str(), files[1].c_str()), 0);
  r = VerifyAuditLog(path);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->ok);
  EXPECT_THAT(r->reason, HasSubstr("deleted"));
}

TEST(AuditLogTest, TornTailIsSetAsideAndTheChainContinues) {
  const std::string path = WriteLog(TmpDir("audit_torn"), 3);
  {
    std::ofstream out(path, std::ios::app);
    out << "{\"seq\":4,\"time\":";
  }
  auto r = VerifyAuditLog(path);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->ok);
  EXPECT_EQ(r->first_bad_seq, 4);
  {
    auto log = AuditLog::Open(path);
    ASSERT_TRUE(log.ok()) << log.status();
    auto seq = (*log)->Append(Event(4));
    ASSERT_TRUE(seq.ok());
    EXPECT_EQ(*seq, 4);
  }
  EXPECT_EQ(Lines(path + ".torn"), std::vector<std::string>{"{\"seq\":4,\"time\":"});
  r = VerifyAuditLog(path);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->ok) << r->reason;
  EXPECT_EQ(r->records, 4);
}

TEST(AuditLogTest, DamagedCompleteLastLineRefusesToOpen) {
  const std::string path = WriteLog(TmpDir("audit_damaged"), 3);
  std::vector<std::string> lines = Lines(path);
  lines.back() = lines.back().substr(0, lines.back().size() - 10);  // complete line, bad record
  WriteLines(path, lines);
  auto log = AuditLog::Open(path);
  EXPECT_EQ(log.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(log.status().message()), HasSubstr("audit verify"));
}

// Re-chains `lines` the way a forger without the key would: each hash recomputed
// over the (edited) record with plain SHA-256, the key member dropped.
std::vector<std::string> RechainWithoutKey(std::vector<std::string> lines) {
  std::string prev(64, '0');
  for (std::string& line : lines) {
    const size_t key = line.find(",\"key\":\"");
    if (key != std::string::npos) line.erase(key, 8 + 16 + 1);
    const size_t p = line.rfind(",\"prev_hash\":\"");
    line = absl::StrCat(line.substr(0, p), ",\"prev_hash\":\"", prev, "\"");
    const std::string hash = AuditLineHash(absl::StrCat(line, "}"), prev);
    line = absl::StrCat(line, ",\"hash\":\"", hash, "\"}");
    prev = hash;
  }
  return lines;
}

AuditKey Key(char c) { return AuditKey::FromSecret(std::string(40, c)).value(); }

// Issue 31: a keyed chain catches a forger who recomputes every link, and a
// stored head catches a cut tail; keys roll over across restarts.
TEST(AuditLogTest, KeyedChainAndHeadCatchForgeryAndCuts) {
  const std::string dir = TmpDir("audit_keyed");
  const std::string path = dir + "/audit.jsonl";
  {
    auto log = AuditLog::Open(path, 1 << 20, Key('a'));
    ASSERT_TRUE(log.ok()) << log.status();
    for (int i = 1; i <= 3; ++i) ASSERT_TRUE((*log)->Append(Event(i)).ok());
  }
  {
    auto log = AuditLog::Open(path, 1 << 20, Key('b'));  // key rollover: a restart with the new key
    ASSERT_TRUE(log.ok()) << log.status();
    for (int i = 4; i <= 5; ++i) ASSERT_TRUE((*log)->Append(Event(i)).ok());
  }
  AuditVerifyOptions both;
  both.keys = {Key('a'), Key('b')};
  auto ok = VerifyAuditLog(path, both);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(ok->ok) << ok->reason;
  EXPECT_EQ(ok->keyed_records, 5);
  EXPECT_EQ(ok->last_seq, 5);
  const std::pair<int64_t, std::string> head{ok->last_seq, ok->last_hash};
  EXPECT_EQ(ParseAuditHead(absl::StrCat(head.first, ":", head.second)).value(), head);

  // Only the newer key: the older records are named as keyed with a key not given.
  AuditVerifyOptions only_b;
  only_b.keys = {Key('b')};
  EXPECT_FALSE(VerifyAuditLog(path, only_b)->ok);

  // An edit, every link recomputed without the key: the plain check passes, the keyed one fails.
  std::vector<std::string> forged = Lines(path);
  forged[2] = absl::StrReplaceAll(forged[2], {{"\"id3\",0.5", "\"id9\",0.5"}});
  WriteLines(path + ".forged", RechainWithoutKey(forged));
  EXPECT_TRUE(VerifyAuditLog(path + ".forged")->ok);
  auto caught = VerifyAuditLog(path + ".forged", both);
  EXPECT_FALSE(caught->ok);
  EXPECT_THAT(caught->reason, HasSubstr("without the key"));
  // Forged with a guessed key: the record's keyed hash does not match.
  std::vector<std::string> edited = Lines(path);
  edited[4] = absl::StrReplaceAll(edited[4], {{"\"id5\",0.5", "\"id6\",0.5"}});
  WriteLines(path + ".edited", edited);
  auto edited_result = VerifyAuditLog(path + ".edited", both);
  EXPECT_FALSE(edited_result->ok);
  EXPECT_EQ(edited_result->first_bad_seq, 5);

  // The last record cut off: intact as a chain, but not the head stored earlier.
  std::vector<std::string> cut = Lines(path);
  cut.pop_back();
  WriteLines(path + ".cut", cut);
  EXPECT_TRUE(VerifyAuditLog(path + ".cut", both)->ok);
  AuditVerifyOptions with_head = both;
  with_head.expect_head = head;
  auto cut_result = VerifyAuditLog(path + ".cut", with_head);
  EXPECT_FALSE(cut_result->ok);
  EXPECT_THAT(cut_result->reason, HasSubstr("cut: the log ends at seq 4"));
  EXPECT_TRUE(VerifyAuditLog(path, with_head)->ok);
  EXPECT_FALSE(AuditKey::FromSecret("short").ok());
  EXPECT_FALSE(ParseAuditHead("5:abc").ok());
}

// Issue 31: a keyed log writes checkpoint records inside its keyed chain.
TEST(AuditLogTest, KeyedLogWritesCheckpoints) {
  const std::string path = TmpDir("audit_checkpoints") + "/audit.jsonl";
  AuditCheckpoints every_three;
  every_three.every_records = 3;
  auto log = AuditLog::Open(path, 1 << 20, Key('c'), every_three);
  ASSERT_TRUE(log.ok()) << log.status();
  std::vector<int64_t> seqs;
  for (int i = 1; i <= 7; ++i) seqs.push_back((*log)->Append(Event(i)).value());
  EXPECT_EQ(seqs, (std::vector<int64_t>{1, 2, 3, 5, 6, 7, 9}));  // 4 and 8 are checkpoints
  auto records = ReadAuditLog(path);
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 9u);
  const AuditRecord& cp = (*records)[3];
  EXPECT_EQ(cp.method, kAuditCheckpointMethod);
  EXPECT_THAT(cp.line, HasSubstr(absl::StrCat("\"records\":3,\"head\":\"", (*records)[2].hash, "\"")));
  EXPECT_EQ((*records)[7].method, kAuditCheckpointMethod);
  AuditVerifyOptions keyed;
  keyed.keys = {Key('c')};
  EXPECT_TRUE(VerifyAuditLog(path, keyed)->ok);
  // Unkeyed logs write none.
  const std::string plain = WriteLog(TmpDir("audit_no_checkpoints"), 7);
  for (const AuditRecord& r : ReadAuditLog(plain).value()) EXPECT_NE(r.method, kAuditCheckpointMethod);
  EXPECT_FALSE(AuditLog::Open(path + ".bad", 1 << 20, Key('c'), AuditCheckpoints{0, absl::Minutes(1)}).ok());
}

}  // namespace
}  // namespace tessera

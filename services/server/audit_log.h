// An append-only, hash-chained audit trail in JSON lines (`tessera serve --audit-log FILE`).
//
// Each line is one record with keys in this order:
//   {"seq":N,"time":"RFC3339","principal":"...","peer":"...","method":"...","request_id":"...",
//    ["gallery":"...",] "outcome":"OK",["trace_id":"<32 hex>",] "details":{...},
//    "prev_hash":"<64 hex>","hash":"<64 hex>"}
// "gallery" is there for calls whose request names a fingerprint gallery (every
// FingerprintService call but ListGalleries, and fingerprint search job submissions).
// "trace_id" (issue 35) is the call's W3C trace id (its traceparent, or the one the server
// started); records written before it have none and verify as they did: the hash covers the
// line as written.
// hash = SHA-256(prev_hash || canonical bytes), where the canonical bytes are the line without
// its ',"hash":"..."' member (so everything up to prev_hash, then '}'). The first record ever
// has prev_hash = 64 zeros. Append() writes the line and fsyncs before returning.
// Rotation: when FILE exceeds max_bytes it becomes FILE.1 (FILE.1 -> FILE.2, ...), and the
// chain continues: the first record of the new FILE carries the last hash of the old one.
//
// Keyed (issue 31; `serve --audit-key-file K`): each record also carries "key":"<id>" (the
// first 16 hex digits of SHA-256 of the secret) just before prev_hash, and its hash is
// HMAC-SHA256(secret, prev_hash || canonical bytes) — so a forger who edits a record and
// recomputes every link without the secret fails `tessera audit verify --key-file K`. A cut
// tail (the newest records removed) is found against a head stored elsewhere: `tessera audit
// head` prints SEQ:HASH, `verify --expect-head SEQ:HASH` requires that record. Key rollover:
// restart with the new key; records name their key, and verify takes every key file.
#ifndef TESSERA_SERVICES_SERVER_AUDIT_LOG_H_
#define TESSERA_SERVICES_SERVER_AUDIT_LOG_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/json.h"  // JsonQuote, which records are written with

namespace tessera {

struct AuditEvent {
  absl::Time time = absl::Now();
  std::string principal;
  std::string peer;
  std::string method;
  std::string request_id;  // request / job id when the call names one
  std::string gallery;     // the fingerprint gallery the request names ("" when none)
  std::string trace_id;    // the call's W3C trace id ("" when none)
  std::string outcome;     // status code name, e.g. "OK", "PERMISSION_DENIED"
  std::string details_json = "{}";  // a JSON object
};

// The method name of the checkpoint records a keyed log writes (AuditCheckpoints).
inline constexpr char kAuditCheckpointMethod[] = "tessera.audit/checkpoint";

// A keyed log appends a checkpoint record — method kAuditCheckpointMethod,
// details {"records":SEQ,"head":"<hash of record SEQ>"} — after every
// `every_records` records, or with the first record after `every` has passed
// since the last one: a time mark inside the keyed chain between the heads an
// operator stores outside (`tessera audit head`).
struct AuditCheckpoints {
  int64_t every_records = 10000;
  absl::Duration every = absl::Minutes(10);
};

// One parsed line (for verify/show).
struct AuditRecord {
  int64_t seq = -1;
  std::string time, principal, method, gallery, trace_id, outcome, prev_hash, hash;
  std::string key_id;  // "" for an unkeyed record
  std::string line;
};

// A secret the chain's links are keyed with.
struct AuditKey {
  std::string id;      // first 16 hex digits of SHA-256(secret)
  std::string secret;  // at least 32 bytes
  // The file's contents, surrounding whitespace removed; INVALID_ARGUMENT when shorter than 32
  // bytes, NOT_FOUND when unreadable.
  static absl::StatusOr<AuditKey> FromFile(const std::string& path);
  static absl::StatusOr<AuditKey> FromSecret(std::string secret);
};

class AuditLog {
 public:
  // Opens (creating) FILE and continues its chain. A torn last line of FILE (a crash while
  // writing it; its answer was never sent) is moved to FILE.torn with a warning. A complete last
  // line that is not a valid record is FAILED_PRECONDITION (run `tessera audit verify`).
  // With `key`, every record written is keyed with it.
  static absl::StatusOr<std::unique_ptr<AuditLog>> Open(const std::string& path, int64_t max_bytes = 64 << 20,
                                                        std::optional<AuditKey> key = std::nullopt,
                                                        AuditCheckpoints checkpoints = {});
  ~AuditLog();

  // Writes one record and fsyncs it; returns its seq.
  absl::StatusOr<int64_t> Append(const AuditEvent& event);
  const std::string& path() const { return path_; }

 private:
  AuditLog(std::string path, int64_t max_bytes, std::optional<AuditKey> key)
      : path_(std::move(path)), max_bytes_(max_bytes), key_(std::move(key)) {}
  absl::Status OpenFile();
  absl::Status Rotate();
  absl::StatusOr<int64_t> AppendLocked(const AuditEvent& event);

  const std::string path_;
  const int64_t max_bytes_;
  const std::optional<AuditKey> key_;
  std::mutex mu_;
  int fd_ = -1;
  int64_t size_ = 0;
  int64_t next_seq_ = 1;
  std::string last_hash_;
  AuditCheckpoints checkpoints_;
  int64_t since_checkpoint_ = 0;  // records since the last checkpoint (keyed logs)
  absl::Time last_checkpoint_;
};

// The files of a log, oldest first: FILE.N ... FILE.1, FILE (those that exist).
std::vector<std::string> AuditLogFiles(const std::string& path);

// Parses one line; INVALID_ARGUMENT when it is not a record this log writes.
absl::StatusOr<AuditRecord> ParseAuditLine(absl::string_view line);
// The hash a line should carry given the previous hash: SHA-256, or with `key` its HMAC.
std::string AuditLineHash(absl::string_view line_without_hash_member, absl::string_view prev_hash,
                          const AuditKey* key = nullptr);

struct AuditVerifyResult {
  bool ok = true;
  int64_t records = 0;
  int64_t first_bad_seq = -1;  // the seq where the chain breaks (-1: ok)
  std::string file;            // file of the first problem
  int64_t line = 0;            // 1-based line in that file
  std::string reason;          // "edited", "deleted", "reordered", ...
  std::string last_hash;
  int64_t last_seq = 0;
  int64_t keyed_records = 0;
};

struct AuditVerifyOptions {
  // Keys to check keyed records with (every key the log was written with). When given, every
  // record from the first keyed one on must be keyed with one of them, and at least one must be
  // (an unkeyed tail or log is a downgrade: a forgery).
  std::vector<AuditKey> keys;
  // The head (seq, hash) stored elsewhere earlier: the log must still hold that record.
  std::optional<std::pair<int64_t, std::string>> expect_head;
};

// Checks the chain across all rotated files.
absl::StatusOr<AuditVerifyResult> VerifyAuditLog(const std::string& path, const AuditVerifyOptions& options = {});
// "SEQ:HASH" -> (seq, hash); INVALID_ARGUMENT otherwise.
absl::StatusOr<std::pair<int64_t, std::string>> ParseAuditHead(absl::string_view text);

// All records across rotated files, oldest first (unparseable lines are skipped).
absl::StatusOr<std::vector<AuditRecord>> ReadAuditLog(const std::string& path);

}  // namespace tessera

#endif  // TESSERA_SERVICES_SERVER_AUDIT_LOG_H_

#include "services/server/audit_log.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/durable_file.h"
#include "common/log.h"
#include "common/status.h"
#include "services/server/auth.h"

namespace tessera {
namespace {

const std::string kGenesis(64, '0');
const char kHashKey[] = ",\"hash\":\"";
constexpr size_t kHashKeyLen = sizeof(kHashKey) - 1;
const char kPrevKey[] = ",\"prev_hash\":\"";
constexpr size_t kPrevKeyLen = sizeof(kPrevKey) - 1;
const char kKeyKey[] = ",\"key\":\"";
constexpr size_t kKeyKeyLen = sizeof(kKeyKey) - 1;
constexpr size_t kKeyIdLen = 16;

bool FileExists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

absl::StatusOr<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The JSON string value of "key" (first occurrence), unescaped.
bool StringField(absl::string_view line, absl::string_view key, std::string* out) {
  const std::string k = absl::StrCat("\"", key, "\":\"");
  size_t p = line.find(k);
  if (p == absl::string_view::npos) return false;
  p += k.size();
  out->clear();
  for (; p < line.size(); ++p) {
    char c = line[p];
    if (c == '"') return true;
    if (c == '\\' && p + 1 < line.size()) {
      char e = line[++p];
      switch (e) {
        case 'n': out->push_back('\n'); break;
        case 't': out->push_back('\t'); break;
        case 'r': out->push_back('\r'); break;
        case 'u':
          if (p + 4 < line.size()) {
            int v = 0;
            for (int i = 1; i <= 4; ++i) {
              char h = line[p + i];
              v = v * 16 + (h >= 'a' ? h - 'a' + 10 : h >= 'A' ? h - 'A' + 10 : h - '0');
            }
            p += 4;
            if (v < 0x80) out->push_back(static_cast<char>(v)); else out->push_back('?');
          }
          break;
        default: out->push_back(e);
      }
    } else {
      out->push_back(c);
    }
  }
  return false;
}

}  // namespace


std::string AuditLineHash(absl::string_view canonical, absl::string_view prev_hash, const AuditKey* key) {
  const std::string message = absl::StrCat(prev_hash, canonical);
  if (key == nullptr) return Sha256Hex(message);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key->secret.data(), static_cast<int>(key->secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &n);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(mac), n));
}

absl::StatusOr<AuditKey> AuditKey::FromSecret(std::string secret) {
  if (secret.size() < 32) {
    return absl::InvalidArgumentError(
        absl::StrCat("an audit key needs at least 32 bytes of secret (got ", secret.size(), "); e.g. `openssl rand "
                     "-hex 32 > audit.key`"));
  }
  AuditKey key;
  key.id = Sha256Hex(secret).substr(0, kKeyIdLen);
  key.secret = std::move(secret);
  return key;
}

absl::StatusOr<AuditKey> AuditKey::FromFile(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, ReadWhole(path));
  absl::StatusOr<AuditKey> key = FromSecret(std::string(absl::StripAsciiWhitespace(text)));
  if (!key.ok()) return absl::InvalidArgumentError(absl::StrCat("audit key file ", path, ": ", key.status().message()));
  return key;
}

absl::StatusOr<std::pair<int64_t, std::string>> ParseAuditHead(absl::string_view text) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  int64_t seq = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &seq) || seq < 1 || parts[1].size() != 64) {
    return absl::InvalidArgumentError("a head is SEQ:HASH, as `tessera audit head` prints it");
  }
  return std::make_pair(seq, std::string(parts[1]));
}

absl::StatusOr<AuditRecord> ParseAuditLine(absl::string_view line) {
  AuditRecord r;
  r.line = std::string(line);
  if (!absl::StartsWith(line, "{\"seq\":") || line.empty() || line.back() != '}') {
    return absl::InvalidArgumentError("not an audit record");
  }
  const size_t h = line.rfind(kHashKey);
  const size_t p = line.rfind(kPrevKey);
  if (h == absl::string_view::npos || p == absl::string_view::npos || p > h) {
    return absl::InvalidArgumentError("record without prev_hash/hash");
  }
  r.hash = std::string(line.substr(h + kHashKeyLen, 64));
  r.prev_hash = std::string(line.substr(p + kPrevKeyLen, 64));
  // The key member sits right before prev_hash, at a fixed width (never inside the details).
  const size_t k = p >= kKeyKeyLen + kKeyIdLen + 1 ? p - (kKeyKeyLen + kKeyIdLen + 1) : absl::string_view::npos;
  if (k != absl::string_view::npos && line.substr(k, kKeyKeyLen) == kKeyKey && line[p - 1] == '"') {
    r.key_id = std::string(line.substr(k + kKeyKeyLen, kKeyIdLen));
  }
  if (line.size() != h + kHashKeyLen + 64 + 2) return absl::InvalidArgumentError("malformed hash member");
  const size_t comma = line.find(',');
  if (!absl::SimpleAtoi(line.substr(7, comma - 7), &r.seq)) return absl::InvalidArgumentError("bad seq");
  StringField(line, "time", &r.time);
  StringField(line, "principal", &r.principal);
  StringField(line, "method", &r.method);
  StringField(line, "outcome", &r.outcome);
  // Only before the details (which quote client text).
  const size_t details = line.find(",\"details\":");
  StringField(line.substr(0, details), "gallery", &r.gallery);
  StringField(line.substr(0, details), "trace_id", &r.trace_id);
  return r;
}

AuditLog::~AuditLog() {
  if (fd_ >= 0) close(fd_);
}

std::vector<std::string> AuditLogFiles(const std::string& path) {
  std::vector<std::string> files;
  int n = 1;
  while (FileExists(absl::StrCat(path, ".", n))) ++n;
  for (int i = n - 1; i >= 1; --i) files.push_back(absl::StrCat(path, ".", i));
  if (FileExists(path)) files.push_back(path);
  return files;
}

absl::StatusOr<std::unique_ptr<AuditLog>> AuditLog::Open(const std::string& path, int64_t max_bytes,
                                                         std::optional<AuditKey> key, AuditCheckpoints checkpoints) {
  if (checkpoints.every_records < 1 || checkpoints.every <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("audit checkpoints need every_records >= 1 and a positive interval");
  }
  std::unique_ptr<AuditLog> log(new AuditLog(path, max_bytes, std::move(key)));
  log->checkpoints_ = checkpoints;
  log->last_checkpoint_ = absl::Now();
  log->last_hash_ = kGenesis;
  // Continue the chain from the newest record (the current file, or the last rotated one).
  std::vector<std::string> files = AuditLogFiles(path);
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    absl::StatusOr<std::string> text = ReadWhole(*it);
    if (!text.ok()) return text.status();
    if (text->empty()) continue;
    if (text->back() != '\n') {
      // A record cut short by a crash (power loss) in the current file: its answer was never
      // sent (records are fsynced before answers), so it is set aside in FILE.torn, not kept in
      // the chain. Rotated files are complete by construction: a torn one is damage.
      if (*it != path) {
        return absl::FailedPreconditionError(absl::StrCat("audit log ", *it, " ends in a torn line; check it with "
                                                          "`tessera audit verify --log ", path, "`"));
      }
      const size_t cut = text->rfind('\n');
      const size_t keep = cut == std::string::npos ? 0 : cut + 1;
      const std::string torn = text->substr(keep);
      int tfd = open(absl::StrCat(path, ".torn").c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
      if (tfd < 0 || write(tfd, torn.data(), torn.size()) != static_cast<ssize_t>(torn.size()) ||
          write(tfd, "\n", 1) != 1 || fsync(tfd) != 0 || truncate(path.c_str(), static_cast<off_t>(keep)) != 0) {
        if (tfd >= 0) close(tfd);
        return absl::FailedPreconditionError(absl::StrCat("audit log ", path, " ends in a torn line that could not "
                                                          "be set aside: ", strerror(errno)));
      }
      close(tfd);
      TESSERA_LOG(WARNING) << "audit log " << path << ": set aside a torn last record (" << torn.size()
                           << " bytes, never acknowledged: records are fsynced before answers) in " << path
                           << ".torn";
      text->resize(keep);
      if (text->empty()) continue;
    }
    const size_t start = text->rfind('\n', text->size() - 2);
    absl::string_view last(*text);
    last = last.substr(start == std::string::npos ? 0 : start + 1);
    last.remove_suffix(1);
    absl::StatusOr<AuditRecord> rec = ParseAuditLine(last);
    if (!rec.ok()) {
      return absl::FailedPreconditionError(absl::StrCat("audit log ", *it, ": last line is not a valid record; "
                                                        "check it with `tessera audit verify --log ", path, "`"));
    }
    log->next_seq_ = rec->seq + 1;
    log->last_hash_ = rec->hash;
    break;
  }
  absl::Status s = log->OpenFile();
  if (!s.ok()) return s;
  return log;
}

absl::Status AuditLog::OpenFile() {
  fd_ = open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0) return absl::PermissionDeniedError(absl::StrCat("cannot open audit log ", path_, ": ", strerror(errno)));
  struct stat st;
  if (fstat(fd_, &st) != 0) return absl::InternalError(absl::StrCat("fstat ", path_, ": ", strerror(errno)));
  size_ = st.st_size;
  return absl::OkStatus();
}

absl::Status AuditLog::Rotate() {
  close(fd_);
  fd_ = -1;
  std::vector<std::string> files = AuditLogFiles(path_);  // oldest first, the current last
  const int rotated = static_cast<int>(files.size()) - 1;
  for (int i = rotated; i >= 1; --i) {
    if (rename(absl::StrCat(path_, ".", i).c_str(), absl::StrCat(path_, ".", i + 1).c_str()) != 0) {
      return absl::InternalError(absl::StrCat("rotate ", path_, ": ", strerror(errno)));
    }
  }
  if (rename(path_.c_str(), absl::StrCat(path_, ".1").c_str()) != 0) {
    return absl::InternalError(absl::StrCat("rotate ", path_, ": ", strerror(errno)));
  }
  // Make the renames durable before records go to the new file (best effort:
  // the records themselves are fsynced as they are written).
  std::string dir = path_.substr(0, path_.rfind('/') == std::string::npos ? 0 : path_.rfind('/'));
  if (dir.empty()) dir = ".";
  SyncDirectory(dir).IgnoreError();
  return OpenFile();
}

absl::StatusOr<int64_t> AuditLog::Append(const AuditEvent& e) {
  std::lock_guard<std::mutex> lock(mu_);
  TESSERA_ASSIGN_OR_RETURN(const int64_t seq, AppendLocked(e));
  // A keyed log marks its progress with a checkpoint record every so many
  // records or so much time (of activity: checked as records arrive).
  ++since_checkpoint_;
  const absl::Time now = absl::Now();
  if (key_.has_value() && (since_checkpoint_ >= checkpoints_.every_records || now - last_checkpoint_ >= checkpoints_.every)) {
    AuditEvent checkpoint;
    checkpoint.time = now;
    checkpoint.method = kAuditCheckpointMethod;
    checkpoint.outcome = "OK";
    checkpoint.details_json = absl::StrCat("{\"records\":", seq, ",\"head\":\"", last_hash_, "\"}");
    TESSERA_RETURN_IF_ERROR(AppendLocked(checkpoint).status());
    since_checkpoint_ = 0;
    last_checkpoint_ = now;
  }
  return seq;
}

absl::StatusOr<int64_t> AuditLog::AppendLocked(const AuditEvent& e) {
  if (fd_ < 0) return absl::UnavailableError("audit log closed");
  if (size_ > 0 && size_ >= max_bytes_) {
    absl::Status s = Rotate();
    if (!s.ok()) return s;
  }
  const int64_t seq = next_seq_;
  std::string canonical = absl::StrCat(
      "{\"seq\":", seq, ",\"time\":", JsonQuote(absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", e.time, absl::UTCTimeZone())),
      ",\"principal\":", JsonQuote(e.principal), ",\"peer\":", JsonQuote(e.peer), ",\"method\":", JsonQuote(e.method),
      ",\"request_id\":", JsonQuote(e.request_id),
      e.gallery.empty() ? std::string() : absl::StrCat(",\"gallery\":", JsonQuote(e.gallery)),
      ",\"outcome\":", JsonQuote(e.outcome),
      e.trace_id.empty() ? std::string() : absl::StrCat(",\"trace_id\":", JsonQuote(e.trace_id)),
      ",\"details\":", e.details_json.empty() ? "{}" : e.details_json,
      key_.has_value() ? absl::StrCat(kKeyKey, key_->id, "\"") : std::string(), kPrevKey, last_hash_, "\"");
  const std::string hash = AuditLineHash(absl::StrCat(canonical, "}"), last_hash_, key_.has_value() ? &*key_ : nullptr);
  const std::string line = absl::StrCat(canonical, kHashKey, hash, "\"}\n");
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = write(fd_, line.data() + done, line.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(absl::StrCat("audit log write failed: ", strerror(errno)));
    }
    done += static_cast<size_t>(n);
  }
  if (fdatasync(fd_) != 0) return absl::UnavailableError(absl::StrCat("audit log fsync failed: ", strerror(errno)));
  size_ += static_cast<int64_t>(line.size());
  next_seq_ = seq + 1;
  last_hash_ = hash;
  return seq;
}

absl::StatusOr<std::vector<AuditRecord>> ReadAuditLog(const std::string& path) {
  std::vector<AuditRecord> out;
  for (const std::string& f : AuditLogFiles(path)) {
    absl::StatusOr<std::string> text = ReadWhole(f);
    if (!text.ok()) return text.status();
    for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
      absl::StatusOr<AuditRecord> r = ParseAuditLine(line);
      if (r.ok()) out.push_back(std::move(*r));
    }
  }
  return out;
}

absl::StatusOr<AuditVerifyResult> VerifyAuditLog(const std::string& path, const AuditVerifyOptions& options) {
  const std::vector<std::string> files = AuditLogFiles(path);
  if (files.empty()) return absl::NotFoundError(absl::StrCat("no audit log at ", path));
  struct Line {
    std::string file;
    int64_t no;
    absl::StatusOr<AuditRecord> rec;
  };
  std::vector<Line> lines;
  std::set<int64_t> seqs;
  for (const std::string& f : files) {
    absl::StatusOr<std::string> text = ReadWhole(f);
    if (!text.ok()) return text.status();
    int64_t no = 0;
    std::vector<absl::string_view> parts = absl::StrSplit(*text, '\n');
    if (!parts.empty() && parts.back().empty()) parts.pop_back();
    for (absl::string_view l : parts) {
      lines.push_back({f, ++no, ParseAuditLine(l)});
      if (lines.back().rec.ok()) seqs.insert(lines.back().rec->seq);
    }
  }
  AuditVerifyResult r;
  std::string prev = kGenesis;
  int64_t expected = -1;  // the first record's seq may be > 1 only if older files were removed: flag it
  for (const Line& l : lines) {
    auto fail = [&](int64_t seq, std::string why) {
      r.ok = false;
      r.first_bad_seq = seq;
      r.file = l.file;
      r.line = l.no;
      r.reason = std::move(why);
      return r;
    };
    if (!l.rec.ok()) return fail(expected < 0 ? 1 : expected, absl::StrCat("damaged line: ", l.rec.status().message()));
    const AuditRecord& rec = *l.rec;
    if (expected < 0) expected = 1;
    const size_t h = rec.line.rfind(kHashKey);
    const std::string canonical = absl::StrCat(rec.line.substr(0, h), "}");
    const AuditKey* key = nullptr;
    if (!rec.key_id.empty()) {
      for (const AuditKey& k : options.keys) {
        if (k.id == rec.key_id) key = &k;
      }
      if (key == nullptr && !options.keys.empty()) {
        return fail(rec.seq, absl::StrCat("keyed with key ", rec.key_id, ", which no --key-file given is"));
      }
      ++r.keyed_records;
    } else if (!options.keys.empty() && r.keyed_records > 0) {
      return fail(rec.seq, "unkeyed record after keyed ones: the chain was recomputed without the key (forged)");
    }
    if (key != nullptr || rec.key_id.empty()) {
      if (AuditLineHash(canonical, rec.prev_hash, key) != rec.hash) {
        return fail(rec.seq, key != nullptr ? "edited or forged: the record's keyed hash does not match its contents"
                                            : "edited: the record's hash does not match its contents");
      }
    }
    if (rec.seq > expected) {
      if (seqs.count(expected)) {
        return fail(expected, absl::StrCat("reordered: seq ", rec.seq, " comes before seq ", expected));
      }
      return fail(expected, absl::StrCat("deleted: records ", expected,
                                         rec.seq - 1 > expected ? absl::StrCat("..", rec.seq - 1) : std::string(),
                                         " are missing before seq ", rec.seq));
    }
    if (rec.seq < expected) {
      return fail(rec.seq, absl::StrCat("reordered: seq ", rec.seq, " comes after seq ", expected - 1));
    }
    if (rec.prev_hash != prev) {
      return fail(rec.seq, "chain broken: prev_hash is not the previous record's hash (a record was replaced)");
    }
    prev = rec.hash;
    r.last_seq = rec.seq;
    if (options.expect_head.has_value() && rec.seq == options.expect_head->first && rec.hash != options.expect_head->second) {
      return fail(rec.seq, "the record at the expected head has another hash (rewritten)");
    }
    ++expected;
    ++r.records;
  }
  r.last_hash = prev;
  if (!options.keys.empty() && r.keyed_records == 0) {
    r.ok = false;
    r.first_bad_seq = r.records > 0 ? 1 : 0;
    r.reason = "no record is keyed: the log was written or rewritten without the key";
  } else if (options.expect_head.has_value() && r.last_seq < options.expect_head->first) {
    r.ok = false;
    r.first_bad_seq = r.last_seq + 1;
    r.file = files.back();
    r.reason = absl::StrCat("cut: the log ends at seq ", r.last_seq, " but the expected head is seq ",
                            options.expect_head->first, " (records were removed from its end)");
  }
  return r;
}

}  // namespace tessera

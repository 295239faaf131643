// The durable fingerprint gallery: a directory holding an append-only log of
// records and, after compaction, a snapshot.
//
//   DIR/LOCK                 flock()ed while open: one process at a time
//   DIR/snapshot-<gen>       every live template at the moment log-<gen>
//                            was started, with its MCC cylinders (optional)
//   DIR/log-<gen>            enrolls and deletes since then
//
// Every record (log and snapshot) is framed as
//   u32 payload length | u32 CRC-32 (zlib) of the payload | payload
// (little endian). Log payloads: u8 kind (3 enroll, 4 delete, 5 enroll with
// metadata), u64 record number, the 32-byte SHA-256 of the previous record's
// payload (the hash chain), then
//   enroll: u16 id length, id, u8 format, u32 byte count, template bytes,
//           u16 minutia count, count x (f32 x, f32 y, f32 theta)
//   enroll with metadata: the same, then the metadata block
//           (template_metadata.h: subject, finger position, ...)
//   delete: u16 id length, id.
// A template without metadata is still written as kind 3, so galleries that
// never use metadata stay readable by older builds.
// Record numbers run 1, 2, ... across log files and compactions; the first
// record's previous hash is 32 zero bytes. Kinds 1 and 2 (the same fields
// without number and hash) are what galleries held before the chain: they are
// still read, counted as legacy_records, and allowed only before the first
// chained record (never migrated: their bytes stay as acknowledged).
// Snapshot: the header record "TSFPSNAP" u32 version (3; 1 and 2 are still
// read) u64 count u64 total persisted cylinders, then one
// enroll payload per template, in version 3 its metadata block, then u16
// cylinder count (0xFFFF: none persisted) and the cylinders (24 + 4 u64, f32
// x y theta, i32 minutia),
// then an end record "TSFPEND." u64 count, and in version 2 u64 record number
// and 32-byte hash of the last chained record the snapshot holds (the link the
// next log continues from).
//
// The chain makes an edited, deleted, reordered or inserted complete record
// (one whose CRC was fixed up too) DATA_LOSS naming the file, byte and record
// numbers, at Open and in Check. What it cannot show by itself: the last
// records cut off at a record boundary, or an edited last record. Anchor the
// chain head (GalleryOpenStats::chain_records / chain_head, printed by
// `tessera fp check`) outside the machine to detect those. Snapshot entries are
// covered by their CRCs only (compaction folds the records they came from).
//
// Durability: Enroll/Delete/EnrollBatch return only after write() and
// fdatasync() of the log. Group commit across requests: callers that arrive
// while a sync is in flight queue their records (chained, in arrival order,
// onto the tip of everything queued); when the sync ends, one of them writes
// the whole queue and syncs once for all. A failed write or sync fails the
// records it carried and every record queued behind them (they chain onto
// the failed ones), and none of them is applied.
// Open replays snapshot + logs. A torn record at the very end of the newest
// log (the file ends inside it: a write that was never acknowledged) is
// truncated away with a warning. A *complete* last record that fails its CRC
// may be an acknowledged enrollment or deletion damaged since, so it is never
// just dropped: its bytes are moved aside durably to
// DIR/damaged-log-<gen>-at-<offset>, the log is cut there, and the start logs
// an error naming the file (GalleryOpenStats::quarantined; `tessera fp check`
// lists them). A corrupt record anywhere else is DATA_LOSS naming the file
// and offset. Check() verifies a gallery without changing it. Compact() writes snapshot-<gen+1> durably (a
// temporary "*.tmp" beside it, fsynced, renamed, the directory fsynced:
// common/durable_file.h) and only then removes the old files; appends go to
// log-<gen+1> from the moment compaction starts, so enrolls keep flowing.
#ifndef TESSERA_SERVICES_FINGERPRINT_STORE_GALLERY_STORE_H_
#define TESSERA_SERVICES_FINGERPRINT_STORE_GALLERY_STORE_H_

#include <array>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/fingerprint/mcc.h"
#include "services/fingerprint/formats/template_io.h"
#include "services/fingerprint/store/template_metadata.h"

namespace tessera {
namespace fingerprint {

inline constexpr int kMaxGalleryIdLength = 256;
inline constexpr int64_t kMaxGalleryTemplateBytes = 1 << 20;

struct StoredTemplate {
  std::string id;
  TemplateFormat format = TemplateFormat::kUnknown;
  std::string bytes;                   // the template as enrolled
  std::vector<MinutiaPoint> minutiae;  // what the matchers use
  TemplateMetadata metadata;           // whose finger (may be empty)
  // Assigned by the store (in memory only): tells apart successive templates
  // enrolled under the same id (see CylinderSource).
  uint64_t seq = 0;
};

// INVALID_ARGUMENT for an empty or too long id (1-256 bytes, no control
// characters), too many minutiae or too many bytes, or bad metadata
// (ValidateTemplateMetadata).
absl::Status ValidateStoredTemplate(const StoredTemplate& t);

// During Open: called for each snapshot template whose cylinders were
// persisted (seq already assigned), before the logs are replayed.
using CylinderSink =
    std::function<void(const std::shared_ptr<const StoredTemplate>& t, MccTemplate&& cylinders)>;
// Before any CylinderSink call: how many templates and cylinders the
// snapshot holds (so the receiver can allocate once).
using ReserveHook = std::function<void(int64_t templates, int64_t cylinders)>;
// During Compact: the cylinders of template `t` (same seq), or false.
using CylinderSource = std::function<bool(const StoredTemplate& t, MccTemplate* out)>;

// The hash chain's end after a record: its number and the SHA-256 of its payload.
using ChainDigest = std::array<unsigned char, 32>;
struct ChainLink {
  uint64_t records = 0;  // the last record's number (0: none yet)
  ChainDigest head{};    // its payload's SHA-256 (zeros before the first)
};

// The head a Check was asked to find, and what it saw of it.
struct ExpectedChainHead {
  uint64_t records = 0;
  std::string head_hex;
  bool seen = false;        // chain record `records` was read
  bool matched = false;     // ... with that head
  bool compacted = false;   // a snapshot ends after it: not checkable
};

// Records written and fdatasync() calls made since Open (records / syncs is
// the group-commit factor).
struct GalleryCommitStats {
  int64_t records = 0;
  int64_t syncs = 0;
};

struct GalleryOpenStats {
  int64_t snapshot_templates = 0;
  int64_t snapshot_cylinder_templates = 0;  // with persisted cylinders
  int64_t log_records = 0;
  int64_t truncated_bytes = 0;  // torn tail dropped
  int64_t quarantined_bytes = 0;  // a damaged last record moved aside
  std::vector<std::string> quarantined;  // damaged-* files in the directory (old and new)
  std::string damaged_tail;  // Check() only: where the damaged last record is
  int64_t legacy_records = 0;  // log records from before the hash chain (kinds 1, 2)
  int64_t chain_records = 0;   // the number of the last chained record
  std::string chain_head;      // its hash (hex); 64 zeros when none
  double seconds = 0;
};

// What GalleryStore::Check found.
struct GalleryCheck {
  GalleryOpenStats stats;
  int64_t live_templates = 0;
  std::string error;  // why Open would refuse the gallery (DATA_LOSS), or empty
  // Nothing damaged or set aside (a torn tail is not damage: it was never acknowledged).
  bool clean() const { return error.empty() && stats.damaged_tail.empty() && stats.quarantined.empty(); }
};

class GalleryStore {
 public:
  // Creates DIR if missing (its parent must exist). FAILED_PRECONDITION when
  // another process has it open; DATA_LOSS for corruption (see above).
  static absl::StatusOr<std::unique_ptr<GalleryStore>> Open(const std::string& dir,
                                                            const CylinderSink& sink = nullptr,
                                                            const ReserveHook& reserve = nullptr);
  ~GalleryStore();
  GalleryStore(const GalleryStore&) = delete;
  GalleryStore& operator=(const GalleryStore&) = delete;

  // Durable when OK. ALREADY_EXISTS for a live id with other bytes unless
  // `replace`; the same id, format and bytes again is OK (a retry: the enrolled
  // template, nothing written). Returns
  // the stored template (with its seq).
  absl::StatusOr<std::shared_ptr<const StoredTemplate>> Enroll(StoredTemplate t, bool replace = false);
  // Group commit: one write and one fdatasync for the accepted items. Per
  // item: the stored template or its error (ALREADY_EXISTS, also for an id
  // repeated inside the batch; INVALID_ARGUMENT). A write/sync failure fails
  // the call and acknowledges nothing.
  absl::StatusOr<std::vector<absl::StatusOr<std::shared_ptr<const StoredTemplate>>>> EnrollBatch(
      std::vector<StoredTemplate> batch, bool replace = false);
  // NOT_FOUND for an unknown id. Durable when OK.
  absl::Status Delete(absl::string_view id);
  // Deletes every template of `subject` with one write and sync (one delete
  // record per template); returns their ids. Waits for commits in flight
  // first, so an enroll of the subject acknowledged before the call is
  // deleted too. NOT_FOUND when the subject has none. A crash during the
  // write may leave some of the subject's deletions applied and none
  // acknowledged: the caller retries.
  absl::StatusOr<std::vector<std::string>> DeleteSubject(absl::string_view subject);

  std::shared_ptr<const StoredTemplate> Get(absl::string_view id) const;  // null if absent
  std::vector<std::shared_ptr<const StoredTemplate>> Live() const;       // sorted by id
  // Up to `limit` ids greater than `after`, sorted.
  std::vector<std::string> ListIds(absl::string_view after, int limit) const;
  // The live templates of `subject`, sorted by id (empty: none).
  std::vector<std::shared_ptr<const StoredTemplate>> OfSubject(absl::string_view subject) const;
  // Up to `limit` subject ids greater than `after`, sorted, with their template counts.
  std::vector<std::pair<std::string, int64_t>> ListSubjects(absl::string_view after, int limit) const;
  size_t size() const;
  int64_t log_bytes() const;  // of the current log
  const std::string& dir() const { return dir_; }
  const GalleryOpenStats& open_stats() const { return open_stats_; }
  GalleryCommitStats commit_stats() const;

  // Tests of group commit: `hook` runs in the committing thread just before
  // each write + sync, without the lock; QueuedCommitsForTesting() counts the
  // requests waiting behind it.
  void SetBeforeSyncHookForTesting(std::function<void()> hook);
  size_t QueuedCommitsForTesting() const;

  // Reads DIR as Open would (snapshot, logs, every record's CRC and fields)
  // without locking, truncating or moving anything. NOT_FOUND without DIR.
  // With `expect_head` ("N:HEX", GalleryOpenStats' chain_records and
  // chain_head printed earlier by `tessera fp check`): the gallery must still
  // hold chain record N with that head, else check.error says why (records
  // cut from the end, or rewritten). A snapshot that compacted past N can
  // only confirm N when it ends exactly there.
  static absl::StatusOr<GalleryCheck> Check(const std::string& dir, const std::string& expect_head = "");

  // Writes a snapshot of the live templates (with cylinders from `source`
  // where it has them) and starts a new log. Enrolls and deletes may run
  // meanwhile (they go to the new log).
  absl::Status Compact(const CylinderSource& source = nullptr);

 private:
  GalleryStore(std::string dir, int lock_fd) : dir_(std::move(dir)), lock_fd_(lock_fd) {}
  // read_only: Check()'s pass (reports tails instead of cutting them).
  absl::Status Load(const CylinderSink& sink, const ReserveHook& reserve, bool read_only);
  absl::Status OpenLogLocked(uint64_t gen);
  // DATA_LOSS unless record `no` carrying `prev` follows chain_ (during Load).
  absl::Status CheckChainLink(const std::string& path, int64_t offset, uint64_t no, const ChainDigest& prev) const;
  // One request of the group commit: its framed records (already chained
  // onto tip_) and what to apply to live_ once they are durable.
  struct PendingCommit {
    std::string framed;
    int records = 0;
    std::vector<std::shared_ptr<StoredTemplate>> enrolls;
    std::vector<std::string> deleted_ids;  // a Delete's id, or a DeleteSubject's
    absl::Status status;
    bool done = false;
  };
  // Queues `commit` and returns once it is durable and applied (or failed);
  // the caller may lead the write of everything queued.
  absl::Status CommitLocked(PendingCommit* commit, std::unique_lock<std::mutex>& lock);
  void LeadCommitLocked(std::unique_lock<std::mutex>& lock);
  // Whether `id` is live once every queued record is applied.
  bool LiveAtTipLocked(absl::string_view id) const;
  // Writes `framed` at the end of the log (fd and size as given) and syncs;
  // on failure cuts the log back to `log_bytes`.
  absl::Status AppendAndSync(int fd, const std::string& path, int64_t log_bytes, const std::string& framed);
  void ApplyEnrollLocked(std::shared_ptr<StoredTemplate> t);
  void EraseLiveLocked(const std::string& id);

  const std::string dir_;
  int lock_fd_ = -1;
  std::mutex compact_mu_;  // one compaction at a time
  mutable std::mutex mu_;  // everything below
  int log_fd_ = -1;
  uint64_t log_gen_ = 0;
  int64_t log_bytes_ = 0;
  uint64_t next_seq_ = 1;
  ChainLink chain_;             // the last durable record's link
  ChainLink tip_;               // the last queued record's link (chain_ when none)
  std::vector<PendingCommit*> queue_;  // waiting for the next write + sync
  bool commit_in_flight_ = false;      // a leader is writing (log_fd_ stays put)
  std::condition_variable commit_cv_;
  // Ids whose state the queued or in-flight records change: live after them?
  std::optional<ExpectedChainHead> expect_head_;  // Check only
  std::map<std::string, bool, std::less<>> tip_live_;
  // The committed live template with t's id, format and bytes (a retried
  // enroll), or null.
  std::shared_ptr<const StoredTemplate> SameLiveTemplateLocked(const StoredTemplate& t) const;
  GalleryCommitStats commit_stats_;
  std::function<void()> before_sync_hook_;
  bool chain_started_ = false;  // a chained record or a version-2 snapshot was read
  std::map<std::string, std::shared_ptr<const StoredTemplate>, std::less<>> live_;
  // subject id -> ids of its live templates (templates with a subject only).
  std::map<std::string, std::set<std::string>, std::less<>> by_subject_;
  GalleryOpenStats open_stats_;
};

namespace gallery_internal {
// The framing and payload codecs, exposed for tests.
std::string FrameRecord(absl::string_view payload);
std::string EncodeEnroll(const StoredTemplate& t);  // legacy kind 1 (no metadata)
std::string EncodeDelete(absl::string_view id);
// A framed chained record (kind 3 / 4 for these) after `link`, which it advances.
std::string ChainRecord(uint8_t kind, absl::string_view fields, ChainLink* link);
std::string ChainedEnroll(const StoredTemplate& t, ChainLink* link);
std::string ChainedDelete(absl::string_view id, ChainLink* link);
std::string LogFileName(uint64_t gen);       // "log-0000000000000001"
std::string SnapshotFileName(uint64_t gen);  // "snapshot-0000000000000001"
}  // namespace gallery_internal

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_STORE_GALLERY_STORE_H_

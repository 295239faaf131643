#include "services/fingerprint/store/gallery_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/durable_file.h"
#include "common/log.h"
#include "common/parallel.h"
#include "common/status.h"
#include "common/text_checks.h"

namespace tessera {
namespace fingerprint {
namespace {

// Kinds 1 and 2 are what galleries held before the hash chain (still read).
constexpr uint8_t kEnrollRecord = 1;
constexpr uint8_t kDeleteRecord = 2;
constexpr uint8_t kChainedEnrollRecord = 3;
constexpr uint8_t kChainedDeleteRecord = 4;
constexpr uint8_t kChainedEnrollWithMetadataRecord = 5;
constexpr size_t kChainHeaderBytes = 1 + 8 + 32;  // kind, record number, previous hash
// Version 2 ends with the chain link the snapshot continues from; 1 has none.
// Version 3 adds each template's metadata block.
constexpr uint32_t kSnapshotVersion = 3;
constexpr char kSnapshotMagic[] = "TSFPSNAP";
constexpr char kSnapshotEnd[] = "TSFPEND.";
constexpr uint16_t kNoCylinders = 0xFFFF;
// Largest payload a writer produces (template bytes + minutiae + 255
// cylinders) with room to spare; a larger length field is corruption.
constexpr uint32_t kMaxPayload = (4u << 20);
constexpr size_t kCylinderBytes = (kMccBitWords + kMccMaskWords) * 8 + 4 * 4;

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  const int err = errno;
  const std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  if (err == ENOSPC || err == EDQUOT) return absl::ResourceExhaustedError(message);
  if (err == EACCES || err == EPERM || err == EROFS) return absl::PermissionDeniedError(message);
  if (err == ENOENT) return absl::NotFoundError(message);
  return absl::InternalError(message);
}

// --- little-endian encoding -------------------------------------------------

template <typename T>
void Put(std::string* out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // x86/ARM little endian; the format is LE
  out->append(b, sizeof(T));
}

class Cursor {
 public:
  explicit Cursor(absl::string_view data) : data_(data) {}
  template <typename T>
  bool Get(T* v) {
    if (data_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool Bytes(size_t n, std::string* out) {
    if (data_.size() - pos_ < n) return false;
    out->assign(data_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool Raw(void* dst, size_t n) {
    if (data_.size() - pos_ < n) return false;
    std::memcpy(dst, data_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool done() const { return pos_ == data_.size(); }
  bool Metadata(TemplateMetadata* m) { return ReadMetadataBlock(data_, &pos_, m); }

 private:
  absl::string_view data_;
  size_t pos_ = 0;
};

uint32_t Crc32(absl::string_view data) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes uInt lengths; payloads are < 4 MiB.
  return static_cast<uint32_t>(crc32(crc, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
}

ChainDigest Sha256Of(absl::string_view data) {
  ChainDigest d{};
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), d.data(), &len, EVP_sha256(), nullptr);
  return d;
}

std::string Hex(const ChainDigest& d) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : d) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

void AppendEnrollFields(const StoredTemplate& t, std::string* out) {
  Put<uint16_t>(out, static_cast<uint16_t>(t.id.size()));
  out->append(t.id);
  Put<uint8_t>(out, static_cast<uint8_t>(t.format));
  Put<uint32_t>(out, static_cast<uint32_t>(t.bytes.size()));
  out->append(t.bytes);
  Put<uint16_t>(out, static_cast<uint16_t>(t.minutiae.size()));
  for (const MinutiaPoint& m : t.minutiae) {
    Put<float>(out, m.x);
    Put<float>(out, m.y);
    Put<float>(out, m.theta);
  }
}

// The chained kind and fields of an enroll: kind 3 without metadata (what
// older builds read), kind 5 with its block.
uint8_t EnrollRecordFields(const StoredTemplate& t, std::string* out) {
  AppendEnrollFields(t, out);
  if (t.metadata.empty()) return kChainedEnrollRecord;
  AppendMetadataBlock(t.metadata, out);
  return kChainedEnrollWithMetadataRecord;
}

bool ReadEnrollFields(Cursor* c, StoredTemplate* t) {
  uint16_t id_len = 0, n = 0;
  uint8_t format = 0;
  uint32_t bytes_len = 0;
  if (!c->Get(&id_len) || !c->Bytes(id_len, &t->id) || !c->Get(&format) || !c->Get(&bytes_len) ||
      !c->Bytes(bytes_len, &t->bytes) || !c->Get(&n)) {
    return false;
  }
  if (format > static_cast<uint8_t>(TemplateFormat::kXyt)) return false;
  t->format = static_cast<TemplateFormat>(format);
  t->minutiae.resize(n);
  for (MinutiaPoint& m : t->minutiae) {
    if (!c->Get(&m.x) || !c->Get(&m.y) || !c->Get(&m.theta)) return false;
  }
  return true;
}

// One snapshot template entry, checked and decoded apart from the others.
struct SnapshotEntry {
  int64_t offset = 0;  // of its record
  uint32_t crc = 0;    // from the record header
  std::string payload;
  std::shared_ptr<StoredTemplate> t;
  MccTemplate cylinders;
  bool has_cylinders = false;
  const char* error = nullptr;  // why the entry is corrupt
};

void DecodeSnapshotEntry(uint32_t version, SnapshotEntry* e) {
  e->error = nullptr;
  if (Crc32(e->payload) != e->crc) {
    e->error = "CRC mismatch";
    return;
  }
  e->t = std::make_shared<StoredTemplate>();
  Cursor c(e->payload);
  uint16_t n_cyl = 0;
  if (!ReadEnrollFields(&c, e->t.get()) || (version >= 3 && !c.Metadata(&e->t->metadata)) || !c.Get(&n_cyl)) {
    e->error = "malformed template entry";
    return;
  }
  e->has_cylinders = n_cyl != kNoCylinders;
  e->cylinders = MccTemplate();
  if (e->has_cylinders) {
    e->cylinders.cylinders.resize(n_cyl);
    e->cylinders.num_minutiae = static_cast<int>(e->t->minutiae.size());
    for (MccCylinder& cyl : e->cylinders.cylinders) {
      if (!c.Raw(cyl.bits, sizeof(cyl.bits)) || !c.Raw(cyl.mask, sizeof(cyl.mask)) || !c.Get(&cyl.x) ||
          !c.Get(&cyl.y) || !c.Get(&cyl.theta) || !c.Get(&cyl.minutia)) {
        e->error = "malformed cylinders";
        return;
      }
    }
  }
  if (!c.done()) e->error = "trailing bytes in a template entry";
}

// --- reading framed records -------------------------------------------------

// Sequential reader of framed records; classifies what it finds at each offset.
class RecordReader {
 public:
  // kTornTail: the file ends inside a record (a write cut short: never
  // acknowledged). kDamagedTail: the last record is complete but fails its
  // CRC: a write whose data never reached the disk, or an acknowledged record
  // damaged since; the two cannot be told apart, so it is never just dropped.
  enum class Result { kRecord, kEnd, kTornTail, kDamagedTail, kCorrupt };

  static absl::StatusOr<std::unique_ptr<RecordReader>> Open(const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return ErrnoError("cannot open", path);
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
      std::fclose(f);
      return ErrnoError("cannot stat", path);
    }
    auto r = std::unique_ptr<RecordReader>(new RecordReader(f, st.st_size, path));
    std::setvbuf(f, nullptr, _IOFBF, 4 << 20);
    return r;
  }
  ~RecordReader() { std::fclose(f_); }

  // Reads the record at offset(); on kRecord, offset() moves past it.
  // verify_crc false: the caller checks the payload against crc() itself
  // (the snapshot checks its records in parallel).
  Result Next(std::string* payload, std::string* why, bool verify_crc = true) {
    const int64_t remaining = size_ - offset_;
    if (remaining == 0) return Result::kEnd;
    if (remaining < 8) {
      *why = absl::StrCat("header needs 8 bytes, ", remaining, " remain");
      return Result::kTornTail;
    }
    uint32_t header[2];
    if (std::fread(header, 4, 2, f_) != 2) {
      *why = "read error";
      return Result::kCorrupt;
    }
    const uint32_t len = header[0], crc = header[1];
    if (len == 0 || len > kMaxPayload) {
      if (len == 0 && crc == 0 && RestIsZero(remaining - 8)) {
        *why = "zero-filled tail";
        return Result::kTornTail;
      }
      *why = absl::StrCat("impossible record length ", len);
      return Result::kCorrupt;
    }
    if (int64_t{len} > remaining - 8) {
      *why = absl::StrCat("record of ", len, " bytes, ", remaining - 8, " remain");
      return Result::kTornTail;
    }
    payload->resize(len);
    if (std::fread(&(*payload)[0], 1, len, f_) != len) {
      *why = "read error";
      return Result::kCorrupt;
    }
    crc_ = crc;
    if (verify_crc && Crc32(*payload) != crc) {
      *why = "CRC mismatch";
      // Anything followed by more records is corruption.
      return int64_t{len} + 8 == remaining ? Result::kDamagedTail : Result::kCorrupt;
    }
    offset_ += 8 + len;
    return Result::kRecord;
  }

  int64_t offset() const { return offset_; }
  int64_t size() const { return size_; }
  uint32_t crc() const { return crc_; }  // of the last record read

 private:
  RecordReader(FILE* f, int64_t size, std::string path) : f_(f), size_(size), path_(std::move(path)) {}
  bool RestIsZero(int64_t n) {
    char buf[4096];
    while (n > 0) {
      const size_t want = static_cast<size_t>(std::min<int64_t>(n, sizeof(buf)));
      if (std::fread(buf, 1, want, f_) != want) return false;
      for (size_t i = 0; i < want; ++i) {
        if (buf[i] != 0) return false;
      }
      n -= want;
    }
    return true;
  }

  FILE* f_;
  int64_t size_;
  int64_t offset_ = 0;
  uint32_t crc_ = 0;
  std::string path_;
};

// Generation numbers of the files named `prefix`<16 digits> in `dir`.
struct DirListing {
  std::vector<uint64_t> snapshots, logs;
  std::vector<std::string> temporaries;
  std::vector<std::string> quarantined;  // paths of damaged-* files
};

absl::StatusOr<DirListing> ListDir(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return ErrnoError("cannot list", dir);
  DirListing out;
  while (struct dirent* e = readdir(d)) {
    const absl::string_view name = e->d_name;
    uint64_t gen = 0;
    if (absl::EndsWith(name, ".tmp")) {
      out.temporaries.push_back(std::string(name));
    } else if (absl::StartsWith(name, "damaged-")) {
      out.quarantined.push_back(absl::StrCat(dir, "/", name));
    } else if (absl::StartsWith(name, "snapshot-") && absl::SimpleAtoi(name.substr(9), &gen)) {
      out.snapshots.push_back(gen);
    } else if (absl::StartsWith(name, "log-") && absl::SimpleAtoi(name.substr(4), &gen)) {
      out.logs.push_back(gen);
    }
  }
  closedir(d);
  std::sort(out.snapshots.begin(), out.snapshots.end());
  std::sort(out.logs.begin(), out.logs.end());
  std::sort(out.quarantined.begin(), out.quarantined.end());
  return out;
}

// Copies bytes [offset, end) of `path` to DIR/damaged-log-<gen>-at-<offset>
// (durably), then truncates `path` to `offset`. Returns the new file's path.
absl::StatusOr<std::string> QuarantineTail(const std::string& path, uint64_t gen, int64_t offset) {
  const std::string dir = path.substr(0, path.rfind('/'));
  const std::string aside = absl::StrCat(dir, "/damaged-log-", gen, "-at-", offset);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    in.seekg(offset);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (in.bad()) return ErrnoError("cannot read", path);
  }
  TESSERA_RETURN_IF_ERROR(WriteFileDurably(aside, bytes));
  if (truncate(path.c_str(), offset) != 0) return ErrnoError("cannot truncate", path);
  return aside;
}

}  // namespace

namespace gallery_internal {

std::string FrameRecord(absl::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 8);
  Put<uint32_t>(&out, static_cast<uint32_t>(payload.size()));
  Put<uint32_t>(&out, Crc32(payload));
  out.append(payload.data(), payload.size());
  return out;
}

std::string EncodeEnroll(const StoredTemplate& t) {
  std::string out;
  Put<uint8_t>(&out, kEnrollRecord);
  AppendEnrollFields(t, &out);
  return out;
}

std::string EncodeDelete(absl::string_view id) {
  std::string out;
  Put<uint8_t>(&out, kDeleteRecord);
  Put<uint16_t>(&out, static_cast<uint16_t>(id.size()));
  out.append(id.data(), id.size());
  return out;
}

std::string ChainRecord(uint8_t kind, absl::string_view fields, ChainLink* link) {
  std::string payload;
  payload.reserve(kChainHeaderBytes + fields.size());
  Put<uint8_t>(&payload, kind);
  Put<uint64_t>(&payload, link->records + 1);
  payload.append(reinterpret_cast<const char*>(link->head.data()), link->head.size());
  payload.append(fields.data(), fields.size());
  link->records += 1;
  link->head = Sha256Of(payload);
  return FrameRecord(payload);
}

std::string ChainedEnroll(const StoredTemplate& t, ChainLink* link) {
  std::string fields;
  const uint8_t kind = EnrollRecordFields(t, &fields);
  return ChainRecord(kind, fields, link);
}

std::string ChainedDelete(absl::string_view id, ChainLink* link) {
  return ChainRecord(kChainedDeleteRecord, EncodeDelete(id).substr(1), link);
}

std::string LogFileName(uint64_t gen) { return absl::StrFormat("log-%016d", gen); }
std::string SnapshotFileName(uint64_t gen) { return absl::StrFormat("snapshot-%016d", gen); }

}  // namespace gallery_internal

using gallery_internal::EncodeDelete;
using gallery_internal::EncodeEnroll;
using gallery_internal::FrameRecord;

absl::Status ValidateStoredTemplate(const StoredTemplate& t) {
  if (t.id.empty() || t.id.size() > kMaxGalleryIdLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("template id must be 1-", kMaxGalleryIdLength, " bytes, got ", t.id.size()));
  }
  TESSERA_RETURN_IF_ERROR(CheckIdentifierText(t.id, "template id"));
  TESSERA_RETURN_IF_ERROR(ValidateTemplateMetadata(t.metadata));
  if (static_cast<int64_t>(t.bytes.size()) > kMaxGalleryTemplateBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("template of ", t.bytes.size(), " bytes; the limit is ", kMaxGalleryTemplateBytes));
  }
  if (t.minutiae.size() > static_cast<size_t>(kMccMaxMinutiae)) {
    return absl::InvalidArgumentError(
        absl::StrCat("template with ", t.minutiae.size(), " minutiae; the limit is ", kMccMaxMinutiae));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<GalleryStore>> GalleryStore::Open(const std::string& dir, const CylinderSink& sink,
                                                                 const ReserveHook& reserve) {
  if (dir.empty()) return absl::InvalidArgumentError("gallery directory is empty");
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoError("cannot create gallery directory", dir);
  const std::string lock_path = dir + "/LOCK";
  const int lock_fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) return ErrnoError("cannot open", lock_path);
  if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    close(lock_fd);
    return absl::FailedPreconditionError(absl::StrCat("gallery ", dir, " is in use by another process"));
  }
  std::unique_ptr<GalleryStore> store(new GalleryStore(dir, lock_fd));
  TESSERA_RETURN_IF_ERROR(store->Load(sink, reserve, /*read_only=*/false));
  return store;
}

absl::StatusOr<GalleryCheck> GalleryStore::Check(const std::string& dir, const std::string& expect_head) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat("no gallery directory ", dir));
  }
  // No lock: a serving process may hold it; a record being appended then
  // shows as a torn tail.
  std::unique_ptr<GalleryStore> store(new GalleryStore(dir, -1));
  if (!expect_head.empty()) {
    const size_t colon = expect_head.find(':');
    ExpectedChainHead want;
    if (colon == std::string::npos || !absl::SimpleAtoi(expect_head.substr(0, colon), &want.records) ||
        want.records == 0 || expect_head.size() - colon - 1 != 64) {
      return absl::InvalidArgumentError("a gallery head is N:HEX (chain_records:chain_head, as fp check prints them)");
    }
    want.head_hex = expect_head.substr(colon + 1);
    store->expect_head_ = want;
  }
  GalleryCheck check;
  const absl::Status loaded = store->Load(nullptr, nullptr, /*read_only=*/true);
  if (!loaded.ok()) check.error = std::string(loaded.message());
  if (loaded.ok() && store->expect_head_.has_value()) {
    const ExpectedChainHead& want = *store->expect_head_;
    if (!want.seen && !want.compacted) {
      check.error = absl::StrCat("cut: the gallery's chain ends at record ", store->chain_.records,
                                 " but the expected head is record ", want.records, " (records removed from its end)");
    } else if (want.seen && !want.matched) {
      check.error = absl::StrCat("chain record ", want.records, " has another head than expected (rewritten)");
    } else if (want.compacted) {
      check.error = absl::StrCat("a snapshot compacted past record ", want.records,
                                 ": check against a head taken after the last compaction");
    }
  }
  check.stats = store->open_stats_;
  check.live_templates = static_cast<int64_t>(store->live_.size());
  return check;
}

GalleryStore::~GalleryStore() {
  if (log_fd_ >= 0) close(log_fd_);
  if (lock_fd_ >= 0) close(lock_fd_);  // releases the flock
}

void GalleryStore::ApplyEnrollLocked(std::shared_ptr<StoredTemplate> t) {
  t->seq = next_seq_++;
  EraseLiveLocked(t->id);  // a replaced template leaves its subject
  if (!t->metadata.subject_id.empty()) by_subject_[t->metadata.subject_id].insert(t->id);
  std::string id = t->id;
  live_[std::move(id)] = std::move(t);
}

void GalleryStore::EraseLiveLocked(const std::string& id) {
  auto it = live_.find(id);
  if (it == live_.end()) return;
  const std::string& subject = it->second->metadata.subject_id;
  if (!subject.empty()) {
    auto s = by_subject_.find(subject);
    if (s != by_subject_.end()) {
      s->second.erase(id);
      if (s->second.empty()) by_subject_.erase(s);
    }
  }
  live_.erase(it);
}

absl::Status GalleryStore::CheckChainLink(const std::string& path, int64_t offset, uint64_t no,
                                          const ChainDigest& prev) const {
  const uint64_t expected = chain_.records + 1;
  const std::string where = absl::StrCat("gallery log ", path, " at byte ", offset, ": hash chain broken: ");
  if (no > expected) {
    return absl::DataLossError(absl::StrCat(where, "record ", no, " follows record ", chain_.records, " (record",
                                            no - 1 > expected ? absl::StrCat("s ", expected, "..", no - 1)
                                                              : absl::StrCat(" ", expected),
                                            " deleted or moved)"));
  }
  if (no < expected) {
    return absl::DataLossError(
        absl::StrCat(where, "record ", no, " comes after record ", chain_.records, " (reordered or repeated)"));
  }
  if (prev != chain_.head) {
    return absl::DataLossError(absl::StrCat(where, "record ", no, " does not carry the hash of record ", no - 1,
                                            no == 1 ? " (the chain's start)" : "",
                                            " (that record was edited or replaced)"));
  }
  return absl::OkStatus();
}

absl::Status GalleryStore::Load(const CylinderSink& sink, const ReserveHook& reserve, bool read_only) {
  const auto start = std::chrono::steady_clock::now();
  TESSERA_ASSIGN_OR_RETURN(DirListing listing, ListDir(dir_));
  open_stats_.quarantined = listing.quarantined;
  for (const std::string& tmp : listing.temporaries) {
    // An interrupted compaction: the old snapshot and logs are still there.
    if (!read_only) std::remove((dir_ + "/" + tmp).c_str());
  }
  const uint64_t snapshot_gen = listing.snapshots.empty() ? 0 : listing.snapshots.back();
  std::string payload, why;
  if (snapshot_gen > 0) {
    const std::string path = dir_ + "/" + gallery_internal::SnapshotFileName(snapshot_gen);
    TESSERA_ASSIGN_OR_RETURN(auto reader, RecordReader::Open(path));
    auto corrupt = [&](absl::string_view what) {
      return absl::DataLossError(absl::StrCat("gallery snapshot ", path, " at byte ", reader->offset(), ": ", what));
    };
    if (reader->Next(&payload, &why) != RecordReader::Result::kRecord || payload.size() != 28 ||
        payload.compare(0, 8, kSnapshotMagic) != 0) {
      return corrupt(why.empty() ? "not a gallery snapshot" : why);
    }
    uint32_t version = 0;
    uint64_t count = 0, total_cylinders = 0;
    std::memcpy(&version, payload.data() + 8, 4);
    std::memcpy(&count, payload.data() + 12, 8);
    std::memcpy(&total_cylinders, payload.data() + 20, 8);
    if (version < 1 || version > kSnapshotVersion) return corrupt(absl::StrCat("unsupported version ", version));
    if (reserve) reserve(static_cast<int64_t>(count), static_cast<int64_t>(total_cylinders));
    // Records are read in order, then checked (CRC) and decoded on all
    // cores a batch at a time, then applied in order.
    constexpr uint64_t kBatch = 4096;
    std::vector<SnapshotEntry> batch(std::min<uint64_t>(count, kBatch));
    for (uint64_t first = 0; first < count; first += kBatch) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kBatch, count - first));
      for (size_t k = 0; k < n; ++k) {
        batch[k].offset = reader->offset();
        if (reader->Next(&batch[k].payload, &why, /*verify_crc=*/false) != RecordReader::Result::kRecord) {
          return corrupt(why.empty() ? "ends early" : why);
        }
        batch[k].crc = reader->crc();
      }
      ParallelFor(
          static_cast<int64_t>(n), [&](int64_t begin, int64_t end, int) {
            for (int64_t k = begin; k < end; ++k) DecodeSnapshotEntry(version, &batch[k]);
          },
          /*min_per_chunk=*/256);
      for (size_t k = 0; k < n; ++k) {
        SnapshotEntry& e = batch[k];
        if (e.error != nullptr) {
          return absl::DataLossError(absl::StrCat("gallery snapshot ", path, " at byte ", e.offset, ": ", e.error));
        }
        if (live_.count(e.t->id)) {
          return absl::DataLossError(
              absl::StrCat("gallery snapshot ", path, " at byte ", e.offset, ": duplicate id '", e.t->id, "'"));
        }
        ApplyEnrollLocked(e.t);
        ++open_stats_.snapshot_templates;
        if (e.has_cylinders) {
          ++open_stats_.snapshot_cylinder_templates;
          if (sink) sink(e.t, std::move(e.cylinders));
        }
        e.t.reset();
      }
    }
    const size_t end_size = version == 1 ? 16 : 16 + 8 + 32;
    if (reader->Next(&payload, &why) != RecordReader::Result::kRecord || payload.size() != end_size ||
        payload.compare(0, 8, kSnapshotEnd) != 0 || std::memcmp(payload.data() + 8, &count, 8) != 0) {
      return corrupt("missing end record");
    }
    if (version >= 2) {
      // The chain link the logs after this snapshot continue from.
      std::memcpy(&chain_.records, payload.data() + 16, 8);
      std::memcpy(chain_.head.data(), payload.data() + 24, 32);
      chain_started_ = true;
      if (expect_head_.has_value() && chain_.records >= expect_head_->records) {
        if (chain_.records == expect_head_->records) {
          expect_head_->seen = true;
          expect_head_->matched = Hex(chain_.head) == expect_head_->head_hex;
        } else {
          expect_head_->compacted = true;
        }
      }
    }
    if (reader->offset() != reader->size()) return corrupt("data after the end record");
  }

  std::vector<uint64_t> logs;
  for (uint64_t gen : listing.logs) {
    if (gen >= snapshot_gen) logs.push_back(gen);
  }
  for (size_t li = 0; li < logs.size(); ++li) {
    const std::string path = dir_ + "/" + gallery_internal::LogFileName(logs[li]);
    const bool newest = li + 1 == logs.size();
    TESSERA_ASSIGN_OR_RETURN(auto reader, RecordReader::Open(path));
    for (;;) {
      const int64_t offset = reader->offset();
      const RecordReader::Result r = reader->Next(&payload, &why);
      if (r == RecordReader::Result::kEnd) break;
      if (r == RecordReader::Result::kTornTail && newest) {
        // Never acknowledged (the sync did not complete): drop it.
        const int64_t dropped = reader->size() - offset;
        open_stats_.truncated_bytes += dropped;
        if (read_only) break;
        TESSERA_LOG(WARNING) << "gallery log " << path << ": dropping a torn record at byte " << offset << " ("
                             << why << "; " << dropped << " bytes, never acknowledged)";
        if (truncate(path.c_str(), offset) != 0) return ErrnoError("cannot truncate", path);
        break;
      }
      if (r == RecordReader::Result::kDamagedTail && newest) {
        // Possibly an acknowledged enrollment or deletion: evidence. Its bytes
        // move aside (durably) before the log is cut, and the start says so.
        const int64_t damaged = reader->size() - offset;
        open_stats_.quarantined_bytes += damaged;
        if (read_only) {
          open_stats_.damaged_tail = absl::StrCat(path, " at byte ", offset, ": ", why, " (", damaged, " bytes)");
          break;
        }
        TESSERA_ASSIGN_OR_RETURN(std::string aside, QuarantineTail(path, logs[li], offset));
        TESSERA_LOG(ERROR) << "gallery log " << path << ": the last record (byte " << offset << ", " << damaged
                           << " bytes) is complete but fails its CRC; it may be an acknowledged enrollment or "
                              "deletion, so it is NOT applied and its bytes are preserved in "
                           << aside << " (inspect with `tessera fp check --gallery " << dir_ << "`)";
        open_stats_.quarantined.push_back(aside);
        break;
      }
      if (r != RecordReader::Result::kRecord) {
        return absl::DataLossError(absl::StrCat("gallery log ", path, " is corrupt at byte ", offset, ": ", why));
      }
      Cursor c(payload);
      uint8_t kind = 0;
      c.Get(&kind);
      const bool with_metadata = kind == kChainedEnrollWithMetadataRecord;
      if (kind == kChainedEnrollRecord || kind == kChainedDeleteRecord || with_metadata) {
        uint64_t no = 0;
        ChainDigest prev{};
        if (!c.Get(&no) || !c.Raw(prev.data(), prev.size())) {
          return absl::DataLossError(absl::StrCat("gallery log ", path, " at byte ", offset, ": malformed chain header"));
        }
        TESSERA_RETURN_IF_ERROR(CheckChainLink(path, offset, no, prev));
        chain_.records = no;
        chain_.head = Sha256Of(payload);
        chain_started_ = true;
        if (expect_head_.has_value() && no == expect_head_->records) {
          expect_head_->seen = true;
          expect_head_->matched = Hex(chain_.head) == expect_head_->head_hex;
        }
        kind = kind == kChainedDeleteRecord ? kDeleteRecord : kEnrollRecord;  // the same fields follow
      } else if (kind == kEnrollRecord || kind == kDeleteRecord) {
        if (chain_started_) {
          return absl::DataLossError(absl::StrCat(
              "gallery log ", path, " at byte ", offset, ": a record without the hash chain after chained record ",
              chain_.records, " (only galleries written before the chain hold such records: inserted?)"));
        }
        ++open_stats_.legacy_records;
      }
      if (kind == kEnrollRecord) {
        auto t = std::make_shared<StoredTemplate>();
        if (!ReadEnrollFields(&c, t.get()) || (with_metadata && !c.Metadata(&t->metadata)) || !c.done()) {
          return absl::DataLossError(absl::StrCat("gallery log ", path, " at byte ", offset, ": malformed enroll"));
        }
        ApplyEnrollLocked(std::move(t));
      } else if (kind == kDeleteRecord) {
        uint16_t len = 0;
        std::string id;
        if (!c.Get(&len) || !c.Bytes(len, &id) || !c.done()) {
          return absl::DataLossError(absl::StrCat("gallery log ", path, " at byte ", offset, ": malformed delete"));
        }
        EraseLiveLocked(id);
      } else {
        return absl::DataLossError(
            absl::StrCat("gallery log ", path, " at byte ", offset, ": unknown record kind ", int{kind}));
      }
      ++open_stats_.log_records;
    }
  }
  open_stats_.chain_records = static_cast<int64_t>(chain_.records);
  open_stats_.chain_head = Hex(chain_.head);
  if (read_only) {
    open_stats_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return absl::OkStatus();
  }
  // Files an interrupted compaction left behind, now superseded.
  for (uint64_t gen : listing.snapshots) {
    if (gen < snapshot_gen) std::remove((dir_ + "/" + gallery_internal::SnapshotFileName(gen)).c_str());
  }
  for (uint64_t gen : listing.logs) {
    if (gen < snapshot_gen) std::remove((dir_ + "/" + gallery_internal::LogFileName(gen)).c_str());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    TESSERA_RETURN_IF_ERROR(OpenLogLocked(logs.empty() ? std::max<uint64_t>(snapshot_gen, 1) : logs.back()));
    tip_ = chain_;
  }
  open_stats_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return absl::OkStatus();
}

absl::Status GalleryStore::OpenLogLocked(uint64_t gen) {
  const std::string path = dir_ + "/" + gallery_internal::LogFileName(gen);
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot open", path);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return ErrnoError("cannot stat", path);
  }
  if (st.st_size == 0) {
    // A new file: make its directory entry durable before acknowledging
    // anything written to it.
    absl::Status synced = SyncDirectory(dir_);
    if (!synced.ok()) {
      close(fd);
      return synced;
    }
  }
  if (log_fd_ >= 0) close(log_fd_);
  log_fd_ = fd;
  log_gen_ = gen;
  log_bytes_ = st.st_size;
  return absl::OkStatus();
}

absl::Status GalleryStore::AppendAndSync(int fd, const std::string& path, int64_t log_bytes,
                                         const std::string& framed) {
  size_t done = 0;
  absl::Status status;
  while (done < framed.size()) {
    const ssize_t n = write(fd, framed.data() + done, framed.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      status = ErrnoError("cannot write", path);
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (status.ok() && fdatasync(fd) != 0) status = ErrnoError("cannot fdatasync", path);
  if (!status.ok()) {
    // Take back the partial write so later records do not follow garbage.
    if (ftruncate(fd, log_bytes) != 0) {
      TESSERA_LOG(ERROR) << "gallery log " << path << ": cannot truncate after a failed write: "
                         << std::strerror(errno);
    }
  }
  return status;
}

bool GalleryStore::LiveAtTipLocked(absl::string_view id) const {
  auto it = tip_live_.find(id);
  return it != tip_live_.end() ? it->second : live_.count(id) > 0;
}

std::shared_ptr<const StoredTemplate> GalleryStore::SameLiveTemplateLocked(const StoredTemplate& t) const {
  if (tip_live_.count(t.id) > 0) return nullptr;  // a commit of that id is in flight: not settled
  auto it = live_.find(t.id);
  if (it == live_.end() || it->second->format != t.format || it->second->bytes != t.bytes ||
      it->second->metadata != t.metadata) {
    return nullptr;
  }
  return it->second;
}

absl::Status GalleryStore::CommitLocked(PendingCommit* commit, std::unique_lock<std::mutex>& lock) {
  queue_.push_back(commit);
  while (!commit->done) {
    if (commit_in_flight_) {
      commit_cv_.wait(lock);
    } else {
      LeadCommitLocked(lock);  // writes this request's records and all queued before it
    }
  }
  return commit->status;
}

void GalleryStore::LeadCommitLocked(std::unique_lock<std::mutex>& lock) {
  commit_in_flight_ = true;
  std::vector<PendingCommit*> batch;
  batch.swap(queue_);
  const ChainLink end = tip_;  // the queue is the whole chain from chain_ to tip_
  std::string all;
  int records = 0;
  for (const PendingCommit* c : batch) {
    all += c->framed;
    records += c->records;
  }
  const int fd = log_fd_;
  const int64_t log_bytes = log_bytes_;
  const std::string path = dir_ + "/" + gallery_internal::LogFileName(log_gen_);
  const std::function<void()> hook = before_sync_hook_;
  lock.unlock();  // others queue behind this write + sync
  if (hook) hook();
  const absl::Status status = all.empty() ? absl::OkStatus() : AppendAndSync(fd, path, log_bytes, all);
  lock.lock();
  commit_in_flight_ = false;
  ++commit_stats_.syncs;
  if (status.ok()) {
    commit_stats_.records += records;
    log_bytes_ += static_cast<int64_t>(all.size());
    chain_ = end;
    for (PendingCommit* c : batch) {
      for (auto& t : c->enrolls) ApplyEnrollLocked(t);
      for (const std::string& id : c->deleted_ids) EraseLiveLocked(id);
    }
  } else {
    // What queued meanwhile chains onto the records that were not written.
    for (PendingCommit* c : queue_) {
      c->status = absl::Status(status.code(), absl::StrCat("not written: an earlier record of the same group commit "
                                                           "failed: ", status.message()));
      c->done = true;
    }
    queue_.clear();
    tip_ = chain_;
  }
  for (PendingCommit* c : batch) {
    c->status = status;
    c->done = true;
  }
  if (queue_.empty()) tip_live_.clear();  // live_ is the tip again
  commit_cv_.notify_all();
}

absl::StatusOr<std::shared_ptr<const StoredTemplate>> GalleryStore::Enroll(StoredTemplate t, bool replace) {
  TESSERA_RETURN_IF_ERROR(ValidateStoredTemplate(t));
  std::string fields;
  const uint8_t kind = EnrollRecordFields(t, &fields);
  auto stored = std::make_shared<StoredTemplate>(std::move(t));
  std::unique_lock<std::mutex> lock(mu_);
  if (!replace && LiveAtTipLocked(stored->id)) {
    // The same bytes again is a retry (of a stream that failed after part of
    // its batch committed): the enrolled template, nothing written.
    if (std::shared_ptr<const StoredTemplate> same = SameLiveTemplateLocked(*stored)) return same;
    return absl::AlreadyExistsError(absl::StrCat("template ", QuoteBounded(stored->id),
                                                 " is already enrolled with other bytes or metadata (replace to "
                                                 "overwrite)"));
  }
  PendingCommit commit;
  commit.framed = gallery_internal::ChainRecord(kind, fields, &tip_);
  commit.records = 1;
  commit.enrolls.push_back(stored);
  tip_live_[stored->id] = true;
  TESSERA_RETURN_IF_ERROR(CommitLocked(&commit, lock));
  return std::shared_ptr<const StoredTemplate>(stored);
}

absl::StatusOr<std::vector<absl::StatusOr<std::shared_ptr<const StoredTemplate>>>> GalleryStore::EnrollBatch(
    std::vector<StoredTemplate> batch, bool replace) {
  std::vector<absl::StatusOr<std::shared_ptr<const StoredTemplate>>> results(batch.size());
  std::vector<std::string> fields(batch.size());  // chained (hashed, framed) under the lock, in order
  std::vector<uint8_t> kinds(batch.size(), 0);
  for (size_t i = 0; i < batch.size(); ++i) {
    absl::Status valid = ValidateStoredTemplate(batch[i]);
    if (valid.ok()) {
      kinds[i] = EnrollRecordFields(batch[i], &fields[i]);
    } else {
      results[i] = valid;
    }
  }
  std::unique_lock<std::mutex> lock(mu_);
  PendingCommit commit;
  std::vector<size_t> accepted;
  std::set<absl::string_view> in_batch;  // an id repeated inside the batch is taken
  for (size_t i = 0; i < batch.size(); ++i) {
    if (fields[i].empty()) continue;
    const std::string& id = batch[i].id;
    if (!in_batch.count(id) && !replace && LiveAtTipLocked(id)) {
      if (std::shared_ptr<const StoredTemplate> same = SameLiveTemplateLocked(batch[i])) {
        results[i] = same;  // a retry: already there, nothing written
        continue;
      }
    }
    if (in_batch.count(id) || (!replace && LiveAtTipLocked(id))) {
      results[i] = absl::AlreadyExistsError(absl::StrCat(
          "template ", QuoteBounded(id), " is already enrolled with other bytes or metadata (replace to overwrite)"));
      continue;
    }
    accepted.push_back(i);
    commit.framed += gallery_internal::ChainRecord(kinds[i], fields[i], &tip_);
    ++commit.records;
    commit.enrolls.push_back(std::make_shared<StoredTemplate>(std::move(batch[i])));
    in_batch.insert(commit.enrolls.back()->id);  // the moved-to copy: stable
    tip_live_[commit.enrolls.back()->id] = true;
  }
  if (commit.records == 0) return results;
  TESSERA_RETURN_IF_ERROR(CommitLocked(&commit, lock));
  for (size_t k = 0; k < accepted.size(); ++k) results[accepted[k]] = std::shared_ptr<const StoredTemplate>(commit.enrolls[k]);
  return results;
}

absl::Status GalleryStore::Delete(absl::string_view id) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!LiveAtTipLocked(id)) return absl::NotFoundError(absl::StrCat("no template ", QuoteBounded(id), " in the gallery"));
  PendingCommit commit;
  commit.framed = gallery_internal::ChainedDelete(id, &tip_);
  commit.records = 1;
  commit.deleted_ids.push_back(std::string(id));
  tip_live_[commit.deleted_ids.back()] = false;
  return CommitLocked(&commit, lock);
}

absl::StatusOr<std::vector<std::string>> GalleryStore::DeleteSubject(absl::string_view subject) {
  std::unique_lock<std::mutex> lock(mu_);
  // live_ is the tip once nothing is queued or being written.
  commit_cv_.wait(lock, [this] { return queue_.empty() && !commit_in_flight_; });
  auto it = by_subject_.find(subject);
  if (subject.empty() || it == by_subject_.end()) {
    return absl::NotFoundError(absl::StrCat("no templates of subject ", QuoteBounded(subject), " in the gallery"));
  }
  PendingCommit commit;
  for (const std::string& id : it->second) {
    commit.framed += gallery_internal::ChainedDelete(id, &tip_);
    ++commit.records;
    commit.deleted_ids.push_back(id);
    tip_live_[id] = false;
  }
  std::vector<std::string> ids = commit.deleted_ids;
  TESSERA_RETURN_IF_ERROR(CommitLocked(&commit, lock));
  return ids;
}

GalleryCommitStats GalleryStore::commit_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return commit_stats_;
}

void GalleryStore::SetBeforeSyncHookForTesting(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  before_sync_hook_ = std::move(hook);
}

size_t GalleryStore::QueuedCommitsForTesting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

std::shared_ptr<const StoredTemplate> GalleryStore::Get(absl::string_view id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(id);
  return it == live_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<const StoredTemplate>> GalleryStore::Live() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<const StoredTemplate>> out;
  out.reserve(live_.size());
  for (const auto& [id, t] : live_) out.push_back(t);
  return out;
}

std::vector<std::string> GalleryStore::ListIds(absl::string_view after, int limit) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (auto it = after.empty() ? live_.begin() : live_.upper_bound(after);
       it != live_.end() && static_cast<int>(out.size()) < limit; ++it) {
    out.push_back(it->first);
  }
  return out;
}

std::vector<std::shared_ptr<const StoredTemplate>> GalleryStore::OfSubject(absl::string_view subject) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<const StoredTemplate>> out;
  auto it = by_subject_.find(subject);
  if (it == by_subject_.end()) return out;
  for (const std::string& id : it->second) out.push_back(live_.find(id)->second);
  return out;
}

std::vector<std::pair<std::string, int64_t>> GalleryStore::ListSubjects(absl::string_view after, int limit) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<std::string, int64_t>> out;
  for (auto it = after.empty() ? by_subject_.begin() : by_subject_.upper_bound(after);
       it != by_subject_.end() && static_cast<int>(out.size()) < limit; ++it) {
    out.emplace_back(it->first, static_cast<int64_t>(it->second.size()));
  }
  return out;
}

size_t GalleryStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_.size();
}

int64_t GalleryStore::log_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return log_bytes_;
}

absl::Status GalleryStore::Compact(const CylinderSource& source) {
  std::lock_guard<std::mutex> compact_lock(compact_mu_);
  std::vector<std::shared_ptr<const StoredTemplate>> captured;
  uint64_t gen = 0;
  ChainLink at_capture;  // the new log's records chain on from here
  {
    // From here on appends go to the new log; the snapshot holds exactly
    // what the old logs did.
    std::unique_lock<std::mutex> lock(mu_);
    // A leader writes to log_fd_ without the lock: let it finish. What is
    // queued chains from chain_ and goes to the new log.
    commit_cv_.wait(lock, [this] { return !commit_in_flight_; });
    gen = log_gen_ + 1;
    TESSERA_RETURN_IF_ERROR(OpenLogLocked(gen));
    at_capture = chain_;
    captured.reserve(live_.size());
    for (const auto& [id, t] : live_) captured.push_back(t);
  }
  const std::string final_path = dir_ + "/" + gallery_internal::SnapshotFileName(gen);
  auto write_snapshot = [&](const std::string& tmp_path) {
    FILE* f = std::fopen(tmp_path.c_str(), "wb");
    if (f == nullptr) return ErrnoError("cannot create", tmp_path);
    std::setvbuf(f, nullptr, _IOFBF, 4 << 20);
    bool ok = true;
    auto write = [&](const std::string& framed) {
      ok = ok && std::fwrite(framed.data(), 1, framed.size(), f) == framed.size();
    };
    const uint64_t count = captured.size();
    uint64_t total_cylinders = 0;
    auto header = [&] {
      std::string h(kSnapshotMagic, 8);
      Put<uint32_t>(&h, kSnapshotVersion);
      Put<uint64_t>(&h, count);
      Put<uint64_t>(&h, total_cylinders);
      return FrameRecord(h);
    };
    write(header());  // rewritten with the cylinder total at the end
    std::string payload;
    MccTemplate cylinders;
    for (const auto& t : captured) {
      payload.clear();
      AppendEnrollFields(*t, &payload);
      AppendMetadataBlock(t->metadata, &payload);
      cylinders.cylinders.clear();
      if (source && source(*t, &cylinders) && cylinders.cylinders.size() < kNoCylinders) {
        total_cylinders += cylinders.cylinders.size();
        Put<uint16_t>(&payload, static_cast<uint16_t>(cylinders.cylinders.size()));
        payload.reserve(payload.size() + cylinders.cylinders.size() * kCylinderBytes);
        for (const MccCylinder& c : cylinders.cylinders) {
          payload.append(reinterpret_cast<const char*>(c.bits), sizeof(c.bits));
          payload.append(reinterpret_cast<const char*>(c.mask), sizeof(c.mask));
          Put<float>(&payload, c.x);
          Put<float>(&payload, c.y);
          Put<float>(&payload, c.theta);
          Put<int32_t>(&payload, c.minutia);
        }
      } else {
        Put<uint16_t>(&payload, kNoCylinders);
      }
      write(FrameRecord(payload));
    }
    std::string end(kSnapshotEnd, 8);
    Put<uint64_t>(&end, count);
    Put<uint64_t>(&end, at_capture.records);
    end.append(reinterpret_cast<const char*>(at_capture.head.data()), at_capture.head.size());
    write(FrameRecord(end));
    ok = ok && std::fflush(f) == 0;
    if (ok) {
      const std::string h = header();
      ok = pwrite(fileno(f), h.data(), h.size(), 0) == static_cast<ssize_t>(h.size());
    }
    absl::Status status = ok ? absl::OkStatus() : ErrnoError("cannot write", tmp_path);
    if (std::fclose(f) != 0 && status.ok()) status = ErrnoError("cannot close", tmp_path);
    return status;
  };
  // On failure the old snapshot and logs still describe the gallery; the new
  // log continues them.
  TESSERA_RETURN_IF_ERROR(WriteFileDurably(final_path, write_snapshot));
  TESSERA_ASSIGN_OR_RETURN(DirListing listing, ListDir(dir_));
  for (uint64_t g : listing.snapshots) {
    if (g < gen) std::remove((dir_ + "/" + gallery_internal::SnapshotFileName(g)).c_str());
  }
  for (uint64_t g : listing.logs) {
    if (g < gen) std::remove((dir_ + "/" + gallery_internal::LogFileName(g)).c_str());
  }
  return SyncDirectory(dir_);
}

}  // namespace fingerprint
}  // namespace tessera

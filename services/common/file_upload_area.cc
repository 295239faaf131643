#include "services/common/file_upload_area.h"

#include <filesystem>
#include <limits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/text_checks.h"

namespace tessera {

namespace fs = std::filesystem;

namespace {

FileUploadAreaOptions WithDefaults(FileUploadAreaOptions options) {
  if (options.quota_bytes <= 0) {
    options.quota_bytes = options.max_file_bytes > std::numeric_limits<int64_t>::max() / 8
                              ? std::numeric_limits<int64_t>::max()
                              : 8 * options.max_file_bytes;
  }
  return options;
}

}  // namespace

FileUploadArea::FileUploadArea(FileUploadAreaOptions options) : options_(WithDefaults(std::move(options))) {}

absl::StatusOr<StoredUpload> FileUploadArea::Receive(const grpc::ServerContextBase& context,
                                                     grpc::ServerReaderInterface<v1::FileChunk>* reader,
                                                     const std::string& dir, const std::string& principal) {
  // The owner field is how the quota finds a principal's files.
  const std::string key = principal.empty() ? std::string("\0anonymous", 10) : principal;
  const std::string owner = Sha256Hex(key.data(), key.size()).substr(0, 12);
  std::function<void()> release;
  const auto admit = [&](int64_t bytes) -> absl::Status {
    absl::StatusOr<std::function<void()>> reserved = ReserveQuota(dir, owner, principal, bytes);
    if (!reserved.ok()) return reserved.status();
    release = *std::move(reserved);
    return absl::OkStatus();
  };
  absl::StatusOr<StoredUpload> stored = ReceiveFileUpload(context, reader, dir, absl::StrCat(options_.prefix, owner, "-"),
                                                          options_.extensions, options_.max_file_bytes, admit);
  if (release) release();
  return stored;
}

absl::Status FileUploadArea::ReceiveInto(const grpc::ServerContextBase& context,
                                         grpc::ServerReaderInterface<v1::FileChunk>* reader, const std::string& dir,
                                         const std::string& principal, absl::string_view service,
                                         v1::UploadedFile* response) {
  absl::StatusOr<StoredUpload> stored = Receive(context, reader, dir, principal);
  if (!stored.ok()) return stored.status();
  response->set_upload_id(stored->upload_id);
  response->set_nbytes(stored->nbytes);
  response->set_sha256(stored->sha256);
  TESSERA_LOG(INFO) << service << ": file upload " << stored->upload_id << " (" << stored->nbytes << " bytes, sha256 "
                    << stored->sha256 << ")";
  return absl::OkStatus();
}

absl::StatusOr<std::string> FileUploadArea::PathOf(const std::string& dir, const std::string& id,
                                                   absl::string_view field) const {
  // Upload ids are file names this area chose: nothing else is accepted.
  if (!absl::StartsWith(id, options_.prefix) || id.find('/') != std::string::npos ||
      id.find('\0') != std::string::npos || id.size() > 200 || !MatchExtension(id, options_.extensions).ok()) {
    return absl::InvalidArgumentError(absl::StrCat(field, " ", QuoteBounded(id, 200), " is malformed"));
  }
  return (fs::path(dir) / id).string();
}

absl::StatusOr<std::function<void()>> FileUploadArea::ReserveQuota(const std::string& dir, const std::string& owner,
                                                                   const std::string& principal, int64_t bytes) {
  const std::string prefix = absl::StrCat(options_.prefix, owner, "-");
  std::lock_guard<std::mutex> lock(quota_mu_);
  int64_t held = 0, files = 0;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!absl::StartsWith(name, prefix)) continue;
    std::error_code size_ec;
    const uintmax_t size = entry.file_size(size_ec);
    if (!size_ec) held += static_cast<int64_t>(size), ++files;
  }
  if (ec) return absl::InternalError(absl::StrCat("cannot list ", dir, ": ", ec.message()));
  const int64_t in_flight = in_flight_bytes_[owner];
  if (held + in_flight + bytes > options_.quota_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "upload quota of ", principal.empty() ? std::string("unauthenticated callers") : QuoteBounded(principal),
        " exceeded: ", held, " bytes in ", files, " file(s) held",
        in_flight > 0 ? absl::StrCat(" and ", in_flight, " being received") : "", ", ", bytes,
        " more asked, limit ", options_.quota_bytes,
        "; files are deleted once no queued or running job names them (after the grace period)"));
  }
  in_flight_bytes_[owner] += bytes;
  return std::function<void()>([this, owner, bytes] {
    std::lock_guard<std::mutex> lock(quota_mu_);
    if ((in_flight_bytes_[owner] -= bytes) <= 0) in_flight_bytes_.erase(owner);
  });
}

}  // namespace tessera

#include "services/common/file_upload.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/common/random_id.h"
#include "services/server/call_checks.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

struct DigestDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using Digest = std::unique_ptr<EVP_MD_CTX, DigestDeleter>;

Digest NewSha256() {
  Digest d(EVP_MD_CTX_new());
  if (d) EVP_DigestInit_ex(d.get(), EVP_sha256(), nullptr);
  return d;
}

std::string FinishHex(EVP_MD_CTX* ctx) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, out, &len);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(out), len));
}

// Removes the temporary file unless released.
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)) {}
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  absl::Status Open() {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (fd_ < 0) return absl::InternalError(absl::StrCat("cannot create ", path_, ": ", std::strerror(errno)));
    return absl::OkStatus();
  }
  absl::Status Write(const std::string& data) {
    size_t done = 0;
    while (done < data.size()) {
      const ssize_t n = ::write(fd_, data.data() + done, data.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return absl::InternalError(absl::StrCat("cannot write ", path_, ": ", std::strerror(errno)));
      done += static_cast<size_t>(n);
    }
    return absl::OkStatus();
  }
  // fsync, close and rename to `final_path`; the directory is fsynced too so
  // the name survives a crash.
  absl::Status Publish(const std::string& final_path) {
    if (::fsync(fd_) != 0 || ::close(fd_) != 0) {
      fd_ = -1;
      return absl::InternalError(absl::StrCat("cannot sync ", path_, ": ", std::strerror(errno)));
    }
    fd_ = -1;
    if (::rename(path_.c_str(), final_path.c_str()) != 0) {
      return absl::InternalError(absl::StrCat("cannot rename ", path_, ": ", std::strerror(errno)));
    }
    path_.clear();
    const int dir = ::open(fs::path(final_path).parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      ::fsync(dir);
      ::close(dir);
    }
    return absl::OkStatus();
  }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace

absl::StatusOr<std::string> MatchExtension(const std::string& filename, const std::vector<std::string>& extensions) {
  std::string best;
  for (const std::string& ext : extensions) {
    if (absl::EndsWithIgnoreCase(filename, ext) && filename.size() > ext.size() && ext.size() > best.size()) best = ext;
  }
  if (best.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("filename '", filename.substr(0, 200), "' must end in one of ",
                                                   absl::StrJoin(extensions, ", ")));
  }
  return best;
}

absl::StatusOr<StoredUpload> ReceiveFileUpload(const grpc::ServerContextBase& context,
                                               grpc::ServerReaderInterface<v1::FileChunk>* reader,
                                               const std::string& dir, const std::string& prefix,
                                               const std::vector<std::string>& extensions, int64_t max_bytes,
                                               const std::function<absl::Status(int64_t total_bytes)>& admit) {
  v1::FileChunk chunk;
  if (!reader->Read(&chunk)) {
    if (absl::Status s = CheckNotCancelled(context); !s.ok()) return s;
    return absl::InvalidArgumentError("empty upload: the first chunk must name the file and its total_bytes");
  }
  if (chunk.filename().empty()) return absl::InvalidArgumentError("the first chunk must set filename");
  if (chunk.filename().size() > 255 || chunk.filename().find('/') != std::string::npos) {
    return absl::InvalidArgumentError("filename must be a plain name of at most 255 characters, without '/'");
  }
  absl::StatusOr<std::string> ext = MatchExtension(chunk.filename(), extensions);
  if (!ext.ok()) return ext.status();
  const int64_t total = chunk.total_bytes();
  if (total <= 0) return absl::InvalidArgumentError(absl::StrCat("total_bytes must be positive, got ", total));
  if (total > max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("file of ", total, " bytes is over the server's limit of ", max_bytes, " bytes"));
  }
  if (admit) {
    if (absl::Status s = admit(total); !s.ok()) return s;
  }
  StoredUpload out;
  out.upload_id = absl::StrCat(prefix, RandomId(), *ext);
  out.path = (fs::path(dir) / out.upload_id).string();
  TempFile temp((fs::path(dir) / absl::StrCat(".tmp-", out.upload_id)).string());
  if (absl::Status s = temp.Open(); !s.ok()) return s;
  Digest digest = NewSha256();
  if (!digest) return absl::InternalError("cannot create a SHA-256 context");
  int64_t received = 0;
  bool first = true;
  while (first || reader->Read(&chunk)) {
    if (!first && (!chunk.filename().empty() || chunk.total_bytes() != 0)) {
      return absl::InvalidArgumentError(absl::StrCat("chunk at offset ", chunk.offset(),
                                                     ": only the first chunk may set filename and total_bytes"));
    }
    first = false;
    if (chunk.offset() != received) {
      return absl::InvalidArgumentError(
          absl::StrCat("chunk offset ", chunk.offset(), " does not follow the ", received, " bytes received"));
    }
    if (static_cast<int64_t>(chunk.data().size()) > total - received) {
      return absl::InvalidArgumentError(absl::StrCat("chunks carry more than total_bytes (", total, ")"));
    }
    if (absl::Status s = temp.Write(chunk.data()); !s.ok()) return s;
    EVP_DigestUpdate(digest.get(), chunk.data().data(), chunk.data().size());
    received += static_cast<int64_t>(chunk.data().size());
    if (absl::Status s = CheckNotCancelled(context); !s.ok()) return s;
  }
  if (absl::Status s = CheckNotCancelled(context); !s.ok()) return s;
  if (received != total) {
    return absl::DataLossError(absl::StrCat("upload ended after ", received, " of ", total, " bytes"));
  }
  if (absl::Status s = temp.Publish(out.path); !s.ok()) return s;
  out.nbytes = received;
  out.sha256 = FinishHex(digest.get());
  return out;
}

absl::StatusOr<std::string> Sha256OfFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  Digest digest = NewSha256();
  if (!digest) return absl::InternalError("cannot create a SHA-256 context");
  std::string buffer(1 << 20, '\0');
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    EVP_DigestUpdate(digest.get(), buffer.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat("cannot read ", path));
  return FinishHex(digest.get());
}

}  // namespace tessera

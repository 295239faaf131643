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
#include "common/durable_file.h"
#include "common/status.h"
#include "common/text_checks.h"
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

absl::Status WriteAll(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Writes `chunk` (the first, already read) and the chunks after it to `fd`
// (the file at `path`), checking offsets and sizes against `total`.
absl::Status ReceiveChunks(const grpc::ServerContextBase& context, grpc::ServerReaderInterface<v1::FileChunk>* reader,
                           v1::FileChunk& chunk, int64_t total, int fd, const std::string& path, EVP_MD_CTX* digest) {
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
    if (absl::Status s = WriteAll(fd, chunk.data(), path); !s.ok()) return s;
    EVP_DigestUpdate(digest, chunk.data().data(), chunk.data().size());
    received += static_cast<int64_t>(chunk.data().size());
    if (absl::Status s = CheckNotCancelled(context); !s.ok()) return s;
  }
  if (absl::Status s = CheckNotCancelled(context); !s.ok()) return s;
  if (received != total) {
    return absl::DataLossError(absl::StrCat("upload ended after ", received, " of ", total, " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> MatchExtension(const std::string& filename, const std::vector<std::string>& extensions) {
  std::string best;
  for (const std::string& ext : extensions) {
    if (absl::EndsWithIgnoreCase(filename, ext) && filename.size() > ext.size() && ext.size() > best.size()) best = ext;
  }
  if (best.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("filename ", QuoteBounded(filename, 64), " must end in one of ",
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
  if (chunk.filename().size() > 255 || chunk.filename().find_first_of("/\\") != std::string::npos) {
    return absl::InvalidArgumentError("filename must be a plain name of at most 255 characters, without '/' or '\\'");
  }
  // Like an id (issue 31): no control characters (newline, NUL), no
  // look-alike or bidirectional characters.
  TESSERA_RETURN_IF_ERROR(CheckIdentifierText(chunk.filename(), "filename"));
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
  Digest digest = NewSha256();
  if (!digest) return absl::InternalError("cannot create a SHA-256 context");
  // Durable before its id is handed out: queued jobs name it after a restart.
  absl::Status stored = WriteFileDurably(out.path, [&](const std::string& tmp) {
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (fd < 0) return absl::InternalError(absl::StrCat("cannot create ", tmp, ": ", std::strerror(errno)));
    absl::Status s = ReceiveChunks(context, reader, chunk, total, fd, tmp, digest.get());
    if (::close(fd) != 0 && s.ok()) s = absl::InternalError(absl::StrCat("cannot close ", tmp, ": ", std::strerror(errno)));
    return s;
  });
  if (!stored.ok()) return stored;
  out.nbytes = total;
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

#include "common/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string TempPathFor(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  const size_t slash = path.rfind('/');
  const std::string prefix = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  // Cut long names so that ours stays within NAME_MAX (255) too.
  const std::string name = path.substr(slash == std::string::npos ? 0 : slash + 1, 200);
  return absl::StrCat(prefix, ".", name, ".", getpid(), "-", counter.fetch_add(1), ".tmp");
}

absl::Status WritePieces(const std::string& path, const std::string& tmp, absl::Span<const absl::string_view> pieces) {
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot write ", path, ": cannot create ", tmp));
  for (absl::string_view piece : pieces) {
    while (!piece.empty()) {
      // One write() moves at most about 2 GiB on Linux: big pieces go in parts.
      const ssize_t n = write(fd, piece.data(), std::min<size_t>(piece.size(), size_t{1} << 30));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int err = n < 0 ? errno : EIO;
        close(fd);
        return absl::ErrnoToStatus(err, absl::StrCat("cannot write ", tmp));
      }
      piece.remove_prefix(static_cast<size_t>(n));
    }
  }
  if (close(fd) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot close ", tmp));
  return absl::OkStatus();
}

// fsync of a file by name: Linux syncs the inode's data through any
// descriptor, so writers that closed their own (stdio, zlib, HDF5) are covered.
absl::Status SyncFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path, " to fsync it"));
  const int rc = fsync(fd);
  const int err = errno;
  close(fd);
  if (rc != 0) return absl::ErrnoToStatus(err, absl::StrCat("cannot fsync ", path));
  return absl::OkStatus();
}

absl::Status Replace(const std::string& path, const TempFileWriter& write, bool durable) {
  if (path.empty() || path.back() == '/') {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' does not name a file"));
  }
  const std::string tmp = TempPathFor(path);
  absl::Status status = write(tmp);
  if (status.ok() && durable) status = SyncFile(tmp);
  if (status.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    status = absl::ErrnoToStatus(errno, absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  if (!status.ok()) {
    unlink(tmp.c_str());  // a writer that failed early may not have created it
    return status;
  }
  return durable ? SyncDirectory(DirectoryOf(path)) : absl::OkStatus();
}

}  // namespace

absl::Status WriteFileDurably(const std::string& path, absl::string_view bytes) {
  return WriteFileDurably(path, absl::Span<const absl::string_view>(&bytes, 1));
}

absl::Status WriteFileDurably(const std::string& path, absl::Span<const absl::string_view> pieces) {
  return Replace(path, [&](const std::string& tmp) { return WritePieces(path, tmp, pieces); }, /*durable=*/true);
}

absl::Status WriteFileDurably(const std::string& path, const TempFileWriter& write) {
  return Replace(path, write, /*durable=*/true);
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes) {
  return Replace(
      path, [&](const std::string& tmp) { return WritePieces(path, tmp, absl::Span<const absl::string_view>(&bytes, 1)); },
      /*durable=*/false);
}

absl::Status WriteFileAtomically(const std::string& path, const TempFileWriter& write) {
  return Replace(path, write, /*durable=*/false);
}

absl::Status SyncDirectory(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open directory ", dir));
  const int rc = fsync(fd);
  const int err = errno;
  close(fd);
  if (rc != 0 && err != EINVAL) return absl::ErrnoToStatus(err, absl::StrCat("cannot fsync directory ", dir));
  return absl::OkStatus();
}

}  // namespace tessera

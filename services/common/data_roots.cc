#include "services/common/data_roots.h"

#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/text_checks.h"

namespace tessera {
namespace {

bool IsUnder(const std::string& path, const std::string& root) {
  if (root == "/") return !path.empty() && path[0] == '/';
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                          path[root.size()] == '/');
}

bool IsUnderAny(const std::string& path, const std::vector<std::string>& roots) {
  for (const std::string& root : roots) {
    if (IsUnder(path, root)) return true;
  }
  return false;
}

absl::StatusOr<std::string> RealPath(const std::string& path) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf) == nullptr) {
    const int err = errno;
    const std::string message = absl::StrCat(QuoteBounded(path), ": ", std::strerror(err));
    if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(message);
    if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
    return absl::InvalidArgumentError(message);
  }
  return std::string(buf);
}

std::string Lexical(const std::string& path) {
  std::string out = std::filesystem::path(path).lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

std::string RootsList(const std::vector<std::string>& roots) { return absl::StrJoin(roots, ", "); }

absl::Status CheckRequested(const std::string& requested, const std::vector<std::string>& real_roots) {
  if (requested.empty()) return absl::InvalidArgumentError("path is empty");
  if (requested.find('\0') != std::string::npos) return absl::InvalidArgumentError("path contains a NUL byte");
  if (real_roots.empty()) {
    return absl::FailedPreconditionError(
        "this server reads no files: it was started without a data root (tessera serve --data-root=DIR)");
  }
  return absl::OkStatus();
}

absl::Status Denied(const std::string& requested, const std::vector<std::string>& real_roots) {
  return absl::PermissionDeniedError(
      absl::StrCat(QuoteBounded(requested), " is outside the server's data roots (", RootsList(real_roots), ")"));
}

}  // namespace

absl::StatusOr<std::vector<std::string>> CanonicalDataRoots(const std::vector<std::string>& roots) {
  std::vector<std::string> out;
  for (const std::string& root : roots) {
    char buf[PATH_MAX];
    if (realpath(root.c_str(), buf) == nullptr) {
      const int err = errno;
      const std::string message = absl::StrCat("data root '", root, "': ", std::strerror(err));
      return err == ENOENT ? absl::NotFoundError(message) : absl::InvalidArgumentError(message);
    }
    struct stat st;
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat("data root '", root, "' is not a directory"));
    }
    out.emplace_back(buf);
  }
  return out;
}

absl::StatusOr<std::string> ResolveUnderRoots(const std::string& requested,
                                              const std::vector<std::string>& real_roots) {
  if (absl::Status s = CheckRequested(requested, real_roots); !s.ok()) return s;
  std::vector<std::string> candidates;
  if (requested[0] == '/') {
    candidates.push_back(requested);
  } else {
    for (const std::string& root : real_roots) candidates.push_back(absl::StrCat(root, "/", requested));
  }
  bool missing_inside_root = false;
  for (const std::string& candidate : candidates) {
    absl::StatusOr<std::string> real = RealPath(candidate);
    if (real.ok()) {
      // Symlinks are resolved, so a link inside a root pointing out is denied.
      if (!IsUnderAny(*real, real_roots)) return Denied(requested, real_roots);
      struct stat st;
      if (stat(real->c_str(), &st) != 0) {
        return absl::NotFoundError(absl::StrCat(QuoteBounded(requested), ": ", std::strerror(errno)));
      }
      if (!S_ISREG(st.st_mode)) {
        return absl::InvalidArgumentError(absl::StrCat(QuoteBounded(requested), " is not a regular file"));
      }
      return *std::move(real);
    }
    if (real.status().code() != absl::StatusCode::kNotFound) {
      // Say nothing about paths outside the roots.
      if (!IsUnderAny(Lexical(candidate), real_roots)) return Denied(requested, real_roots);
      return real.status();
    }
    if (IsUnderAny(Lexical(candidate), real_roots)) missing_inside_root = true;
  }
  if (!missing_inside_root) return Denied(requested, real_roots);
  return absl::NotFoundError(absl::StrCat("no such file: ", QuoteBounded(requested), " (data roots: ", RootsList(real_roots), ")"));
}

absl::StatusOr<std::string> ResolveFileOrDirUnderRoots(const std::string& requested,
                                                       const std::vector<std::string>& real_roots) {
  absl::StatusOr<std::string> path = ResolveUnderRoots(requested, real_roots);
  if (path.ok() || path.status().code() != absl::StatusCode::kInvalidArgument) return path;
  // Not a regular file: an existing directory under the roots will do.
  absl::StatusOr<std::string> dir = ResolveOutputDirUnderRoots(requested, real_roots);
  struct stat st;
  if (dir.ok() && stat(dir->c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return dir;
  return path;
}

absl::StatusOr<std::string> ResolveOutputDirUnderRoots(const std::string& requested,
                                                       const std::vector<std::string>& real_roots) {
  if (absl::Status s = CheckRequested(requested, real_roots); !s.ok()) return s;
  const std::string candidate = Lexical(requested[0] == '/' ? requested : absl::StrCat(real_roots[0], "/", requested));
  absl::StatusOr<std::string> real = RealPath(candidate);
  if (real.ok()) {
    if (!IsUnderAny(*real, real_roots)) return Denied(requested, real_roots);
    struct stat st;
    if (stat(real->c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat("output directory ", QuoteBounded(requested), " is not a directory"));
    }
    return *std::move(real);
  }
  if (!IsUnderAny(candidate, real_roots)) return Denied(requested, real_roots);
  if (real.status().code() != absl::StatusCode::kNotFound) return real.status();
  // Not there yet: its parent must exist (and, resolved, still lie under a root).
  const std::filesystem::path path(candidate);
  const std::string name = path.filename().string();
  if (name.empty() || name == "." || name == "..") {
    return absl::InvalidArgumentError(absl::StrCat("bad output directory ", QuoteBounded(requested)));
  }
  absl::StatusOr<std::string> parent = RealPath(path.parent_path().string());
  if (!parent.ok()) {
    if (parent.status().code() == absl::StatusCode::kNotFound) {
      return absl::NotFoundError(absl::StrCat("the parent of output directory ", QuoteBounded(requested),
                                              " does not exist (only the last component is created)"));
    }
    return parent.status();
  }
  std::string out = absl::StrCat(*parent == "/" ? "" : *parent, "/", name);
  if (!IsUnderAny(out, real_roots)) return Denied(requested, real_roots);
  return out;
}

}  // namespace tessera

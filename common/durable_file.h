// Whole-file writes through a temporary file beside the target, renamed over
// it, so a reader sees the old content or the new, never a partial file.
//
// WriteFileDurably also survives a crash once it returns: the temporary file
// is fsync'ed before the rename and the directory after it. WriteFileAtomically
// skips both fsyncs (a crash may then lose the new content, never half-write
// it): for large outputs whose writers never paid for an fsync.
//
// The temporary file is "<dir>/.<name>.<pid>-<n>.tmp": in the same directory
// (a rename never crosses file systems), hidden (listings of the directory's
// files skip it) and ending in ".tmp" (so a directory's owner can sweep what
// a crash left). On failure it is removed and `path` is untouched.
#ifndef TESSERA_COMMON_DURABLE_FILE_H_
#define TESSERA_COMMON_DURABLE_FILE_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace tessera {

// Writes the temporary file at `tmp_path` (creates it, fills it and closes
// it); its error is returned as is.
using TempFileWriter = std::function<absl::Status(const std::string& tmp_path)>;

// `bytes` (or `pieces`, back to back) as the whole content of `path`, created
// with mode 0644 (less the umask) when it is new.
absl::Status WriteFileDurably(const std::string& path, absl::string_view bytes);
absl::Status WriteFileDurably(const std::string& path, absl::Span<const absl::string_view> pieces);
// For writers that open the file themselves (stdio, zlib, HDF5, copy_file).
absl::Status WriteFileDurably(const std::string& path, const TempFileWriter& write);

// The same without the fsyncs (see above).
absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes);
absl::Status WriteFileAtomically(const std::string& path, const TempFileWriter& write);

// fsyncs directory `dir`, so that entries created, renamed or removed in it
// survive a crash. A file system that cannot sync directories (EINVAL) has
// nothing to make durable: OK.
absl::Status SyncDirectory(const std::string& dir);

}  // namespace tessera

#endif  // TESSERA_COMMON_DURABLE_FILE_H_

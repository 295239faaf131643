#include "services/scheduler/result_file_stream.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/text_checks.h"

namespace tessera::scheduler {
namespace {

// Closes the descriptor on every return.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

absl::Status StreamResultFile(const v1::JobResult& result, const std::string& name, int64_t offset,
                              int64_t chunk_bytes, const std::function<bool(const v1::FileChunk&)>& write,
                              const std::function<bool()>& cancelled) {
  if (name.empty()) return absl::InvalidArgumentError("name: give one of the job's result files (JobResult.files)");
  if (offset < 0) return absl::InvalidArgumentError(absl::StrCat("offset ", offset, " must not be negative"));
  const v1::ResultFile* file = nullptr;
  std::string names;
  for (const v1::ResultFile& f : result.files()) {
    if (f.name() == name) file = &f;
    if (names.size() < 300) absl::StrAppend(&names, names.empty() ? "" : ", ", f.name());
  }
  if (file == nullptr) {
    return absl::NotFoundError(absl::StrCat("job '", result.job_id(), "' has no result file ", QuoteBounded(name, 200),
                                            result.files().empty() ? " (it has none)" : absl::StrCat("; it has ", names)));
  }
  Fd in;
  in.fd = ::open(file->path().c_str(), O_RDONLY | O_CLOEXEC);
  if (in.fd < 0) {
    return absl::DataLossError(absl::StrCat("job '", result.job_id(), "': result file ", name, " cannot be read: ",
                                            std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(in.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::DataLossError(absl::StrCat("job '", result.job_id(), "': result file ", name, " is not a file"));
  }
  const int64_t total = static_cast<int64_t>(st.st_size);
  if (offset > total) {
    return absl::OutOfRangeError(absl::StrCat("offset ", offset, " is past the end of ", name, " (", total, " bytes)"));
  }
  chunk_bytes = std::max<int64_t>(1, chunk_bytes);
  std::string buffer(static_cast<size_t>(std::min(chunk_bytes, std::max<int64_t>(total - offset, 1))), '\0');
  bool first = true;
  while (first || offset < total) {
    if (cancelled && cancelled()) return absl::CancelledError("the download was cancelled");
    v1::FileChunk chunk;
    if (first) {
      chunk.set_filename(name);
      chunk.set_total_bytes(total);
    }
    chunk.set_offset(offset);
    const int64_t want = std::min<int64_t>(chunk_bytes, total - offset);
    int64_t got = 0;
    while (got < want) {
      const ssize_t n = ::pread(in.fd, buffer.data() + got, static_cast<size_t>(want - got), offset + got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return absl::DataLossError(absl::StrCat("cannot read ", name, ": ", std::strerror(errno)));
      if (n == 0) return absl::DataLossError(absl::StrCat(name, " shrank while it was sent"));
      got += n;
    }
    chunk.set_data(buffer.data(), static_cast<size_t>(got));
    if (!write(chunk)) return absl::UnavailableError("the client stopped receiving");
    offset += got;
    first = false;
  }
  return absl::OkStatus();
}

}  // namespace tessera::scheduler

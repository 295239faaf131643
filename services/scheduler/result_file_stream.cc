#include "services/scheduler/result_file_stream.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/text_checks.h"
#include "services/scheduler/result_transfer.h"

namespace tessera::scheduler {

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
  return ReadFilePieces(
      file->path(), absl::StrCat("job '", result.job_id(), "': result file ", name), offset, chunk_bytes,
      [&](int64_t at, absl::string_view data, int64_t total_bytes) {
        if (cancelled && cancelled()) return absl::CancelledError("the download was cancelled");
        v1::FileChunk chunk;
        if (at == offset) {  // the first chunk names the file
          chunk.set_filename(name);
          chunk.set_total_bytes(total_bytes);
        }
        chunk.set_offset(at);
        chunk.set_data(data.data(), data.size());
        if (!write(chunk)) return absl::UnavailableError("the client stopped receiving");
        return absl::OkStatus();
      });
}

}  // namespace tessera::scheduler

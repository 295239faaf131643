// SchedulerService.DownloadFile's body (issue 35), plain C++: one result file
// of a succeeded job streamed as FileChunks from an offset, so a client
// without the server's disk downloads results and resumes a broken download.
#ifndef TESSERA_SERVICES_SCHEDULER_RESULT_FILE_STREAM_H_
#define TESSERA_SERVICES_SCHEDULER_RESULT_FILE_STREAM_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "tessera/v1/common.pb.h"
#include "tessera/v1/jobs.pb.h"

namespace tessera::scheduler {

// Streams the file `name` of `result` — exactly one of result.files[].name:
// the path sent is the one the result recorded, never a join of `name` —
// from byte `offset` in chunks of at most `chunk_bytes`. The first chunk
// carries filename (`name`) and total_bytes (the file's size now); an offset
// equal to the size sends that one chunk with no data. INVALID_ARGUMENT for an
// empty name or a negative offset, NOT_FOUND for a name the job has no file
// of (listing up to a few it has), OUT_OF_RANGE for an offset past the end,
// DATA_LOSS when the recorded file is gone or shrank; `write` returning false
// (the client went away) is UNAVAILABLE, `cancelled` true is CANCELLED.
absl::Status StreamResultFile(const v1::JobResult& result, const std::string& name, int64_t offset,
                              int64_t chunk_bytes, const std::function<bool(const v1::FileChunk&)>& write,
                              const std::function<bool()>& cancelled);

}  // namespace tessera::scheduler

#endif  // TESSERA_SERVICES_SCHEDULER_RESULT_FILE_STREAM_H_

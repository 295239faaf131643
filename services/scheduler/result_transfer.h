// Result files of a job attempt that ran in a worker process, brought to the
// scheduler (scheduler.proto's ResultChunk): the worker reads each file in
// pieces into the Execute stream before the outcome, the scheduler writes them
// into <results>/<job>.attempt-N.tmp/ and publishes that folder as
// <results>/<job>/ with one rename once the outcome says the attempt
// succeeded, exactly as an InProcessWorker does. A job's files are so always
// on the scheduler's disk, whatever worker ran it.
#ifndef TESSERA_SERVICES_SCHEDULER_RESULT_TRANSFER_H_
#define TESSERA_SERVICES_SCHEDULER_RESULT_TRANSFER_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "tessera/v1/scheduler.pb.h"

namespace tessera::scheduler {

// The piece size a worker sends (well under gRPC's default 4 MiB message limit).
inline constexpr int64_t kResultChunkBytes = 1 << 20;

// Reads the regular file at `path` from byte `offset` to the size it has when
// opened, in pieces of at most `chunk_bytes`, handing each to
// `piece(offset, data, total_bytes)`: at least one piece, an empty one when
// `offset` is the size (so an empty file is sent too). Stops at the first
// non-OK status `piece` returns and returns it. Messages name the file as
// `label`: DATA_LOSS when it cannot be opened, is not a regular file, cannot
// be read or shrinks while read; OUT_OF_RANGE for an offset past its end.
// What SendResultFiles and DownloadFile (result_file_stream.h) both read with.
absl::Status ReadFilePieces(const std::string& path, const std::string& label, int64_t offset, int64_t chunk_bytes,
                            const std::function<absl::Status(int64_t offset, absl::string_view data,
                                                             int64_t total_bytes)>& piece);

// Streams every file of `files` as ResultChunk updates through `write` (false:
// the stream broke, which is UNAVAILABLE). A file that cannot be read whole is
// DATA_LOSS naming it.
absl::Status SendResultFiles(const google::protobuf::RepeatedPtrField<v1::ResultFile>& files, int64_t chunk_bytes,
                             const std::function<bool(const v1::ExecuteUpdate&)>& write);

// Deletes the folder that held `files` (a worker's copy, once sent).
void RemoveResultFolder(const google::protobuf::RepeatedPtrField<v1::ResultFile>& files);

// The scheduler's end: one per attempt. Destroying it unpublished removes what
// it wrote.
class ResultReceiver {
 public:
  ResultReceiver(std::string results_dir, std::string job_id, int attempt);
  ~ResultReceiver();
  ResultReceiver(const ResultReceiver&) = delete;
  ResultReceiver& operator=(const ResultReceiver&) = delete;

  // Appends one piece. Files come one after another (a piece of a file after
  // the next one started is refused). INVALID_ARGUMENT for a name that is not
  // a plain file name or one folder and a file ("warped_dicom/IM00001.dcm",
  // a DICOM series) or a piece out of order; INTERNAL when the disk refuses.
  absl::Status Add(const v1::ResultChunk& chunk);
  // Checks that each of `files` arrived whole (its `bytes`) and nothing else
  // did, makes them durable and publishes <results>/<job>/, setting each
  // file's `path` there. DATA_LOSS for a missing or short file.
  absl::Status Publish(google::protobuf::RepeatedPtrField<v1::ResultFile>* files);

 private:
  struct Incoming {
    std::FILE* file = nullptr;
    int64_t bytes = 0;
  };
  absl::Status CloseAll(bool sync);

  const std::string results_dir_;
  const std::string job_id_;
  const std::string work_dir_;
  bool published_ = false;
  std::map<std::string, Incoming> files_;
  std::set<std::string> folders_;  // created under work_dir_ for "folder/file" names
};

}  // namespace tessera::scheduler

#endif  // TESSERA_SERVICES_SCHEDULER_RESULT_TRANSFER_H_

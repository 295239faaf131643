// Durable file uploads: a client streams a whole file (a NIfTI sinogram, a
// geometry JSON, a list-mode file) in chunks, and the server writes it under
// a directory of its state, so a queued job can name it by path even after a
// restart. The file is written to a temporary name, fsynced and renamed into
// place only when every byte arrived; its SHA-256 comes back to the client
// (chain of custody: the client can check the server holds what it sent).
//
//   TESSERA_ASSIGN_OR_RETURN(StoredUpload up, ReceiveFileUpload(context, reader, upload_dir, "rf-",
//                                                                {".nii", ".nii.gz", ".json", ".tslm"}, max_bytes));
#ifndef TESSERA_SERVICES_COMMON_FILE_UPLOAD_H_
#define TESSERA_SERVICES_COMMON_FILE_UPLOAD_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <grpcpp/server_context.h>
#include <grpcpp/support/sync_stream.h>

#include "absl/status/statusor.h"
#include "tessera/v1/common.pb.h"

namespace tessera {

struct StoredUpload {
  std::string upload_id;  // prefix + random + extension: also the file's name in the directory
  std::string path;       // canonical
  int64_t nbytes = 0;
  std::string sha256;     // hex
};

// Receives a FileChunk stream: the first chunk names the file (its extension,
// one of `extensions`, is kept) and its total_bytes (1..max_bytes); chunks
// come in order (offset = bytes so far). `admit` (optional) sees total_bytes
// before anything is written and may refuse (a quota). INVALID_ARGUMENT for a
// bad name, extension, size or offset; RESOURCE_EXHAUSTED over max_bytes;
// DATA_LOSS when the stream ends short; CANCELLED / DEADLINE_EXCEEDED from the
// call; INTERNAL when the file cannot be written. Nothing is left behind on
// error.
absl::StatusOr<StoredUpload> ReceiveFileUpload(const grpc::ServerContextBase& context,
                                               grpc::ServerReaderInterface<v1::FileChunk>* reader,
                                               const std::string& dir, const std::string& prefix,
                                               const std::vector<std::string>& extensions, int64_t max_bytes,
                                               const std::function<absl::Status(int64_t total_bytes)>& admit = nullptr);

// The extension of `filename` among `extensions` (longest match, so ".nii.gz"
// wins over ".gz"), or INVALID_ARGUMENT listing them.
absl::StatusOr<std::string> MatchExtension(const std::string& filename, const std::vector<std::string>& extensions);

// SHA-256 (hex) of a file's bytes, streamed.
absl::StatusOr<std::string> Sha256OfFile(const std::string& path);

}  // namespace tessera

#endif  // TESSERA_SERVICES_COMMON_FILE_UPLOAD_H_

// One service's durable file uploads (issue 35 factored this out of
// ReconstructionService for RegistrationService.UploadFile): the file names
// it chooses (<prefix><owner>-<random><ext>, the owner a hash of the caller's
// principal), the kinds it takes, and each principal's quota over the files
// it holds in the upload directory plus those still being received. The
// directory itself is the owning job core's (JobCore::upload_dir, swept of
// files no pending job names), so it is passed to each call.
//
//   FileUploadArea area({"rf-", {".nii", ".nii.gz"}, max_file_bytes, quota_bytes});
//   TESSERA_ASSIGN_OR_RETURN(StoredUpload up, area.Receive(context, reader, dir, CallPrincipal(&context)));
//   TESSERA_ASSIGN_OR_RETURN(std::string path, area.PathOf(dir, request.upload_id(), "upload_id"));
#ifndef TESSERA_SERVICES_COMMON_FILE_UPLOAD_AREA_H_
#define TESSERA_SERVICES_COMMON_FILE_UPLOAD_AREA_H_

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/server_context.h>
#include <grpcpp/support/sync_stream.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/common/file_upload.h"
#include "tessera/v1/common.pb.h"

namespace tessera {

struct FileUploadAreaOptions {
  std::string prefix;                   // every file's name starts with it ("rf-")
  std::vector<std::string> extensions;  // the kinds taken (".nii.gz", ...)
  int64_t max_file_bytes = 0;           // per file (> 0)
  // Bytes one principal (all unauthenticated callers share one) may hold at
  // once; 0: 8 x max_file_bytes.
  int64_t quota_bytes = 0;
};

class FileUploadArea {
 public:
  explicit FileUploadArea(FileUploadAreaOptions options);
  FileUploadArea(const FileUploadArea&) = delete;
  FileUploadArea& operator=(const FileUploadArea&) = delete;

  // ReceiveFileUpload into `dir` within `principal`'s quota
  // (RESOURCE_EXHAUSTED naming what it holds, before anything is written).
  absl::StatusOr<StoredUpload> Receive(const grpc::ServerContextBase& context,
                                       grpc::ServerReaderInterface<v1::FileChunk>* reader, const std::string& dir,
                                       const std::string& principal);

  // Receive, then the UploadFile RPC's answer in `response`, and one log line
  // "<service>: file upload ID (N bytes, sha256 H)": the whole body of a
  // service's UploadFile handler (registration, reconstruction).
  absl::Status ReceiveInto(const grpc::ServerContextBase& context, grpc::ServerReaderInterface<v1::FileChunk>* reader,
                           const std::string& dir, const std::string& principal, absl::string_view service,
                           v1::UploadedFile* response);

  // The path in `dir` of upload `id`, which must be a name Receive chooses
  // (the prefix, no '/', one of the extensions): INVALID_ARGUMENT
  // "<field> '<id>' is malformed" otherwise. Whether the file is (still)
  // there is the caller's check (jobs::ReuseUploadFiles also touches it).
  absl::StatusOr<std::string> PathOf(const std::string& dir, const std::string& id, absl::string_view field) const;

  const FileUploadAreaOptions& options() const { return options_; }

 private:
  // Reserves `bytes` of `owner`'s quota until the returned release runs.
  absl::StatusOr<std::function<void()>> ReserveQuota(const std::string& dir, const std::string& owner,
                                                     const std::string& principal, int64_t bytes);

  const FileUploadAreaOptions options_;
  std::mutex quota_mu_;
  std::map<std::string, int64_t> in_flight_bytes_;  // by owner, uploads being received (guarded by quota_mu_)
};

}  // namespace tessera

#endif  // TESSERA_SERVICES_COMMON_FILE_UPLOAD_AREA_H_

#include "cli/job_download.h"

#include <filesystem>
#include <fstream>
#include <memory>

#include <grpcpp/client_context.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/grpc_status.h"
#include "common/status.h"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;

// A result name is only ever a relative path under the output folder.
absl::Status CheckLocalName(const std::string& name) {
  if (name.empty() || name.front() == '/') {
    return absl::InvalidArgumentError(absl::StrCat("result file name '", name, "' is not a relative path"));
  }
  for (absl::string_view part : absl::StrSplit(name, '/')) {
    if (part.empty() || part == "." || part == "..") {
      return absl::InvalidArgumentError(absl::StrCat("result file name '", name, "' has an empty, '.' or '..' part"));
    }
  }
  return absl::OkStatus();
}

// One file, from the local copy's size on (from 0 when the local copy is
// larger than the server's file, which OUT_OF_RANGE says).
absl::StatusOr<DownloadedFile> DownloadOne(v1::SchedulerService::Stub& stub, const std::string& job_id,
                                           const std::string& name, const std::string& out_dir) {
  TESSERA_RETURN_IF_ERROR(CheckLocalName(name));
  DownloadedFile file;
  file.name = name;
  file.path = (fs::path(out_dir) / name).string();
  std::error_code ec;
  fs::create_directories(fs::path(file.path).parent_path(), ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", fs::path(file.path).parent_path().string(), ": ", ec.message()));
  int64_t offset = fs::exists(file.path, ec) ? static_cast<int64_t>(fs::file_size(file.path, ec)) : 0;
  if (ec) offset = 0;
  for (int attempt = 0; attempt < 2; ++attempt) {
    grpc::ClientContext context;
    v1::DownloadJobFileRequest request;
    request.set_job_id(job_id);
    request.set_name(name);
    request.set_offset(offset);
    std::unique_ptr<grpc::ClientReader<v1::FileChunk>> reader = stub.DownloadFile(&context, request);
    std::ofstream out;
    v1::FileChunk chunk;
    file.received = 0;
    while (reader->Read(&chunk)) {
      if (!out.is_open()) {
        file.bytes = chunk.total_bytes();
        out.open(file.path, std::ios::binary | (offset > 0 ? std::ios::app : std::ios::trunc));
        if (!out) return absl::InternalError(absl::StrCat("cannot write ", file.path));
      }
      if (chunk.offset() != offset + file.received) {
        return absl::DataLossError(absl::StrCat(name, ": a chunk at ", chunk.offset(), " where ",
                                                offset + file.received, " was expected"));
      }
      out.write(chunk.data().data(), static_cast<std::streamsize>(chunk.data().size()));
      if (!out) return absl::InternalError(absl::StrCat("cannot write ", file.path));
      file.received += static_cast<int64_t>(chunk.data().size());
    }
    const grpc::Status status = reader->Finish();
    if (status.error_code() == grpc::StatusCode::OUT_OF_RANGE && offset > 0) {
      offset = 0;  // the local file is larger than the server's: not a part of it
      continue;
    }
    if (!status.ok()) return FromGrpcStatus(status);
    if (offset + file.received != file.bytes) {
      return absl::DataLossError(absl::StrCat(name, ": ", offset + file.received, " of ", file.bytes, " bytes arrived"));
    }
    return file;
  }
  return absl::InternalError("unreachable");
}

}  // namespace

absl::StatusOr<std::vector<DownloadedFile>> DownloadJobFiles(v1::SchedulerService::Stub& stub,
                                                             const std::string& job_id, const std::string& name,
                                                             const std::string& out_dir) {
  std::vector<std::string> names;
  if (!name.empty()) {
    names.push_back(name);
  } else {
    grpc::ClientContext context;
    v1::JobRef ref;
    ref.set_job_id(job_id);
    v1::JobResult result;
    const grpc::Status status = stub.GetResult(&context, ref, &result);
    if (!status.ok()) return FromGrpcStatus(status);
    for (const v1::ResultFile& f : result.files()) names.push_back(f.name());
  }
  std::vector<DownloadedFile> files;
  for (const std::string& n : names) {
    TESSERA_ASSIGN_OR_RETURN(DownloadedFile file, DownloadOne(stub, job_id, n, out_dir));
    files.push_back(std::move(file));
  }
  return files;
}

}  // namespace tessera::cli

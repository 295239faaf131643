#include "services/scheduler/result_transfer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/durable_file.h"
#include "common/log.h"
#include "common/status.h"
#include "common/text_checks.h"

namespace tessera::scheduler {
namespace fs = std::filesystem;
namespace {

// A job has a handful of result files, or one per slice of a DICOM series
// (a few hundred); more is a confused or hostile sender.
constexpr size_t kMaxResultFiles = 8192;

bool IsPlainName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.size() <= 255 && name.find('/') == std::string::npos;
}

// "warped.nii.gz", or one folder deep: "warped_dicom/IM00001.dcm" (a DICOM
// series). Nothing else: no absolute paths, "..", or deeper folders.
absl::Status CheckResultFileName(const std::string& name) {
  const size_t slash = name.find('/');
  const bool ok = slash == std::string::npos
                      ? IsPlainName(name)
                      : IsPlainName(name.substr(0, slash)) && IsPlainName(name.substr(slash + 1));
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat("result file name ", QuoteBounded(name, 64),
                                                   " is not a plain file name (or folder/file name)"));
  }
  return CheckIdentifierText(name, "result file name");
}

// The folder `files` lie in: each path less its name ("a/b" names one level more).
fs::path ResultFolder(const v1::ResultFile& f) {
  fs::path dir = fs::path(f.path()).parent_path();
  if (f.name().find('/') != std::string::npos) dir = dir.parent_path();
  return dir;
}

}  // namespace

absl::Status ReadFilePieces(const std::string& path, const std::string& label, int64_t offset, int64_t chunk_bytes,
                            const std::function<absl::Status(int64_t offset, absl::string_view data,
                                                             int64_t total_bytes)>& piece) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::DataLossError(absl::StrCat(label, " cannot be read: ", std::strerror(errno)));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return absl::DataLossError(absl::StrCat(label, " is not a file"));
  const int64_t total = static_cast<int64_t>(st.st_size);
  if (offset > total) {
    return absl::OutOfRangeError(absl::StrCat("offset ", offset, " is past the end of ", label, " (", total, " bytes)"));
  }
  chunk_bytes = std::max<int64_t>(1, chunk_bytes);
  std::string buffer(static_cast<size_t>(std::min(chunk_bytes, std::max<int64_t>(total - offset, 1))), '\0');
  bool first = true;
  while (first || offset < total) {
    const int64_t want = std::min<int64_t>(chunk_bytes, total - offset);
    int64_t got = 0;
    while (got < want) {
      const ssize_t n = ::pread(fd, buffer.data() + got, static_cast<size_t>(want - got), offset + got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return absl::DataLossError(absl::StrCat("cannot read ", label, ": ", std::strerror(errno)));
      if (n == 0) return absl::DataLossError(absl::StrCat(label, " shrank while it was read"));
      got += n;
    }
    TESSERA_RETURN_IF_ERROR(piece(offset, absl::string_view(buffer.data(), static_cast<size_t>(got)), total));
    offset += got;
    first = false;
  }
  return absl::OkStatus();
}

absl::Status SendResultFiles(const google::protobuf::RepeatedPtrField<v1::ResultFile>& files, int64_t chunk_bytes,
                             const std::function<bool(const v1::ExecuteUpdate&)>& write) {
  for (const v1::ResultFile& f : files) {
    int64_t size = 0;
    TESSERA_RETURN_IF_ERROR(ReadFilePieces(
        f.path(), absl::StrCat("result file ", f.path()), 0, chunk_bytes,
        [&](int64_t offset, absl::string_view data, int64_t total_bytes) {
          size = total_bytes;
          v1::ExecuteUpdate update;
          v1::ResultChunk* chunk = update.mutable_file_chunk();
          chunk->set_name(f.name());
          chunk->set_offset(offset);
          chunk->set_data(data.data(), data.size());
          if (!write(update)) return absl::UnavailableError("the scheduler's stream broke while result files were sent");
          return absl::OkStatus();
        }));
    if (size != f.bytes()) {
      return absl::DataLossError(
          absl::StrCat("result file ", f.path(), " has ", size, " bytes, the engine reported ", f.bytes()));
    }
  }
  return absl::OkStatus();
}

void RemoveResultFolder(const google::protobuf::RepeatedPtrField<v1::ResultFile>& files) {
  if (files.empty()) return;
  const fs::path dir = ResultFolder(files[0]);
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) TESSERA_LOG(WARNING) << "cannot remove the sent result folder " << dir.string() << ": " << ec.message();
}

ResultReceiver::ResultReceiver(std::string results_dir, std::string job_id, int attempt)
    : results_dir_(std::move(results_dir)),
      job_id_(std::move(job_id)),
      work_dir_((fs::path(results_dir_) / absl::StrCat(job_id_, ".attempt-", attempt, ".tmp")).string()) {}

ResultReceiver::~ResultReceiver() {
  CloseAll(/*sync=*/false).IgnoreError();
  if (!published_ && !files_.empty()) {
    std::error_code ec;
    fs::remove_all(work_dir_, ec);
  }
}

absl::Status ResultReceiver::Add(const v1::ResultChunk& chunk) {
  auto it = files_.find(chunk.name());
  if (it == files_.end()) {
    if (absl::Status ok = CheckResultFileName(chunk.name()); !ok.ok()) return ok;
    if (files_.size() >= kMaxResultFiles) {
      return absl::InvalidArgumentError(absl::StrCat("more than ", kMaxResultFiles, " result files"));
    }
    if (files_.empty()) {
      std::error_code ec;
      fs::remove_all(work_dir_, ec);  // a leftover of an earlier try of this attempt
      fs::create_directories(work_dir_, ec);
      if (ec) return absl::InternalError(absl::StrCat("cannot create ", work_dir_, ": ", ec.message()));
    }
    // Files arrive one after another: the one before is whole, so close it
    // (a series of thousands of files must not hold thousands open).
    if (absl::Status closed = CloseAll(/*sync=*/true); !closed.ok()) return closed;
    const size_t slash = chunk.name().find('/');
    if (slash != std::string::npos) {
      const fs::path folder = fs::path(work_dir_) / chunk.name().substr(0, slash);
      std::error_code ec;
      if (folders_.insert(folder.string()).second) fs::create_directory(folder, ec);
      if (ec) return absl::InternalError(absl::StrCat("cannot create ", folder.string(), ": ", ec.message()));
    }
    const std::string path = (fs::path(work_dir_) / chunk.name()).string();
    Incoming incoming;
    incoming.file = std::fopen(path.c_str(), "wbx");
    if (incoming.file == nullptr) return absl::InternalError(absl::StrCat("cannot create ", path));
    it = files_.emplace(chunk.name(), incoming).first;
  }
  Incoming& f = it->second;
  if (f.file == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("result file ", QuoteBounded(chunk.name(), 64), " came twice"));
  }
  if (chunk.offset() != f.bytes) {
    return absl::InvalidArgumentError(absl::StrCat("result file ", QuoteBounded(chunk.name(), 64), ": a piece at ",
                                                   chunk.offset(), " where ", f.bytes, " was next"));
  }
  if (!chunk.data().empty() && std::fwrite(chunk.data().data(), 1, chunk.data().size(), f.file) != chunk.data().size()) {
    return absl::InternalError(absl::StrCat("cannot write result file ", chunk.name(), " under ", work_dir_));
  }
  f.bytes += static_cast<int64_t>(chunk.data().size());
  return absl::OkStatus();
}

absl::Status ResultReceiver::CloseAll(bool sync) {
  absl::Status status;
  for (auto& [name, f] : files_) {
    if (f.file == nullptr) continue;
    bool ok = std::fflush(f.file) == 0;
    if (sync) ok = ok && fsync(fileno(f.file)) == 0;
    ok = (std::fclose(f.file) == 0) && ok;
    f.file = nullptr;
    if (!ok && status.ok()) status = absl::InternalError(absl::StrCat("cannot write result file ", name));
  }
  return status;
}

absl::Status ResultReceiver::Publish(google::protobuf::RepeatedPtrField<v1::ResultFile>* files) {
  if (absl::Status closed = CloseAll(/*sync=*/true); !closed.ok()) return closed;
  if (static_cast<size_t>(files->size()) != files_.size()) {
    return absl::DataLossError(absl::StrCat("the worker named ", files->size(), " result files and sent ",
                                            files_.size()));
  }
  for (const v1::ResultFile& f : *files) {
    auto it = files_.find(f.name());
    if (it == files_.end()) {
      return absl::DataLossError(absl::StrCat("result file ", QuoteBounded(f.name(), 64), " never arrived"));
    }
    if (it->second.bytes != f.bytes()) {
      return absl::DataLossError(absl::StrCat("result file ", QuoteBounded(f.name(), 64), " arrived with ",
                                              it->second.bytes, " of its ", f.bytes(), " bytes"));
    }
  }
  const fs::path final_dir = fs::path(results_dir_) / job_id_;
  std::error_code ec;
  if (!files_.empty()) {
    for (const std::string& folder : folders_) {
      if (absl::Status synced = SyncDirectory(folder); !synced.ok()) return synced;
    }
    if (absl::Status synced = SyncDirectory(work_dir_); !synced.ok()) return synced;
    fs::remove_all(final_dir, ec);
    fs::rename(work_dir_, final_dir, ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot publish ", final_dir.string(), ": ", ec.message()));
    if (absl::Status synced = SyncDirectory(results_dir_); !synced.ok()) return synced;
  }
  published_ = true;
  for (v1::ResultFile& f : *files) f.set_path((final_dir / f.name()).string());
  return absl::OkStatus();
}

}  // namespace tessera::scheduler

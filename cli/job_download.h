// `tessera job download` (issue 35): a job's result files fetched over
// SchedulerService.DownloadFile into a local folder, so a client without the
// server's disk gets them. A file already partly there (an earlier broken
// download) resumes from its size; one already whole is left as it is.
#ifndef TESSERA_CLI_JOB_DOWNLOAD_H_
#define TESSERA_CLI_JOB_DOWNLOAD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tessera/v1/scheduler.grpc.pb.h"

namespace tessera::cli {

struct DownloadedFile {
  std::string name;   // the JobResult's name ("warped.nii.gz", "warped_dicom/IM00001.dcm")
  std::string path;   // where it is now
  int64_t bytes = 0;  // its size
  int64_t received = 0;  // bytes fetched by this call (less when resumed)
};

// Downloads `name` (empty: every file of the job's result) of job `job_id`
// into `out_dir` (created), keeping each name's one sub-folder. A name that
// is absolute or has a ".." part is refused (INVALID_ARGUMENT); server errors
// come back as their status.
absl::StatusOr<std::vector<DownloadedFile>> DownloadJobFiles(v1::SchedulerService::Stub& stub,
                                                             const std::string& job_id, const std::string& name,
                                                             const std::string& out_dir);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_JOB_DOWNLOAD_H_

// Who may see a job (issue 31), decided in one place for every service's job
// RPCs (JobCore) and for SchedulerService. A job records its owner (the
// principal that submitted it) and the fingerprint gallery it touches.
//
// Without authentication (a server without --token-file: the caller's
// principal is empty) every job is everyone's, as before ownership. With it:
//   - a job without a gallery: its owner, or an admin;
//   - a gallery job: its owner while still granted that gallery (checked at
//     every read, so a revoked grant hides its results), or an admin of that
//     gallery (GalleryGrants::RoleOn).
// Anyone else gets NOT_FOUND worded as for a job that does not exist, so a
// job's existence does not leak.
#ifndef TESSERA_SERVICES_JOBS_JOB_ACCESS_H_
#define TESSERA_SERVICES_JOBS_JOB_ACCESS_H_

#include <functional>
#include <string>

#include "services/jobs/job_store.h"
#include "services/server/auth.h"

namespace tessera::jobs {

// A call asking about jobs, as the job tier sees it (plain C++: the gRPC edge,
// job_rpcs.h's CallerOf, fills it from the call).
struct JobCaller {
  CallIdentity identity;  // principal "" without authentication
  // Told the gallery of each job the caller was allowed to see, so the call's
  // audit record names it (AnnotateCallGallery); may be empty.
  std::function<void(const std::string& gallery)> saw_gallery;
};

// Whether `caller` may see `job` (and so get, watch, read, download and
// cancel it).
bool MaySeeJob(const CallIdentity& caller, const JobRecord& job);

// OK when `caller` may see `job`, and its gallery is then told to
// caller.saw_gallery (the call's audit record); `hidden` otherwise: the
// caller's own NOT_FOUND for a job that does not exist.
absl::Status CheckJobVisible(const JobCaller& caller, const JobRecord& job, const absl::Status& hidden);

// A listing as `caller` may see it: an authenticated non-admin lists only its
// own jobs (filter->owner is set to it; a filter naming another owner is
// PERMISSION_DENIED).
absl::Status RestrictListing(const CallIdentity& caller, JobFilter* filter);

// The owner a job submitted by `caller` records ("" without authentication).
inline const std::string& OwnerOf(const CallIdentity& caller) { return caller.principal; }

}  // namespace tessera::jobs

#endif  // TESSERA_SERVICES_JOBS_JOB_ACCESS_H_

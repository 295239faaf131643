#include "services/jobs/job_access.h"

#include "absl/strings/str_cat.h"

namespace tessera::jobs {

bool MaySeeJob(const CallIdentity& caller, const JobRecord& job) {
  if (caller.principal.empty()) return true;  // no authentication
  if (job.gallery.empty()) return caller.principal == job.owner || caller.role >= Role::kAdmin;
  const Role on_gallery = caller.galleries.RoleOn(job.gallery, caller.role);
  if (on_gallery >= Role::kAdmin) return true;
  return caller.principal == job.owner && on_gallery >= Role::kReader;
}

absl::Status CheckJobVisible(const JobCaller& caller, const JobRecord& job, const absl::Status& hidden) {
  if (!MaySeeJob(caller.identity, job)) return hidden;
  if (caller.saw_gallery && !job.gallery.empty()) caller.saw_gallery(job.gallery);
  return absl::OkStatus();
}

absl::Status RestrictListing(const CallIdentity& caller, JobFilter* filter) {
  if (caller.principal.empty() || caller.role >= Role::kAdmin) return absl::OkStatus();
  if (filter->owner.has_value() && *filter->owner != caller.principal) {
    return absl::PermissionDeniedError(
        absl::StrCat("principal '", caller.principal, "' may list only its own jobs (admins list all)"));
  }
  filter->owner = caller.principal;
  return absl::OkStatus();
}

}  // namespace tessera::jobs

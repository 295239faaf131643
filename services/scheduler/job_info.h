// Store rows as the API shows them: JobRecord -> tessera.v1.JobInfo,
// StoredEvent -> tessera.v1.JobEvent, and JobProgress -> tessera.v1.Progress.
#ifndef TESSERA_SERVICES_SCHEDULER_JOB_INFO_H_
#define TESSERA_SERVICES_SCHEDULER_JOB_INFO_H_

#include "services/jobs/job_store.h"
#include "tessera/v1/jobs.pb.h"

namespace tessera::scheduler {

v1::JobInfo ToJobInfo(const jobs::JobRecord& job);
// `trace_id`: the job's (JobRecord::trace_id), which every event of it carries.
v1::JobEvent ToJobEvent(const jobs::StoredEvent& event, const std::string& trace_id);
v1::Progress ToProgress(const std::string& job_id, jobs::JobState state, const jobs::JobProgress& progress);
jobs::JobProgress FromProgress(const v1::Progress& progress);

}  // namespace tessera::scheduler

#endif  // TESSERA_SERVICES_SCHEDULER_JOB_INFO_H_

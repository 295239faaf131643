// Atlas-training progress (atlas_training.h) as a job's progress
// (services/jobs): the same stages, fraction and message; epochs also as
// step / total_steps and the metrics "epoch" (1-based), "radius", "qe",
// "topographic_error" and "epoch_seconds". Used by SomAtlasService's jobs and
// the scheduler's "som.train" engine, so both report alike.
#ifndef TESSERA_SERVICES_SOM_ATLAS_JOB_PROGRESS_H_
#define TESSERA_SERVICES_SOM_ATLAS_JOB_PROGRESS_H_

#include "services/jobs/job_types.h"
#include "services/som/atlas_training.h"

namespace tessera {
namespace som {

jobs::JobProgress ToJobProgress(const AtlasTrainingProgress& progress);

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_SERVICES_SOM_ATLAS_JOB_PROGRESS_H_

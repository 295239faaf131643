#include "services/som/atlas_job_progress.h"

namespace tessera {
namespace som {

jobs::JobProgress ToJobProgress(const AtlasTrainingProgress& progress) {
  jobs::JobProgress p;
  p.stage = progress.stage;
  p.message = progress.message;
  p.fraction = progress.fraction;
  if (progress.stage == "epoch") {
    const EpochReport& r = progress.epoch;
    p.step = r.epoch + 1;
    p.total_steps = progress.max_epochs;
    p.metrics["epoch"] = r.epoch + 1;
    p.metrics["radius"] = r.radius;
    p.metrics["qe"] = r.qe;
    p.metrics["topographic_error"] = r.topographic_error;
    p.metrics["epoch_seconds"] = r.seconds;
  }
  return p;
}

}  // namespace som
}  // namespace tessera

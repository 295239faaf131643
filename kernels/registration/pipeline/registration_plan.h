// A registration resolved once from its options: the options checked, the
// stages that run, where the arrays live and the precision. The devices stay
// as named (options.device, options.gpus): the backend is the running
// process's to resolve (a job is planned at submit, maybe on a GPU-less
// scheduler, and runs on a worker).
// Register runs a plan; the registration job engine makes one per job at
// submit (services/registration/registration_engine.h) and its Validate,
// Needs and Run read that same plan.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_REGISTRATION_PLAN_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_REGISTRATION_PLAN_H_

#include "absl/status/statusor.h"
#include "kernels/registration/pipeline/option_enums.h"
#include "kernels/registration/pipeline/registrar.h"

namespace tessera::registration {

// Where a run's arrays live.
enum class Residency {
  kInCore,     // the whole pyramid and the deformable stage's arrays on one device
  kSharded,    // the deformable stage sharded along z over ranks (sharded_deformable_stage.h)
  kOutOfCore,  // every phase within a device budget, the rest on the host (out_of_core_stage.h)
};
const char* ResidencyName(Residency residency);  // "in core", "sharded", "out of core"

struct RegistrationPlan {
  RegistrationOptions options;  // checked
  bool rigid = false, affine = false, deformable = false;
  // As planned from the options: out of core when forced; a run whose pair
  // does not fit its device budget or the GPU's free memory goes out of core
  // at run time (ChooseOutOfCore: the sizes and free memory are the
  // worker's), and its log says so.
  Residency residency = Residency::kInCore;
  // The deformable stage's storage precision: kMixed only where it applies
  // (LeanStageUsesMixedPrecision), whatever options.precision asked.
  Precision precision = Precision::kFull;
};

// Checks the options (INVALID_ARGUMENT naming the field) and resolves them
// into a plan.
absl::StatusOr<RegistrationPlan> PlanRegistration(const RegistrationOptions& options);

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_REGISTRATION_PLAN_H_

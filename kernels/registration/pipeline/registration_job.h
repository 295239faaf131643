// One registration from inputs to files and a summary: what `tessera
// register` and RegistrationService both run. Adds to Register() the label
// handling (Dice before and after), the output files and a JSON summary.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_REGISTRATION_JOB_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_REGISTRATION_JOB_H_

#include <atomic>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kernels/registration/pipeline/outputs.h"
#include "kernels/registration/pipeline/registrar.h"
#include "kernels/registration/pipeline/registration_plan.h"

namespace tessera::registration {

struct RegistrationInputs {
  Volume fixed, moving;
  std::optional<Volume> fixed_labels, moving_labels;
  // Issue 34: RegistrationOptions::fixed_mask / moving_mask /
  // initial_transform of the run (RunRegistration sets them on the plan).
  std::optional<Volume> fixed_mask, moving_mask;
  std::optional<Mat4> initial_transform;
};

struct RegistrationSummary {
  RegistrationResult result;
  OutputFiles files;
  // When both label maps are given (definitions: label_dice.h): mean Dice over
  // every label present in either map, and over the labels with at least
  // kLargeLabelMinVoxels voxels in the fixed map.
  std::optional<double> dice_before, dice_after;
  std::optional<double> dice_large_before, dice_large_after;
  int dice_labels = 0, dice_large_labels = 0;
  double folded_percent = 0;                      // % of voxels with det J <= 0
  NDArray warped_labels;                          // int32 on the fixed grid, when moving labels are given
};

// Label maps stored as float (common) become int32; integer maps are kept.
absl::Status ToIntegerLabels(Volume& labels);

// Reads the four volumes (labels optional: empty path) with clear errors.
absl::StatusOr<RegistrationInputs> ReadRegistrationInputs(const std::string& fixed, const std::string& moving,
                                                          const std::string& fixed_labels,
                                                          const std::string& moving_labels);

// Registers, scores and (when out_dir is non-empty) writes the output files
// (`formats`: NIfTI, DICOM or both; OutputWriter). `cancel` and `deadline`
// as for Register().
absl::StatusOr<RegistrationSummary> RunRegistration(const RegistrationInputs& inputs, const RegistrationPlan& plan,
                                                    const std::string& out_dir, bool inverse_warp,
                                                    const ProgressCallback& progress = nullptr,
                                                    const std::atomic<bool>* cancel = nullptr,
                                                    absl::Time deadline = absl::InfiniteFuture(),
                                                    const dicom::ResultOutputPlan& formats = {});

// {"final_loss":..., "dice_before":..., "dice_large_before":..., "dice_definition": {...}, "folded_percent":...,
//  "seconds":..., ...}
std::string SummaryToJson(const RegistrationSummary& summary, const RegistrationOptions& options);

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_REGISTRATION_JOB_H_

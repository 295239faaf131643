#include "kernels/registration/pipeline/registration_job.h"

#include <cmath>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/nifti_io.h"
#include "common/status.h"
#include "kernels/registration/pipeline/label_dice.h"

namespace tessera::registration {
namespace {

using Json = nlohmann::ordered_json;  // keys in the order written

// A summary number: 6 significant digits, as the summary has always had;
// integral values stay JSON integers ("%.6g" wrote them without a point);
// non-finite ones are null.
Json Num(double v) {
  if (!std::isfinite(v)) return nullptr;
  double rounded = 0;
  if (!absl::SimpleAtod(absl::StrFormat("%.6g", v), &rounded)) return v;
  if (rounded == std::trunc(rounded) && std::fabs(rounded) < 9e15) return static_cast<int64_t>(rounded);
  return rounded;
}

Json Num(const std::optional<double>& v) { return v ? Num(*v) : Json(nullptr); }

}  // namespace

absl::Status ToIntegerLabels(Volume& labels) {
  const DType t = labels.data.dtype();
  if (t == DType::kFloat32 || t == DType::kFloat64) {
    TESSERA_ASSIGN_OR_RETURN(labels.data, labels.data.AsType(DType::kInt32));
  }
  return absl::OkStatus();
}

absl::StatusOr<RegistrationInputs> ReadRegistrationInputs(const std::string& fixed, const std::string& moving,
                                                          const std::string& fixed_labels,
                                                          const std::string& moving_labels) {
  RegistrationInputs in;
  TESSERA_ASSIGN_OR_RETURN(in.fixed, ReadNifti(fixed));
  TESSERA_ASSIGN_OR_RETURN(in.moving, ReadNifti(moving));
  if (!fixed_labels.empty()) {
    TESSERA_ASSIGN_OR_RETURN(in.fixed_labels, ReadNifti(fixed_labels));
    if (in.fixed_labels->data.shape() != in.fixed.data.shape()) {
      return absl::InvalidArgumentError(absl::StrCat("fixed labels ", ShapeToString(in.fixed_labels->data.shape()),
                                                     " do not match the fixed image ", ShapeToString(in.fixed.data.shape())));
    }
  }
  if (!moving_labels.empty()) {
    TESSERA_ASSIGN_OR_RETURN(in.moving_labels, ReadNifti(moving_labels));
  }
  for (std::optional<Volume>* labels : {&in.fixed_labels, &in.moving_labels}) {
    if (labels->has_value()) TESSERA_RETURN_IF_ERROR(ToIntegerLabels(**labels));
  }
  return in;
}

absl::StatusOr<RegistrationSummary> RunRegistration(const RegistrationInputs& inputs, const RegistrationPlan& plan,
                                                    const std::string& out_dir, bool inverse_warp,
                                                    const ProgressCallback& progress, const std::atomic<bool>* cancel,
                                                    absl::Time deadline, const dicom::ResultOutputPlan& formats) {
  RegistrationSummary summary;
  // The inputs' masks and initial transform on the plan (the masks alias
  // `inputs`, which outlive the run).
  RegistrationPlan run_plan = plan;
  const auto alias = [](const std::optional<Volume>& v) {
    return v ? std::shared_ptr<const Volume>(&*v, [](const Volume*) {}) : nullptr;
  };
  if (inputs.fixed_mask) run_plan.options.fixed_mask = alias(inputs.fixed_mask);
  if (inputs.moving_mask) run_plan.options.moving_mask = alias(inputs.moving_mask);
  if (inputs.initial_transform) run_plan.options.initial_transform = inputs.initial_transform;
  // "Before" = the moving labels placed on the fixed grid by the headers
  // alone: it needs no registration, so it is scored on a thread while
  // Register runs instead of after it (issue 37: the command's wall time).
  // A std::async future waits for its task when destroyed, so an early
  // error return below still joins it.
  const bool score_labels = inputs.moving_labels.has_value() && inputs.fixed_labels.has_value();
  std::future<absl::StatusOr<DiceMeans>> before;
  if (score_labels) {
    before = std::async(std::launch::async, [&]() -> absl::StatusOr<DiceMeans> {
      RegistrationResult identity;
      identity.affine_ras = Mat4{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
      TESSERA_ASSIGN_OR_RETURN(NDArray placed, WarpLabels(*inputs.moving_labels, inputs.fixed, identity,
                                                          plan.options.device, plan.options.sampler));
      return ComputeDiceMeans(inputs.fixed_labels->data, placed, inputs.fixed.geometry);
    });
  }
  TESSERA_ASSIGN_OR_RETURN(summary.result,
                           Register(inputs.fixed, inputs.moving, run_plan, progress, cancel, deadline));
  const absl::Time registered = absl::Now();
  const RegistrationResult& result = summary.result;
  if (result.jacobian.voxels > 0) {
    summary.folded_percent = 100.0 * result.jacobian.nonpositive / result.jacobian.voxels;
  }
  // The transform outputs are written while the labels are warped and scored.
  std::unique_ptr<OutputWriter> writer;
  if (!out_dir.empty()) {
    TESSERA_ASSIGN_OR_RETURN(writer, OutputWriter::Start(result, inputs.fixed, out_dir, inverse_warp, formats));
  }
  if (inputs.moving_labels.has_value()) {
    TESSERA_ASSIGN_OR_RETURN(summary.warped_labels, WarpLabels(*inputs.moving_labels, inputs.fixed, result, plan.options.device,
                                                                 plan.options.sampler));
    if (score_labels) {
      TESSERA_ASSIGN_OR_RETURN(DiceMeans a, ComputeDiceMeans(inputs.fixed_labels->data, summary.warped_labels,
                                                             inputs.fixed.geometry));
      TESSERA_ASSIGN_OR_RETURN(DiceMeans b, before.get());
      summary.dice_before = b.mean_all;
      summary.dice_after = a.mean_all;
      summary.dice_large_before = b.mean_large;
      summary.dice_large_after = a.mean_large;
      summary.dice_labels = a.labels;
      summary.dice_large_labels = a.large_labels;
    }
  }
  const absl::Time labelled = absl::Now();
  if (writer != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(summary.files,
                             writer->Finish(summary.warped_labels.empty() ? nullptr : &summary.warped_labels));
    // What each DICOM output holds (values exact or rescaled, the largest error).
    for (const std::string& note : summary.files.notes) summary.result.log.push_back(note);
  }
  // Where the time after Register goes (issue 37's whole-command budget).
  summary.result.log.push_back(absl::StrFormat(
      "timing (wall): labels warped and scored %.3f s, outputs finished %.3f s later (written while labels ran)",
      absl::ToDoubleSeconds(labelled - registered), absl::ToDoubleSeconds(absl::Now() - labelled)));
  return summary;
}

std::string SummaryToJson(const RegistrationSummary& s, const RegistrationOptions& options) {
  const RegistrationResult& r = s.result;
  Json affine = Json::array();
  for (int i = 0; i < 16; ++i) affine.push_back(Num(r.affine_ras[i]));
  Json files = Json::object();
  for (const auto& [key, path] : {std::pair<const char*, const std::string*>{"warped", &s.files.warped},
                                  {"warped_labels", &s.files.warped_labels},
                                  {"affine", &s.files.affine},
                                  {"warp", &s.files.warp},
                                  {"inverse_warp", &s.files.inverse_warp},
                                  {"warped_dicom", &s.files.warped_dicom},
                                  {"warped_labels_dicom", &s.files.warped_labels_dicom}}) {
    if (!path->empty()) files[key] = *path;
  }
  std::vector<std::string> stages;
  for (const Stage stage : options.stages) stages.push_back(OptionName(stage));
  const Json json{
      {"metric", OptionName(options.metric)},
      {"stages", stages},
      {"scales", options.scales},
      {"backend", r.backend},
      {"initial_loss", Num(r.initial_loss)},
      {"final_loss", Num(r.final_loss)},
      {"dice_before", Num(s.dice_before)},
      {"dice_after", Num(s.dice_after)},
      {"dice_large_before", Num(s.dice_large_before)},
      {"dice_large_after", Num(s.dice_large_after)},
      // Says which mean is which, so a reader never has to guess.
      {"dice_definition",
       {{"dice_before/after", "mean over all labels present in either map (background 0 excluded)"},
        {"dice_large_before/after",
         absl::StrCat("mean over labels with >= ", kLargeLabelMinVoxels, " voxels in the fixed labels")},
        {"labels", s.dice_labels},
        {"large_labels", s.dice_large_labels},
        {"large_min_voxels", kLargeLabelMinVoxels}}},
      {"folded_percent", Num(s.folded_percent)},
      {"min_jacobian", r.jacobian.voxels ? Num(r.jacobian.min_det) : Json(nullptr)},
      {"seconds", Num(r.seconds)},
      {"peak_device_bytes", r.peak_device_bytes},
      {"affine_ras", std::move(affine)},
      {"files", std::move(files)},
      {"log", r.log}};
  // Paths and log lines that are not UTF-8 become U+FFFD instead of throwing.
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace tessera::registration

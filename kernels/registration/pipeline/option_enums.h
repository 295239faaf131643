// The registration options that take one of a few named values, as enums,
// with their names: requests, flags and summaries spell them ("lncc",
// "adam"); the pipeline compares enums. ParseOption is the one place a name
// becomes a value (INVALID_ARGUMENT naming the field and the choices).
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_OPTION_ENUMS_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_OPTION_ENUMS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace tessera::registration {

enum class Metric { kMse, kLncc, kMi };
enum class Stage { kRigid, kAffine, kDeformable };
// Initial transform: the centres of mass aligned, or identity.
enum class Init { kCentreOfMass, kNone };
// The greedy deformable update: a normalised gradient step, or Adam.
enum class DeformableStep { kNormalized, kAdam };
enum class DeformableModel { kGreedy, kBspline };
enum class MemoryMode { kLean, kStandard };
enum class Precision { kFull, kMixed };

// Each enum's values and names, in the order messages list them.
template <typename E>
struct Named {
  E value;
  const char* name;
};
inline absl::Span<const Named<Metric>> NamesOf(Metric) {
  static constexpr Named<Metric> kNames[] = {{Metric::kMse, "mse"}, {Metric::kLncc, "lncc"}, {Metric::kMi, "mi"}};
  return kNames;
}
inline absl::Span<const Named<Stage>> NamesOf(Stage) {
  static constexpr Named<Stage> kNames[] = {
      {Stage::kRigid, "rigid"}, {Stage::kAffine, "affine"}, {Stage::kDeformable, "deformable"}};
  return kNames;
}
inline absl::Span<const Named<Init>> NamesOf(Init) {
  static constexpr Named<Init> kNames[] = {{Init::kCentreOfMass, "com"}, {Init::kNone, "none"}};
  return kNames;
}
inline absl::Span<const Named<DeformableStep>> NamesOf(DeformableStep) {
  static constexpr Named<DeformableStep> kNames[] = {{DeformableStep::kNormalized, "normalized"},
                                                     {DeformableStep::kAdam, "adam"}};
  return kNames;
}
inline absl::Span<const Named<DeformableModel>> NamesOf(DeformableModel) {
  static constexpr Named<DeformableModel> kNames[] = {{DeformableModel::kGreedy, "greedy"},
                                                      {DeformableModel::kBspline, "bspline"}};
  return kNames;
}
inline absl::Span<const Named<MemoryMode>> NamesOf(MemoryMode) {
  static constexpr Named<MemoryMode> kNames[] = {{MemoryMode::kLean, "lean"}, {MemoryMode::kStandard, "standard"}};
  return kNames;
}
inline absl::Span<const Named<Precision>> NamesOf(Precision) {
  static constexpr Named<Precision> kNames[] = {{Precision::kFull, "full"}, {Precision::kMixed, "mixed"}};
  return kNames;
}

// "mse", "adam", ...
template <typename E>
const char* OptionName(E value) {
  for (const auto& [v, name] : NamesOf(E{})) {
    if (v == value) return name;
  }
  return "?";
}

// "mse, lncc, mi"
template <typename E>
std::string OptionChoices() {
  std::string out;
  for (const auto& [v, name] : NamesOf(E{})) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

absl::Status UnknownOptionName(absl::string_view field, absl::string_view text, const std::string& choices);

// The value `text` names; INVALID_ARGUMENT "<field> 'x' is not one of a, b"
// otherwise.
template <typename E>
absl::StatusOr<E> ParseOption(absl::string_view text, absl::string_view field) {
  for (const auto& [v, name] : NamesOf(E{})) {
    if (text == name) return v;
  }
  return UnknownOptionName(field, text, OptionChoices<E>());
}

// Each of `names` (a stage list).
template <typename E>
absl::StatusOr<std::vector<E>> ParseOptions(const std::vector<std::string>& names, absl::string_view field) {
  std::vector<E> out;
  for (const std::string& name : names) {
    absl::StatusOr<E> v = ParseOption<E>(name, field);
    if (!v.ok()) return v.status();
    out.push_back(*v);
  }
  return out;
}

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_OPTION_ENUMS_H_

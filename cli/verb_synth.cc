// `tessera synth`: makes a registration problem with a known answer from a
// real volume: the volume (and its labels) deformed by a random rigid motion
// plus a smooth random field, with an intensity change. For trying
// `tessera register` and reproducing benchmarks.
#include <cstdio>

#include "absl/strings/numbers.h"
#include "cli/args.h"
#include "cli/demo_context.h"
#include "cli/verbs.h"
#include "common/nifti_io.h"
#include "kernels/registration/pipeline/synthetic.h"

namespace tessera::cli {

int RunSynth(int argc, char** argv) {
  const std::vector<FlagSpec> specs = {
      {"image", "/usr/share/mricron/templates/ch2.nii.gz", "source volume (NIfTI)"},
      {"labels", "", "label map on the source grid (optional)"},
      {"out", "synth-out", "directory for moving.nii.gz (and moving_labels.nii.gz)"},
      {"seed", "1", "random seed"},
      {"rotation-deg", "4", "rotation about a random axis, degrees"},
      {"translation-mm", "4", "shift in a random direction, mm"},
      {"deformation-mm", "4", "peak amplitude of the smooth random field, mm"},
      {"intensity", "gamma", "intensity change: gamma (monotonic) or nonmonotonic"},
  };
  auto args = Args::Parse(specs, argc, argv, 1);
  if (!args.ok() || args->help()) {
    if (!args.ok()) std::fprintf(stderr, "tessera synth: %s\n", std::string(args.status().message()).c_str());
    std::fprintf(args.ok() ? stdout : stderr, "usage: tessera synth [flags]\n%s", FlagsHelp(specs).c_str());
    return args.ok() ? 0 : 2;
  }
  registration::SyntheticOptions options;
  int seed = 0;
  if (!absl::SimpleAtoi(args->Get("seed"), &seed) || !absl::SimpleAtod(args->Get("rotation-deg"), &options.rotation_deg) ||
      !absl::SimpleAtod(args->Get("translation-mm"), &options.translation_mm) ||
      !absl::SimpleAtod(args->Get("deformation-mm"), &options.deformation_mm)) {
    std::fprintf(stderr, "tessera synth: --seed, --rotation-deg, --translation-mm and --deformation-mm take numbers\n");
    return 2;
  }
  options.seed = static_cast<uint64_t>(seed);
  const std::string intensity = args->Get("intensity");
  if (intensity != "gamma" && intensity != "nonmonotonic") {
    std::fprintf(stderr, "tessera synth: --intensity must be gamma or nonmonotonic\n");
    return 2;
  }
  options.intensity = intensity == "gamma" ? registration::IntensityChange::kGamma
                                           : registration::IntensityChange::kNonMonotonic;
  auto image = ReadNifti(args->Get("image"));
  if (!image.ok()) {
    std::fprintf(stderr, "tessera synth: %s\n", std::string(image.status().message()).c_str());
    return 1;
  }
  std::optional<Volume> labels;
  if (!args->Get("labels").empty()) {
    auto read = ReadNifti(args->Get("labels"));
    if (!read.ok()) {
      std::fprintf(stderr, "tessera synth: %s\n", std::string(read.status().message()).c_str());
      return 1;
    }
    labels = *std::move(read);
  }
  auto pair = registration::MakeSyntheticPair(*image, labels ? &*labels : nullptr, options);
  const std::string out = args->Get("out");
  absl::Status s = pair.ok() ? DemoContext::EnsureDir(out) : pair.status();
  if (s.ok()) s = WriteNifti(pair->moving, out + "/moving.nii.gz");
  if (s.ok() && pair->moving_labels) s = WriteNifti(*pair->moving_labels, out + "/moving_labels.nii.gz");
  if (!s.ok()) {
    std::fprintf(stderr, "tessera synth: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::printf("%s/moving.nii.gz%s\n", out.c_str(), pair->moving_labels ? (" " + out + "/moving_labels.nii.gz").c_str() : "");
  return 0;
}

}  // namespace tessera::cli

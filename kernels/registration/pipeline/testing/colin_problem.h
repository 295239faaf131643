// Test fixture shared by the registration tests: Colin27 (Debian's
// mricron-data) and its AAL labels downsampled, warped by a synthetic
// transform with a known answer (synthetic.h).
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_TESTING_COLIN_PROBLEM_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_TESTING_COLIN_PROBLEM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/registration/pipeline/registrar.h"
#include "kernels/registration/pipeline/synthetic.h"

namespace tessera::registration {

struct ColinProblem {
  Volume fixed, fixed_labels;
  SyntheticPair pair;
};

// Colin27 downsampled `factor` times (2: 2 mm), moving = a synthetic warp of it
// with `intensity` and `seed`. Fails the calling test when the data is missing.
ColinProblem MakeColinProblem(IntensityChange intensity, uint64_t seed, int factor);

// The quick schedule the registration tests share: scales 2,1, rigid and
// affine 40,20 iterations, `deformable_iterations` per scale, CPU backend,
// gradient sigma 3 voxels: these tests compare loops and shardings on small
// (3 mm) volumes, where the default sigma 6's 18-slice halo would leave too
// few slices per shard to shard at all.
RegistrationOptions QuickColinOptions(Metric metric, std::vector<int> deformable_iterations = {80, 40});

// True when a line of a registration's log contains `text`.
bool LogHas(const std::vector<std::string>& log, const std::string& text);


}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_TESTING_COLIN_PROBLEM_H_

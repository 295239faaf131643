// Random affines for the transform tests: identity plus uniform
// perturbations of the 3x3 part (each entry within +-linear) and a
// translation within +-shift mm. Deterministic for a seeded generator.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_TESTING_RANDOM_AFFINE_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_TESTING_RANDOM_AFFINE_H_

#include <random>

#include "common/volume.h"

namespace tessera::registration::testing {

inline Mat4 RandomAffine(std::mt19937& rng, double linear, double shift) {
  std::uniform_real_distribution<double> u(-1, 1);
  Mat4 t{};
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 3; ++c) t[r * 4 + c] = (r == c ? 1.0 : 0.0) + linear * u(rng);
    t[r * 4 + 3] = shift * u(rng);
  }
  t[15] = 1;
  return t;
}

}  // namespace tessera::registration::testing

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_TESTING_RANDOM_AFFINE_H_

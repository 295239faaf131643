// MLEM / OSEM for emission tomography on any recon::LinearOperator (the PET
// projector in practice), on its stream's backend:
//
//   lambda <- lambda / (A_s^T 1) * A_s^T( y_s / (A_s lambda + r_s) )
//
// for subsets s = 0 .. S-1 in order (S = 1: MLEM over the whole range),
// `iterations` times. r is an optional additive background (randoms +
// scatter, expected counts per bin). Voxels with A_s^T 1 = 0 keep their value;
// the update is multiplicative, so a non-negative start stays non-negative.
// The sensitivity images A_s^T 1 are computed once (S volumes in memory).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_PET_OSEM_H_
#define TESSERA_KERNELS_RECONSTRUCTION_PET_OSEM_H_

#include <functional>

#include "absl/status/status.h"
#include "kernels/reconstruction/linear_operator.h"

namespace tessera {
namespace recon {
namespace pet {

// Called after every sub-iteration with its 1-based number, the total
// (iterations * S) and the Poisson log-likelihood sum_i (y_i log ybar_i -
// ybar_i) (see OsemOptions::full_log_likelihood for which one). A non-OK
// status stops the run and is returned (e.g. CANCELLED).
using EmProgress = std::function<absl::Status(int iteration, int total, double log_likelihood)>;

struct OsemOptions {
  int iterations = 1;
  // 0: the operator's num_subsets(); 1: MLEM (whole range per update);
  // otherwise must equal the operator's num_subsets().
  int num_subsets = 0;
  // Optional background r on the full range, in the stream's memory.
  const float* background = nullptr;
  EmProgress progress;
  // false (free): the log-likelihood of the subset's data at the image that
  // entered the sub-iteration (computed from the forward projection the update
  // needs anyway; for MLEM, L(lambda^{k-1}) after iteration k).
  // true: of all the data at the updated image (one extra full forward
  // projection per sub-iteration).
  bool full_log_likelihood = false;
  // Sensitivities at or below this count as "not seen".
  float sensitivity_eps = 1e-12f;
};

// `measured` (the full range, counts) and `image` (domain_size, in: the start
// image, out: the estimate) live in the operator's stream memory. Errors:
// INVALID_ARGUMENT for bad options, or a negative / NaN / infinite measured
// count, background value or start voxel (naming its index); the progress
// callback's error; backend errors.
absl::Status Osem(LinearOperator& op, const float* measured, float* image, const OsemOptions& options);

}  // namespace pet
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_PET_OSEM_H_

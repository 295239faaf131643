// Test- and bench-only: the sparse-view / limited-angle CT comparison of
// issue 36 (FISTA-TV and ASD-POCS against SART and CGLS). A 2-D modified
// Shepp-Logan phantom (Toft's intensities) with exact line integrals
// (fbp/analytic_phantom.h, no inverse crime), parallel beam, optional
// Gaussian noise, and runs that record the NRMSE ||x - truth|| / ||truth||
// after every iteration, so the baselines can be credited with their best
// iteration (their early stopping done by an oracle).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_SPARSE_VIEW_CASE_H_
#define TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_SPARSE_VIEW_CASE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/reconstruction/geometry.h"
#include "kernels/reconstruction/solvers/asd_pocs.h"
#include "kernels/reconstruction/solvers/fista_tv.h"

namespace tessera {
namespace recon {
namespace solvers {
namespace testing {

struct SparseViewCase {
  CtGeometry geometry;
  std::vector<float> sinogram;
  std::vector<float> truth;
  // The reconstruction grid is `upsample` times finer per axis than the
  // truth's (OnFinerGrid); images are averaged over upsample^2 blocks before
  // they are scored.
  int64_t upsample = 1;
};

// The same data and truth, reconstructed on a grid `factor` times finer over
// the same extent: the pixel model's error at sub-pixel edges shrinks; every
// method is scored after block averaging to the truth's grid.
SparseViewCase OnFinerGrid(const SparseViewCase& c, int64_t factor);

// x on c's reconstruction grid, averaged to the truth's grid.
std::vector<float> ToTruthGrid(const SparseViewCase& c, const std::vector<float>& x);

// size x size voxels of 1 mm; `views` angles evenly over [0, range) (pi:
// full parallel scan; less: limited angle); detector 1 mm, wide enough for
// the whole image; noise: Gaussian with sigma = noise x max(sinogram). The
// truth is the phantom averaged over each pixel (4 x 4 point samples).
SparseViewCase SheppLoganCase(int64_t size, int64_t views, double range, double noise = 0, uint32_t seed = 1);

double Nrmse(const std::vector<float>& x, const std::vector<float>& truth);

// One method's run: the NRMSE after each iteration, the best one, the last,
// and the wall time of the whole run (with the NRMSE bookkeeping, which is
// small next to the projections).
struct Trace {
  std::vector<double> nrmse;
  double best = 0;
  int best_iteration = 0;
  double last = 0;
  double seconds = 0;
  std::vector<float> last_x;
};

enum class Baseline { kSart, kCgls };

// CPU runs from x = 0 on the distance-driven projector.
absl::StatusOr<Trace> RunBaseline(const SparseViewCase& c, Baseline method, int iterations, bool non_negative,
                                  int subsets = 1);
absl::StatusOr<Trace> RunFistaTv(const SparseViewCase& c, const FistaTvOptions& options);
// options.epsilon < 0: TIGRE's default, 0.2 ||A FBP(y) - y|| (Ram-Lak FBP);
// options.subsets > 1 builds the projector with that many subsets.
absl::StatusOr<Trace> RunAsdPocs(const SparseViewCase& c, AsdPocsOptions options);

}  // namespace testing
}  // namespace solvers
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_SPARSE_VIEW_CASE_H_

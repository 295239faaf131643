// The system matrix A of a tomographic problem, as the iterative solvers see
// it (SART, OS-SART, CGLS, MLEM/OSEM, CG): a forward map from the volume
// (domain) to the measurements (range) and its adjoint (back projection).
//
// Ranges are made of views (projections), the slowest axis of every sinogram;
// each view holds `elements_per_view()` floats (detector columns x rows, x TOF
// bins for PET). Ordered-subset methods split the views into S interleaved
// subsets (subset s = views s, s + S, s + 2S, ...). A subset's part of the
// range is *compact*: its views back to back, in increasing view order, so the
// solvers' element-wise passes touch only that subset. CopySubset moves data
// between a full sinogram and a subset's compact block.
//
// Pointers live in the memory of the operator's stream backend.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_LINEAR_OPERATOR_H_
#define TESSERA_KERNELS_RECONSTRUCTION_LINEAR_OPERATOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/device.h"

namespace tessera {
namespace recon {

constexpr int kAllSubsets = -1;

class LinearOperator {
 public:
  virtual ~LinearOperator() = default;

  virtual const Stream& stream() const = 0;
  virtual int64_t domain_size() const = 0;
  virtual int64_t num_views() const = 0;
  virtual int64_t elements_per_view() const = 0;
  // How many subsets Forward/Back accept (1: no ordered subsets).
  virtual int num_subsets() const = 0;

  // y_s = A_s x. `y` is the compact range of `subset` (the full range for
  // kAllSubsets) and is overwritten.
  virtual absl::Status Forward(const float* x, float* y, int subset = kAllSubsets) = 0;
  // x = A_s^T y_s, overwriting x (domain_size floats).
  virtual absl::Status Back(const float* y, float* x, int subset = kAllSubsets) = 0;

  // Elements in the compact range of `subset`.
  int64_t range_size(int subset = kAllSubsets) const;
};

// Views of subset `subset` of `num_subsets` (all views for kAllSubsets).
std::vector<int64_t> SubsetViews(int64_t num_views, int num_subsets, int subset);

enum class SubsetCopy { kFullToCompact, kCompactToFull };

// Copies the views of `subset` between a full range (num_views x per_view)
// and its compact block, on `stream` (host memory for CPU streams, device
// memory for CUDA streams).
absl::Status CopySubset(const Stream& stream, int64_t num_views, int64_t per_view, int num_subsets, int subset,
                        SubsetCopy direction, const float* from, float* to);

}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_LINEAR_OPERATOR_H_

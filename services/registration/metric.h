// The similarity metrics a registration can minimise, behind one interface:
// "mse", "lncc" (local normalized cross-correlation, box window) and "mi"
// (Mattes mutual information, Parzen windows). Each call returns the loss on
// the host and writes dLoss/dWarped into a preallocated array, on the backend
// of the stream, reusing its scratch memory across iterations.
#ifndef TESSERA_SERVICES_REGISTRATION_METRIC_H_
#define TESSERA_SERVICES_REGISTRATION_METRIC_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "common/ndarray.h"

namespace tessera::registration {

struct MetricOptions {
  int lncc_window = 7;  // odd, voxels
  int mi_bins = 32;
};

class SimilarityMetric {
 public:
  virtual ~SimilarityMetric() = default;
  // `name`: mse, lncc or mi; INVALID_ARGUMENT otherwise.
  static absl::StatusOr<std::unique_ptr<SimilarityMetric>> Create(const std::string& name,
                                                                  const MetricOptions& options, const Stream& stream);

  // fixed, warped, grad: float32 (nx, ny, nz) in the stream's memory;
  // intensities normalised to [0, 1]. grad may be null (loss only).
  virtual absl::StatusOr<double> Evaluate(const NDArray& fixed, const NDArray& warped, NDArray* grad) = 0;
  virtual std::string name() const = 0;
  // True when the loss is a mean over voxels of a function of each voxel's
  // own pair of values (mse, mi), so it can be evaluated on any subset of
  // voxels laid out as a (k, 1, 1) array; false for lncc (neighbourhoods).
  virtual bool pointwise() const = 0;
  // Frees scratch kept between calls (LNCC's coefficient volumes): the next
  // call allocates again. The lean deformable stage calls it on entry.
  virtual void ReleaseScratch() {}
};

}  // namespace tessera::registration

#endif  // TESSERA_SERVICES_REGISTRATION_METRIC_H_

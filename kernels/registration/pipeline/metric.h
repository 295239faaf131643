// The similarity metrics a registration can minimise, behind one interface:
// "mse", "lncc" (local normalized cross-correlation, box window) and "mi"
// (Mattes mutual information, Parzen windows). Each call returns the loss on
// the host and writes dLoss/dWarped into a preallocated array, on the backend
// of the stream, reusing its scratch memory across iterations.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_METRIC_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_METRIC_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "common/ndarray.h"
#include "kernels/registration/mutual_info.h"
#include "kernels/registration/pipeline/option_enums.h"

namespace tessera::registration {

struct MetricOptions {
  int lncc_window = 7;  // odd, voxels
  int mi_bins = 32;
  // Mattes MI's Parzen window on the fixed image (issue 17): a box, as Mattes
  // et al. and elastix (the warped image keeps the cubic B-spline window, so
  // the loss stays differentiable); false: cubic B-spline on both. Every MI
  // evaluation (linear, greedy, sharded, out of core; CPU and CUDA) uses it.
  // Measured (bench/registration_cases truth, 7 cases): map rms lower on 6 of
  // 7 (ch2bet 0.40 -> 0.38 mm), bench/results/2026-12-02-*-elastix-v4.md.
  bool mi_fixed_box = true;
  // Gaussian blur of the fixed image, voxels of each level, before the
  // deformable stage with MI or LNCC (FixedBlurVoxels below; in-core runs:
  // in_core_run.cc). The warped image is the moving one linearly
  // interpolated, blurred by a kernel of variance t(1 - t) per axis at
  // sub-voxel offset t: 1/6 voxel^2 on average, so sigma sqrt(1/6). Without it
  // the sharp fixed image rewards maps that put samples on moving voxel
  // centres, where the interpolation blurs least (the interpolation artefact;
  // elastix evades it by sampling random coordinates, which interpolates both
  // images). MI (issue 17): our map reached a lower MI than the true map and
  // erred by 0.25-0.4 mm. LNCC (issue 38; its local variances see the blur
  // too): macaque 0.5 mm Dice 0.9135 -> 0.9314 all labels (labels of 10-29
  // voxels 0.849 -> 0.89), 0.9723 -> 0.9776 large
  // (bench/results/2026-12-08-cpu-registration-macaque-dice.md). 0 = none.
  // In-core runs only (standard, lean, sharded): the bounded / out-of-core
  // path reads the full-resolution fixed image slab by slab and does not blur.
  double fixed_blur_voxels = 0.40824829;  // sqrt(1/6)
  // Random sub-voxel jitter of the deformable stage's sampling grid, new
  // every iteration (issue 17, grid_jitter.h): the rest of the
  // interpolation artefact, and more (v5 bench: Dice up on all 7 cases).
  // In-core unsharded runs (greedy lean and standard loops, the B-spline
  // stage; CPU and CUDA alike); the sharded and out-of-core stages do not
  // jitter (logged).
  bool mi_grid_jitter = true;
  // With mi_grid_jitter: each voxel its own offset (GridSampleArgs::
  // voxel_jitter_key, kernels/registration/voxel_jitter.h), as elastix's
  // random coordinates, instead of one shift of the whole grid. On (issue 17,
  // with the noise-scaled field smoothing and 100 finest iterations,
  // bench/results/2026-12-03-cpu-registration-session9.md): macaque 0.9262 ->
  // 0.9277 (3-seed mean; every seed above elastix's 0.9253, which the grid
  // shift missed on seed 1), gains on 4 of the 6 human cases, costs the noisy
  // t2-like case ~0.006 (still 0.037 above elastix).
  bool mi_voxel_jitter = true;
};

// The fixed image's blur before the deformable stage with `metric`, voxels:
// options.fixed_blur_voxels for the metrics whose statistics see the warped
// image's interpolation blur (MI, LNCC); 0 for MSE (not measured).
inline double FixedBlurVoxels(Metric metric, const MetricOptions& options) {
  return metric == Metric::kMi || metric == Metric::kLncc ? options.fixed_blur_voxels : 0.0;
}

// Mattes MI's options for these metric options on the registrar's
// intensities, normalised to [0, 1]: bins and the fixed image's Parzen window.
MattesMiOptions MattesMiOptionsFor(const MetricOptions& options);

class SimilarityMetric {
 public:
  virtual ~SimilarityMetric() = default;
  // INVALID_ARGUMENT for an LNCC window that is not odd and positive.
  static absl::StatusOr<std::unique_ptr<SimilarityMetric>> Create(Metric metric, const MetricOptions& options,
                                                                  const Stream& stream);

  // fixed, warped, grad: float32 (nx, ny, nz) in the stream's memory;
  // intensities normalised to [0, 1]. grad may be null (loss only).
  // mask (issue 34): null, or uint8 of the same shape (nonzero = the voxel
  // counts) holding mask_count > 0 voxels (metric_mask.h computes both): the
  // loss over those voxels only, the gradient 0 elsewhere (lncc: centres).
  virtual absl::StatusOr<double> Evaluate(const NDArray& fixed, const NDArray& warped, NDArray* grad,
                                          const NDArray* mask = nullptr, int64_t mask_count = 0) = 0;
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

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_METRIC_H_

// Exact sinograms of analytic phantoms for any geometry (parallel, fan, cone,
// vector forms), computed from chord lengths and never with our projectors.
#ifndef TESSERA_SERVICES_RECONSTRUCTION_PHANTOMS_ANALYTIC_SINOGRAM_H_
#define TESSERA_SERVICES_RECONSTRUCTION_PHANTOMS_ANALYTIC_SINOGRAM_H_

#include <functional>

#include "absl/status/statusor.h"
#include "common/ndarray.h"
#include "kernels/reconstruction/geometry.h"
#include "services/reconstruction/phantoms/phantom.h"

namespace tessera::recon::phantoms {

// The ray (origin, direction) through the point at fractional detector
// position (col, row) of view p: parallel beams start at that point along the
// view's ray; fan and cone beams start at the source towards it.
void DetectorRay(const ProjectionGeometry& projection, int64_t p, double col, double row, Vec3* origin,
                 Vec3* direction);

// Calls `line(origin, direction)` for supersample x supersample rays spread
// evenly over each detector pixel's area (supersample rays along the pixel in
// 2-D), and stores the mean of what it returns: host float32 of shape (cols,
// rows, views), detector column fastest. Multithreaded (common/parallel.h):
// `line` must be safe to call concurrently.
absl::StatusOr<NDArray> IntegrateOverDetector(const ProjectionGeometry& projection, int supersample,
                                              const std::function<double(const Vec3&, const Vec3&)>& line);

// The line integrals of `phantom` (value x mm) for `geometry`, averaged over
// supersample x supersample rays per detector pixel (1 = the pixel centre).
// INVALID_ARGUMENT for an invalid geometry, a 2-D phantom with a 3-D geometry
// or the reverse, or supersample outside [1, 64].
absl::StatusOr<NDArray> AnalyticSinogram(const Phantom& phantom, const CtGeometry& geometry, int supersample = 1);

}  // namespace tessera::recon::phantoms

#endif  // TESSERA_SERVICES_RECONSTRUCTION_PHANTOMS_ANALYTIC_SINOGRAM_H_

// CPU reference for JacobianDeterminant (also the CPU backend): DetAt in
// double per voxel, threaded over z-slabs; per-slab summaries merged in order.
#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/registration/jacobian_internal.h"
#include "kernels/registration/reg_parallel.h"

namespace tessera {
namespace registration {
namespace jac_internal {

JacobianSummary JacobianCpu(const Field& f, float* det) {
  const int64_t nx = f.n[0], ny = f.n[1], nz = f.n[2];
  const int chunks = reg_internal::NumChunks(nz, 1);
  std::vector<JacobianSummary> part(chunks);
  for (auto& p : part) {
    p.min_det = std::numeric_limits<double>::infinity();
    p.max_det = -std::numeric_limits<double>::infinity();
  }
  reg_internal::ParallelChunks(nz, 1, [&](int c, int64_t z0, int64_t z1) {
    JacobianSummary& s = part[c];
    for (int64_t k = z0; k < z1; ++k) {
      for (int64_t j = 0; j < ny; ++j) {
        for (int64_t i = 0; i < nx; ++i) {
          const double d = DetAt<double>(f, i, j, k);
          if (det != nullptr) det[i + nx * (j + ny * k)] = static_cast<float>(d);
          s.nonpositive += d <= 0.0;
          s.min_det = std::min(s.min_det, d);
          s.max_det = std::max(s.max_det, d);
        }
      }
    }
  });
  JacobianSummary out;
  out.voxels = nx * ny * nz;
  out.min_det = std::numeric_limits<double>::infinity();
  out.max_det = -std::numeric_limits<double>::infinity();
  for (const auto& p : part) {
    out.nonpositive += p.nonpositive;
    out.min_det = std::min(out.min_det, p.min_det);
    out.max_det = std::max(out.max_det, p.max_det);
  }
  return out;
}

}  // namespace jac_internal
}  // namespace registration
}  // namespace tessera

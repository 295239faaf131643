// The CUDA kernels' gather code (dd_gather.h) run on the host, cell by cell
// and voxel by voxel, with the same per-view float sums added in double as the
// kernels do. The CPU tests hold it to the reference; it is not a backend.
#include <cstdint>
#include <vector>

#include "common/parallel.h"
#include "kernels/reconstruction/ct/dd_gather.h"
#include "kernels/reconstruction/ct/dd_projector.h"

namespace tessera {
namespace recon {
namespace ct {
namespace cpu {

void GatherForward(const DdSystem& sys, const float* volume, const std::vector<int64_t>& views, float* sinogram) {
  const DdShape& s = sys.shape;
  // x-slab views read the x<->y transpose (b = y fastest), as on the device.
  std::vector<float> transposed;
  for (int64_t v : views) {
    if (sys.views[v].axis == 0 && transposed.empty()) {
      transposed.resize(s.nx * s.ny * s.nz);
      for (int64_t z = 0; z < s.nz; ++z) {
        for (int64_t y = 0; y < s.ny; ++y) {
          for (int64_t x = 0; x < s.nx; ++x) transposed[y + s.ny * (x + s.nx * z)] = volume[x + s.nx * (y + s.ny * z)];
        }
      }
    }
  }
  const int64_t cells = s.cols * s.rows;
  const int64_t total = cells * static_cast<int64_t>(views.size());
  ParallelFor(total, [&](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n) {
      const int64_t v = views[n / cells], cell = n % cells;
      const DdView& w = sys.views[v];
      const float* table = sys.tables.data() + v * TableStride(s.cols);
      const gather::CellLines cl = gather::CellLinesFor(w, table, s, cell % s.cols, cell / s.cols);
      const float* vol = w.axis == 0 ? transposed.data() : volume;
      const int nb = static_cast<int>(InPlaneCount(s, w.axis)), na = static_cast<int>(SlabCount(s, w.axis));
      sinogram[n] = s.is_2d ? gather::ForwardCell<true>(cl, vol, nb, na, static_cast<int>(s.nz))
                            : gather::ForwardCell<false>(cl, vol, nb, na, static_cast<int>(s.nz));
    }
  });
}

void GatherBack(const DdSystem& sys, const float* sinogram, const std::vector<int64_t>& views, float* volume) {
  const DdShape& s = sys.shape;
  const int64_t cells = s.cols * s.rows;
  ParallelFor(s.nx * s.ny * s.nz, [&](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n) {
      const int64_t x = n % s.nx, y = (n / s.nx) % s.ny, z = n / (s.nx * s.ny);
      double acc = 0;
      for (size_t p = 0; p < views.size(); ++p) {
        const DdView& w = sys.views[views[p]];
        const float* table = sys.tables.data() + views[p] * TableStride(s.cols);
        const float* view_sino = sinogram + static_cast<int64_t>(p) * cells;
        acc += s.is_2d ? gather::BackVoxelView<true>(w, table, s, x, y, z, view_sino)
                       : gather::BackVoxelView<false>(w, table, s, x, y, z, view_sino);
      }
      volume[n] = static_cast<float>(acc);
    }
  });
}

}  // namespace cpu
}  // namespace ct
}  // namespace recon
}  // namespace tessera

// The CUDA kernels' gather code (dd_gather.h, dd_back_gather.h) run on the
// host: the forward cell by cell, the back projection's per-call preparation
// and then voxel by voxel in the kernels' order (per voxel, views in order,
// each view's sum added in double; chunks of views as the plan's scratch
// budget gives). The CPU tests hold it to the reference.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/parallel.h"
#include "kernels/reconstruction/ct/dd_back_gather.h"
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

void GatherBack(const DdSystem& sys, const float* sinogram, const std::vector<int64_t>& views, float* volume,
                int64_t scratch_bytes) {
  const DdShape& s = sys.shape;
  const int64_t cells = s.cols * s.rows, count = static_cast<int64_t>(views.size());
  const gather::BackScratch layout = gather::BackScratchLayout(s, sys.any_row_coupled);
  const int64_t chunk = gather::BackChunkViews(layout, scratch_bytes, count);
  std::vector<Double2> storage(chunk * layout.view_bytes / sizeof(Double2));  // 16-byte aligned
  unsigned char* scratch = reinterpret_cast<unsigned char*>(storage.data());
  const int64_t table_stride = TableStride(s.cols), back_stride = BackTableStride(s.cols, s.is_2d);
  if (count == 0) std::fill(volume, volume + s.nx * s.ny * s.nz, 0.f);
  // Voxel tiles of 16 x 16 x (a z run as on the device): each tile visits the
  // views in order, so its detector patch stays in cache; every voxel sums
  // the views in order, as on the device.
  constexpr int64_t kTile = 16;
  const int64_t tx = (s.nx + kTile - 1) / kTile, ty = (s.ny + kTile - 1) / kTile;
  const int64_t run = s.is_2d ? 1 : gather::kRunZ, runs = (s.nz + run - 1) / run;
  for (int64_t p0 = 0; p0 < count; p0 += chunk) {
    const int64_t n = std::min(chunk, count - p0);
    const float* sino = sinogram + p0 * cells;
    if (s.is_2d) {
      ParallelFor(n, [&](int64_t a, int64_t b, int) {
        for (int64_t p = a; p < b; ++p) {
          const int64_t v = views[p0 + p];
          gather::PrepareColumnPrefix(sys.views[v], sys.tables.data() + v * table_stride, s.cols, sino + p * cells,
                                      reinterpret_cast<Double2*>(scratch + p * layout.view_bytes));
        }
      });
    } else {
      ParallelFor(n * cells, [&](int64_t a, int64_t b, int) {
        for (int64_t e = a; e < b; ++e) {
          const int64_t p = e / cells, cell = e % cells, v = views[p0 + p];
          float* yl = reinterpret_cast<float*>(scratch + p * layout.view_bytes);
          yl[cell] = gather::CellWeight(sys.views[v], sys.tables.data() + v * table_stride, s, cell % s.cols,
                                        cell / s.cols, sino[p * cells + cell]);
        }
      });
      if (sys.any_row_coupled) {
        const int64_t per = gather::CoupledBCount(s) + gather::CoupledCCount(s);
        ParallelFor(n * per, [&](int64_t a, int64_t b, int) {
          for (int64_t e = a; e < b; ++e) {
            const int64_t p = e / per, v = views[p0 + p];
            if (!sys.views[v].row_coupled) continue;
            unsigned char* base = scratch + p * layout.view_bytes;
            gather::PrepareCoupledLine(sys.views[v], s, e % per, reinterpret_cast<Float2*>(base + layout.tb_offset),
                                       reinterpret_cast<Float2*>(base + layout.tc_offset));
          }
        });
      }
    }
    ParallelFor(tx * ty * runs, [&](int64_t a, int64_t b, int) {
      constexpr int K = gather::kRunZ;
      std::vector<double> acc(kTile * kTile * K);
      for (int64_t tile = a; tile < b; ++tile) {
        const int64_t x0 = (tile % tx) * kTile, y0 = ((tile / tx) % ty) * kTile, z0 = (tile / (tx * ty)) * run;
        const int64_t x1 = std::min(s.nx, x0 + kTile), y1 = std::min(s.ny, y0 + kTile);
        const int nk = static_cast<int>(std::min(run, s.nz - z0));
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t p = 0; p < n; ++p) {
          const int64_t v = views[p0 + p];
          const DdView& w = sys.views[v];
          const float* table = sys.back_tables.data() + v * back_stride;
          const unsigned char* view_scratch = scratch + p * layout.view_bytes;
          for (int64_t y = y0; y < y1; ++y) {
            for (int64_t x = x0; x < x1; ++x) {
              double* out = acc.data() + ((y - y0) * kTile + (x - x0)) * K;
              if (s.is_2d) {
                out[0] += gather::BackPixelView(w, table, s, view_scratch, x, y);
              } else {
                gather::BackRunView<K>(w, table, s, layout, view_scratch, x, y, z0, nk, out);
              }
            }
          }
        }
        for (int m = 0; m < nk; ++m) {
          for (int64_t y = y0; y < y1; ++y) {
            for (int64_t x = x0; x < x1; ++x) {
              float& dst = volume[x + s.nx * (y + s.ny * (z0 + m))];
              const double sum = acc[((y - y0) * kTile + (x - x0)) * K + m];
              dst = static_cast<float>(p0 == 0 ? sum : static_cast<double>(dst) + sum);
            }
          }
        }
      }
    });
  }
}

}  // namespace cpu
}  // namespace ct
}  // namespace recon
}  // namespace tessera

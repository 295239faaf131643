// CPU reference of the list-mode data term (lor_math.h per event).
#include <algorithm>
#include <cmath>
#include <vector>

#include "common/parallel.h"
#include "kernels/reconstruction/pet/listmode_kernels.h"
#include "kernels/reconstruction/pet/projector_kernels.h"

namespace tessera {
namespace recon {
namespace pet {
namespace cpu {
namespace {

struct PlainAdd {
  float* image;
  void operator()(int64_t voxel, float what) const { image[voxel] += what; }
};

}  // namespace

double ListModeDataTerm(const ProjectorParams& p, const ListModeEvent* events, int64_t n, const float* image,
                        float* out) {
  const int64_t voxels = GridSize(p.grid);
  const int chunks = ParallelChunks(n, 256);
  std::fill(out, out + voxels, 0.0f);
  std::vector<std::vector<float>> partial(std::max(0, chunks - 1));
  std::vector<double> ll(std::max(1, chunks), 0.0);
  ParallelFor(
      n,
      [&](int64_t begin, int64_t end, int chunk) {
        float* acc = out;
        if (chunk > 0) {
          partial[chunk - 1].assign(voxels, 0.0f);
          acc = partial[chunk - 1].data();
        }
        double sum = 0.0;
        for (int64_t i = begin; i < end; ++i) {
          const ListModeEvent& e = events[i];
          const int k = TofIndex(e, p.tof.bins);
          const Lor L = MakeLor(p, static_cast<int>(e.view), e.col, e.row);
          const float att = p.atten != nullptr ? p.atten[LorIndex(p, e.view, e.col, e.row)] : 1.0f;
          const float fwd = ForwardBin(p, image, L, k) * att;
          if (!(fwd > 0.0f)) continue;
          sum += e.weight * std::log(static_cast<double>(fwd));
          BackBin(p, L, k, static_cast<float>(e.weight) * att / fwd, PlainAdd{acc});
        }
        ll[chunk] = sum;
      },
      256);
  for (const std::vector<float>& part : partial) {
    for (int64_t v = 0; v < voxels; ++v) out[v] += part[v];
  }
  double total = 0.0;
  for (double s : ll) total += s;
  return total;
}

}  // namespace cpu
}  // namespace pet
}  // namespace recon
}  // namespace tessera

// CPU reference of the PET projector: the lor_math.h arithmetic in plain
// loops, threaded with common/parallel.h; the fixed-point scatter of
// fixed_point.h with relaxed int64 atomics.
#include <algorithm>
#include <cmath>
#include <vector>

#include "common/parallel.h"
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

// Relaxed atomics suffice: only the final sums are read, after the join.
struct FixedAtomicAdd {
  unsigned long long* acc;
  float scale;
  void operator()(int64_t voxel, float what) const {
    const long long q = ToFixed(what, scale);
    if (q != 0) __atomic_fetch_add(acc + voxel, static_cast<unsigned long long>(q), __ATOMIC_RELAXED);
  }
};

constexpr int64_t kAbsSumBlock = 1 << 16;

}  // namespace

void Forward(const ProjectorParams& p, const ViewRange& range, const float* image, float* y) {
  const int64_t n = RangeSize(p, range);
  const int64_t det = static_cast<int64_t>(p.cols) * p.rows;
  ParallelForDynamic(n, 256, [&](int64_t begin, int64_t end, int) {
    for (int64_t e = begin; e < end; ++e) {
      const int64_t lor = e % det;
      const int64_t kq = e / det;
      const int k = static_cast<int>(kq % p.tof.bins);
      const int view = range.first + static_cast<int>(kq / p.tof.bins) * range.stride;
      const int col = static_cast<int>(lor % p.cols), row = static_cast<int>(lor / p.cols);
      const Lor L = MakeLor(p, view, col, row);
      float value = ForwardBin(p, image, L, k);
      if (p.atten != nullptr) value *= p.atten[lor + det * view];
      y[e] = value;
    }
  });
}

void BackScatter(const ProjectorParams& p, const ViewRange& range, const float* y, float* image) {
  const int64_t voxels = GridSize(p.grid);
  const int64_t det = static_cast<int64_t>(p.cols) * p.rows;
  const int64_t lors = det * range.count;
  const int chunks = ParallelChunks(lors, 64);
  std::fill(image, image + voxels, 0.0f);
  std::vector<std::vector<float>> partial(std::max(0, chunks - 1));
  ParallelFor(
      lors,
      [&](int64_t begin, int64_t end, int chunk) {
        float* out = image;
        if (chunk > 0) {
          partial[chunk - 1].assign(voxels, 0.0f);
          out = partial[chunk - 1].data();
        }
        for (int64_t l = begin; l < end; ++l) {
          const int64_t q = l / det, lor = l % det;
          const int view = range.first + static_cast<int>(q) * range.stride;
          const Lor L = MakeLor(p, view, static_cast<int>(lor % p.cols), static_cast<int>(lor / p.cols));
          const float scale = p.atten != nullptr ? p.atten[lor + det * view] : 1.0f;
          BackLor(p, L, y + q * det * p.tof.bins + lor, det, scale, PlainAdd{out});
        }
      },
      64);
  for (const std::vector<float>& part : partial) {
    for (int64_t v = 0; v < voxels; ++v) image[v] += part[v];
  }
}

void BackGather(const ProjectorParams& p, const ViewRange& range, const float* y, float* image) {
  const GridParams& g = p.grid;
  const int64_t voxels = GridSize(g);
  ParallelForDynamic(voxels, 64, [&](int64_t begin, int64_t end, int) {
    for (int64_t v = begin; v < end; ++v) {
      const int idx[3] = {static_cast<int>(v % g.n[0]), static_cast<int>((v / g.n[0]) % g.n[1]),
                          static_cast<int>(v / (static_cast<int64_t>(g.n[0]) * g.n[1]))};
      image[v] = GatherVoxel(p, range, y, idx);
    }
  });
}

double AbsSum(const float* y, int64_t n) {
  const int64_t blocks = (n + kAbsSumBlock - 1) / kAbsSumBlock;
  std::vector<double> partial(blocks, 0.0);
  ParallelForDynamic(blocks, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t b = begin; b < end; ++b) {
      double s = 0.0;
      const int64_t stop = std::min(n, (b + 1) * kAbsSumBlock);
      for (int64_t i = b * kAbsSumBlock; i < stop; ++i) s += std::fabs(static_cast<double>(y[i]));
      partial[b] = s;
    }
  });
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

FixedPointScale BackFixedPoint(const ProjectorParams& p, const ViewRange& range, const float* y, float* image,
                               const FixedPointScratch& scratch, const int64_t* order) {
  const int64_t voxels = GridSize(p.grid);
  const int64_t det = static_cast<int64_t>(p.cols) * p.rows;
  const int64_t lors = det * range.count;
  const FixedPointScale f =
      ChooseFixedPointScale(AbsSum(y, RangeSize(p, range)) * FixedPointParamsBound(p));
  unsigned long long* acc = scratch.acc;
  std::fill(acc, acc + voxels, 0ull);
  if (f.finite) {
    const FixedAtomicAdd add{acc, f.scale};
    ParallelForDynamic(lors, 64, [&](int64_t begin, int64_t end, int) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t l = order != nullptr ? order[i] : i;
        const int64_t q = l / det, lor = l % det;
        const int view = range.first + static_cast<int>(q) * range.stride;
        const Lor L = MakeLor(p, view, static_cast<int>(lor % p.cols), static_cast<int>(lor / p.cols));
        const float scale = p.atten != nullptr ? p.atten[lor + det * view] : 1.0f;
        BackLor(p, L, y + q * det * p.tof.bins + lor, det, scale, add);
      }
    });
  }
  ParallelFor(voxels, [&](int64_t begin, int64_t end, int) {
    for (int64_t v = begin; v < end; ++v) image[v] = FromFixed(acc[v], f);
  });
  return f;
}

}  // namespace cpu
}  // namespace pet
}  // namespace recon
}  // namespace tessera

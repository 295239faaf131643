// Backend kernels of the PET projector (PetProjector calls them; list-mode
// reuses them). All pointers, those inside ProjectorParams included, are in
// the backend's memory: host for cpu::, device for cuda::. Ranges and layouts
// are those of lor_math.h: y is the compact range of `range` (cols * rows * K
// floats per view, views in range order).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_PET_PROJECTOR_KERNELS_H_
#define TESSERA_KERNELS_RECONSTRUCTION_PET_PROJECTOR_KERNELS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "common/device.h"
#include "kernels/reconstruction/pet/fixed_point.h"
#include "kernels/reconstruction/pet/lor_math.h"

namespace tessera {
namespace recon {
namespace pet {

inline int64_t RangeSize(const ProjectorParams& p, const ViewRange& r) {
  return static_cast<int64_t>(p.cols) * p.rows * p.tof.bins * r.count;
}
inline int64_t GridSize(const GridParams& g) { return static_cast<int64_t>(g.n[0]) * g.n[1] * g.n[2]; }

// The fixed-point bound W on any entry of diag(atten) A (fixed_point.h's
// FixedPointWeightBound assumes factors <= 1; efficiencies may exceed it).
inline double FixedPointParamsBound(const ProjectorParams& p) {
  return FixedPointWeightBound(p.grid) * (p.atten_bound > 1.0f ? static_cast<double>(p.atten_bound) : 1.0);
}

// Scratch of the fixed-point back projection (fixed_point.h), in the
// backend's memory, carved from one allocation of FixedPointScratchBytes:
// the per-voxel 64-bit accumulators, then (CUDA) the bound's block partials
// and the chosen scale, so no host round trip is needed between the passes.
constexpr int64_t kFixedPointPartials = 1024;
struct FixedPointScratch {
  unsigned long long* acc;  // GridSize accumulators
  double* partials;         // kFixedPointPartials
  FixedPointScale* scale;   // one
};
inline int64_t FixedPointScratchBytes(const GridParams& g) {
  return GridSize(g) * 8 + kFixedPointPartials * 8 + static_cast<int64_t>(sizeof(FixedPointScale));
}
inline FixedPointScratch CarveFixedPointScratch(void* base, const GridParams& g) {
  char* b = static_cast<char*>(base);
  FixedPointScratch s;
  s.acc = reinterpret_cast<unsigned long long*>(b);
  s.partials = reinterpret_cast<double*>(b + GridSize(g) * 8);
  s.scale = reinterpret_cast<FixedPointScale*>(b + GridSize(g) * 8 + kFixedPointPartials * 8);
  return s;
}

namespace cpu {
// y = A x (times the attenuation factors), threaded over sinogram elements.
void Forward(const ProjectorParams& p, const ViewRange& range, const float* image, float* y);
// image = A^T y, ray-driven: each thread walks a contiguous share of the LORs
// into its own volume, the shares summed in thread order (deterministic for a
// given thread count).
void BackScatter(const ProjectorParams& p, const ViewRange& range, const float* y, float* image);
// image = A^T y, voxel-driven (GatherVoxel): independent of the thread count.
void BackGather(const ProjectorParams& p, const ViewRange& range, const float* y, float* image);
// sum |y_i| over n elements in double, in an order that depends on n only
// (fixed blocks, summed in block order): the fixed-point bound's input.
double AbsSum(const float* y, int64_t n);
// image = A^T y, ray-driven in fixed point (fixed_point.h): LORs handed out
// dynamically to the threads, which add relaxed atomic int64s into
// scratch.acc: bit-identical for any thread count and LOR order. `order`
// (optional, tests) is a permutation of the range's LOR indices
// q * cols * rows + col + cols * row; null: natural order. Returns the scale.
FixedPointScale BackFixedPoint(const ProjectorParams& p, const ViewRange& range, const float* y, float* image,
                               const FixedPointScratch& scratch, const int64_t* order = nullptr);
}  // namespace cpu

namespace cuda {
absl::Status Forward(const Stream& stream, const ProjectorParams& p, const ViewRange& range, const float* image,
                     float* y);
// One thread per LOR, atomicAdd into the volume (order varies run to run).
// `order` (optional, tests): thread l takes LOR order[l] (as cpu::BackFixedPoint).
absl::Status BackScatter(const Stream& stream, const ProjectorParams& p, const ViewRange& range, const float* y,
                         float* image, const int64_t* order = nullptr);
// One thread per LOR in fixed point (fixed_point.h): a fixed-grid reduction of
// sum |y| and the scale on the device, the scatter with 64-bit integer
// atomics into scratch.acc, one pass to float. Bit-identical run to run and
// for any `order` (as BackScatter). No host synchronisation.
absl::Status BackFixedPoint(const Stream& stream, const ProjectorParams& p, const ViewRange& range, const float* y,
                            float* image, const FixedPointScratch& scratch, const int64_t* order = nullptr);
// One thread per voxel, fixed order: bit-identical run to run.
absl::Status BackGather(const Stream& stream, const ProjectorParams& p, const ViewRange& range, const float* y,
                        float* image);
}  // namespace cuda

}  // namespace pet
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_PET_PROJECTOR_KERNELS_H_

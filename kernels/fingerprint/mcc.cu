// CUDA MCC descriptors: one thread block per minutia, one thread per cell.
//
// The host prepares what the CPU reference computes outside its cell loop -
// angles wrapped to [0, 2 pi), cos/sin of each minutia's angle (std::cos on
// the host, as the reference does) and each template's convex hull - and the
// kernel then evaluates the very same fp_math.h / mcc_impl.h expressions:
//   1. threads 0..n-1 test minutia t of the template as a neighbour (within
//      R + 3 sigmaS, t != centre) and compute its six directional terms; a
//      ballot-based compaction keeps the neighbours in index order, the order
//      in which the reference sums them;
//   2. thread (i + 16 j) tests cell (i, j) (circle, enlarged hull) and sums
//      the neighbours' contributions per layer; __ballot_sync turns the 8
//      warps' bits into the cylinder's 32-bit words;
//   3. __syncthreads_count gives the valid cells for the minVC rule.
// So the bits equal the CPU reference's exactly (mcc_cuda_test checks every
// bit on real templates).
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/fingerprint/fp_math.h"
#include "kernels/fingerprint/mcc.h"
#include "kernels/fingerprint/mcc_impl.h"

namespace tessera {
namespace fingerprint {
namespace cuda {
namespace {

using mcc_internal::MccConstants;

constexpr int kThreads = kMccCellsPerLayer;  // 256: one thread per cell (i, j)
constexpr int kWarps = kThreads / 32;
static_assert(kMccMaxMinutiae < kThreads, "phase 1 gives each minutia of a template one thread");

struct DeviceInput {
  const double* x;     // per minutia (all templates)
  const double* y;
  const double* theta;  // the wrapped float angle, as double
  const double* cs;     // cos(theta), host-computed
  const double* sn;
  const int* template_of;     // per minutia: its template
  const int* minutia_start;   // per template (+1): first minutia
  const int* hull_start;      // per template (+1): first hull vertex
  const double* hull_x;
  const double* hull_y;
};

struct DeviceOutput {
  uint64_t* bits;   // 24 per minutia
  uint64_t* mask;   // 4 per minutia
  uint8_t* valid;   // per minutia
};

__global__ void __launch_bounds__(kThreads) CylinderKernel(DeviceInput in, DeviceOutput out, MccConstants c,
                                                           int minutia_offset) {
  const int m = minutia_offset + blockIdx.x;  // the cylinder's minutia (global index)
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int t = in.template_of[m];
  const int first = in.minutia_start[t], n = in.minutia_start[t + 1] - first;

  __shared__ double nb_x[kMccMaxMinutiae], nb_y[kMccMaxMinutiae], nb_gd[kMccMaxMinutiae][kMccNd];
  __shared__ int warp_count[kWarps];
  __shared__ unsigned layer_words[kMccNd][kWarps];
  __shared__ unsigned mask_words[kWarps];

  const double x = in.x[m], y = in.y[m], theta = in.theta[m];

  // 1. Neighbours within R + 3 sigmaS, compacted in index order.
  bool is_neighbour = false;
  double tx = 0, ty = 0;
  if (tid < n && first + tid != m) {
    tx = in.x[first + tid];
    ty = in.y[first + tid];
    const double dx = tx - x, dy = ty - y;
    is_neighbour = fpmath::Mul(dx, dx) + fpmath::Mul(dy, dy) <= c.neighbourhood2;
  }
  const unsigned ballot = __ballot_sync(0xffffffffu, is_neighbour);
  if (lane == 0) warp_count[warp] = __popc(ballot);
  __syncthreads();
  int before = 0, total = 0;
  for (int w = 0; w < kWarps; ++w) {
    before += w < warp ? warp_count[w] : 0;
    total += warp_count[w];
  }
  if (is_neighbour) {
    const int slot = before + __popc(ballot & ((1u << lane) - 1u));
    nb_x[slot] = tx;
    nb_y[slot] = ty;
    const double relative = fpmath::AngleDiff(theta, in.theta[first + tid]);
    for (int k = 0; k < kMccNd; ++k) {
      nb_gd[slot][k] =
          mcc_internal::DirectionalTerm(fpmath::AngleDiff(mcc_internal::LayerAngle(k, c), relative), c);
    }
  }
  __syncthreads();
  if (total < c.min_neighbours) {  // minM: the cylinder is invalid
    if (tid == 0) out.valid[m] = 0;
    return;
  }

  // 2. Cell (i, j) = (tid % 16, tid / 16).
  const int i = tid % kMccNs, j = tid / kMccNs;
  bool cell_valid = false;
  bool bit[kMccNd] = {false, false, false, false, false, false};
  if (mcc_internal::CellInCircle(i, j, c)) {
    double px, py;
    mcc_internal::CellCenter(x, y, in.cs[m], in.sn[m], i, j, c, &px, &py);
    const int h0 = in.hull_start[t], hn = in.hull_start[t + 1] - h0;
    cell_valid = mcc_internal::InsideEnlargedHull(px, py, in.hull_x + h0, in.hull_y + h0, hn, c);
    if (cell_valid) {
      double v[kMccNd] = {0, 0, 0, 0, 0, 0};
      for (int s = 0; s < total; ++s) {
        const double dx = px - nb_x[s], dy = py - nb_y[s];
        const double d2 = fpmath::Mul(dx, dx) + fpmath::Mul(dy, dy);
        if (d2 > c.neighbour2) continue;
        const double gs = mcc_internal::SpatialTerm(d2, c);
        for (int k = 0; k < kMccNd; ++k) v[k] = v[k] + fpmath::Mul(gs, nb_gd[s][k]);
      }
      for (int k = 0; k < kMccNd; ++k) bit[k] = v[k] >= c.mu_psi;
    }
  }
  // 3. Bits to words (warp w holds cells 32 w .. 32 w + 31), valid count.
  for (int k = 0; k < kMccNd; ++k) {
    const unsigned word = __ballot_sync(0xffffffffu, bit[k]);
    if (lane == 0) layer_words[k][warp] = word;
  }
  const unsigned mword = __ballot_sync(0xffffffffu, cell_valid);
  if (lane == 0) mask_words[warp] = mword;
  const int valid_cells = __syncthreads_count(cell_valid);
  if (tid < kMccBitWords) {
    const int k = tid / kMccLayerWords, q = tid % kMccLayerWords;
    out.bits[static_cast<size_t>(m) * kMccBitWords + tid] =
        static_cast<uint64_t>(layer_words[k][2 * q]) | (static_cast<uint64_t>(layer_words[k][2 * q + 1]) << 32);
  } else if (tid < kMccBitWords + kMccMaskWords) {
    const int q = tid - kMccBitWords;
    out.mask[static_cast<size_t>(m) * kMccMaskWords + q] =
        static_cast<uint64_t>(mask_words[2 * q]) | (static_cast<uint64_t>(mask_words[2 * q + 1]) << 32);
  } else if (tid == kThreads - 1) {
    out.valid[m] = valid_cells >= c.min_valid_cells ? 1 : 0;
  }
}

}  // namespace

absl::StatusOr<std::vector<MccTemplate>> BuildMccTemplates(const Stream& stream,
                                                           const std::vector<std::vector<MinutiaPoint>>& templates,
                                                           const MccParams& params) {
  const MccConstants c = mcc_internal::MakeMccConstants(params);
  // Host preparation (what the reference computes outside its cell loop).
  std::vector<std::vector<MinutiaPoint>> wrapped;
  wrapped.reserve(templates.size());
  std::vector<double> x, y, theta, cs, sn, hull_x, hull_y;
  std::vector<int> template_of, minutia_start{0}, hull_start{0};
  std::vector<double> hx, hy;
  for (size_t t = 0; t < templates.size(); ++t) {
    wrapped.push_back(mcc_internal::NormalizedMinutiae(templates[t]));
    for (const MinutiaPoint& m : wrapped.back()) {
      x.push_back(m.x);
      y.push_back(m.y);
      theta.push_back(m.theta);
      cs.push_back(std::cos(static_cast<double>(m.theta)));
      sn.push_back(std::sin(static_cast<double>(m.theta)));
      template_of.push_back(static_cast<int>(t));
    }
    minutia_start.push_back(static_cast<int>(x.size()));
    mcc_internal::ConvexHull(wrapped.back(), &hx, &hy);
    hull_x.insert(hull_x.end(), hx.begin(), hx.end());
    hull_y.insert(hull_y.end(), hy.begin(), hy.end());
    hull_start.push_back(static_cast<int>(hull_x.size()));
  }
  const size_t total = x.size();
  std::vector<MccTemplate> result(templates.size());
  for (size_t t = 0; t < templates.size(); ++t) result[t].num_minutiae = static_cast<int>(templates[t].size());
  if (total == 0) return result;

  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  TESSERA_ASSIGN_OR_RETURN(auto d_x, UploadVector(x, stream));
  TESSERA_ASSIGN_OR_RETURN(auto d_y, UploadVector(y, stream));
  TESSERA_ASSIGN_OR_RETURN(auto d_theta, UploadVector(theta, stream));
  TESSERA_ASSIGN_OR_RETURN(auto d_cs, UploadVector(cs, stream));
  TESSERA_ASSIGN_OR_RETURN(auto d_sn, UploadVector(sn, stream));
  TESSERA_ASSIGN_OR_RETURN(auto d_template_of, UploadVector(template_of, stream));
  TESSERA_ASSIGN_OR_RETURN(auto d_minutia_start, UploadVector(minutia_start, stream));
  TESSERA_ASSIGN_OR_RETURN(auto d_hull_start, UploadVector(hull_start, stream));
  TESSERA_ASSIGN_OR_RETURN(auto d_hull_x, UploadVector(hull_x, stream));
  TESSERA_ASSIGN_OR_RETURN(auto d_hull_y, UploadVector(hull_y, stream));
  TESSERA_ASSIGN_OR_RETURN(auto d_bits,
                           Buffer::Allocate(MemoryKind::kDevice, total * kMccBitWords * 8, stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(auto d_mask,
                           Buffer::Allocate(MemoryKind::kDevice, total * kMccMaskWords * 8, stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(auto d_valid, Buffer::Allocate(MemoryKind::kDevice, total, stream.ordinal()));

  DeviceInput in;
  in.x = static_cast<const double*>(d_x->data());
  in.y = static_cast<const double*>(d_y->data());
  in.theta = static_cast<const double*>(d_theta->data());
  in.cs = static_cast<const double*>(d_cs->data());
  in.sn = static_cast<const double*>(d_sn->data());
  in.template_of = static_cast<const int*>(d_template_of->data());
  in.minutia_start = static_cast<const int*>(d_minutia_start->data());
  in.hull_start = static_cast<const int*>(d_hull_start->data());
  in.hull_x = static_cast<const double*>(d_hull_x->data());
  in.hull_y = static_cast<const double*>(d_hull_y->data());
  DeviceOutput out;
  out.bits = static_cast<uint64_t*>(d_bits->data());
  out.mask = static_cast<uint64_t*>(d_mask->data());
  out.valid = static_cast<uint8_t*>(d_valid->data());
  // Invalid cylinders leave their words unwritten: start from zero.
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out.bits, 0, total * kMccBitWords * 8, s));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out.mask, 0, total * kMccMaskWords * 8, s));
  constexpr size_t kMaxBlocksPerLaunch = size_t{1} << 30;
  for (size_t offset = 0; offset < total; offset += kMaxBlocksPerLaunch) {
    const unsigned blocks = static_cast<unsigned>(std::min(kMaxBlocksPerLaunch, total - offset));
    CylinderKernel<<<blocks, kThreads, 0, s>>>(in, out, c, static_cast<int>(offset));
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("CylinderKernel");
  }
  std::vector<uint64_t> bits(total * kMccBitWords), mask(total * kMccMaskWords);
  std::vector<uint8_t> valid(total);
  TESSERA_RETURN_IF_ERROR(CopyBytes(bits.data(), MemoryKind::kHost, out.bits, MemoryKind::kDevice, bits.size() * 8, stream));
  TESSERA_RETURN_IF_ERROR(CopyBytes(mask.data(), MemoryKind::kHost, out.mask, MemoryKind::kDevice, mask.size() * 8, stream));
  TESSERA_RETURN_IF_ERROR(CopyBytes(valid.data(), MemoryKind::kHost, out.valid, MemoryKind::kDevice, total, stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());

  for (size_t t = 0; t < templates.size(); ++t) {
    for (int m = minutia_start[t]; m < minutia_start[t + 1]; ++m) {
      if (!valid[m]) continue;
      MccCylinder cyl;
      std::memcpy(cyl.bits, &bits[static_cast<size_t>(m) * kMccBitWords], sizeof(cyl.bits));
      std::memcpy(cyl.mask, &mask[static_cast<size_t>(m) * kMccMaskWords], sizeof(cyl.mask));
      const MinutiaPoint& p = wrapped[t][m - minutia_start[t]];
      cyl.x = p.x;
      cyl.y = p.y;
      cyl.theta = p.theta;
      cyl.minutia = m - minutia_start[t];
      result[t].cylinders.push_back(cyl);
    }
  }
  return result;
}

}  // namespace cuda
}  // namespace fingerprint
}  // namespace tessera

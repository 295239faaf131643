// Where the operands of the tensor-core local similarities (lss.cu,
// LssCudaKernel::kWarpMma) come from, and how its launches are planned
// (internal; host and device).
//
// mma.sync.m16n8k256 .b1 .and.popc multiplies a 16 x 256-bit A (rows: probe
// cylinders) by a 256-bit x 8 B (columns: gallery cylinders); product AND,
// sum popcount, exact 32-bit integer results. A k-chunk of 256 bits is one
// direction layer of a cylinder (64-bit words 4 l .. 4 l + 3, chunks l = 0..5)
// or its mask (chunk 6). Fragment layouts (PTX ISA; g = lane / 4, t = lane %
// 4; "word" = 32-bit word of the chunk):
//   A: reg 0 (row g, word t), 1 (row g + 8, word t), 2 (row g, word t + 4),
//      3 (row g + 8, word t + 4);
//   B: reg 0 (column g, word t), 1 (column g, word t + 4);
//   C: reg e (row g + 8 (e / 2), column 2 t + e % 2).
// The same bit -> k mapping for A and B is all that AND + popcount needs.
// lss_mma_layout_test emulates the instruction on the host with these
// functions and checks the counts against plain popcounts.
#ifndef TESSERA_KERNELS_FINGERPRINT_LSS_MMA_LAYOUT_H_
#define TESSERA_KERNELS_FINGERPRINT_LSS_MMA_LAYOUT_H_

#include <climits>
#include <cstddef>
#include <cstdint>

#include "kernels/fingerprint/fp_math.h"
#include "kernels/fingerprint/mcc.h"

namespace tessera {
namespace fingerprint {
namespace lss_mma {

inline constexpr int kRows = 16;              // probe cylinders per tile
inline constexpr int kCols = 8;               // gallery cylinders per tile
inline constexpr int kChunks = kMccNd + 1;    // 6 layers, then the mask
inline constexpr int kMaskChunk = kMccNd;

// Row / column of the A and B words a lane holds in register `reg`, and the
// 32-bit word of the chunk.
TESSERA_FP_HD int ARow(int lane, int reg) { return (lane >> 2) + 8 * (reg & 1); }
TESSERA_FP_HD int AWord(int lane, int reg) { return (lane & 3) + 4 * (reg >> 1); }
TESSERA_FP_HD int BCol(int lane) { return lane >> 2; }
TESSERA_FP_HD int BWord(int lane, int reg) { return (lane & 3) + 4 * reg; }
// Row / column of accumulator register `reg` (0..3) of a lane.
TESSERA_FP_HD int CRow(int lane, int reg) { return (lane >> 2) + 8 * (reg >> 1); }
TESSERA_FP_HD int CCol(int lane, int reg) { return 2 * (lane & 3) + (reg & 1); }

// 32-bit word `word` (0..7) of chunk `chunk` of one cylinder (little-endian
// halves of the 64-bit words).
inline uint32_t CylinderWord(const MccCylinder& cyl, int chunk, int word) {
  const uint64_t w64 = chunk == kMaskChunk ? cyl.mask[word >> 1] : cyl.bits[kMccLayerWords * chunk + (word >> 1)];
  return static_cast<uint32_t>(w64 >> (32 * (word & 1)));
}

// Index of the 32-bit word `word` of chunk `chunk` of cylinder `col` of a
// template of `nb` cylinders in MccGallery's word-major layout, as uint32
// words from the template's first bits word (chunks 0..5) or first mask word
// (chunk 6): 64-bit word w of cylinder j is at w nb + j.
TESSERA_FP_HD int GalleryWordIndex(int nb, int col, int chunk, int word) {
  const int w64 = (chunk == kMaskChunk ? 0 : kMccLayerWords * chunk) + (word >> 1);
  return 2 * (w64 * nb + col) + (word & 1);
}

// Number of uint32 values of a probe's A fragments: m_tiles x chunks x 32
// lanes x 4 registers.
inline int ProbeFragmentWords(int num_cylinders) { return (num_cylinders + kRows - 1) / kRows * kChunks * 32 * 4; }

// The probe's A fragments in the order the kernel reads them (tile, chunk,
// lane, register; one 16-byte load per lane and chunk); rows past the last
// cylinder are zero. `out` holds ProbeFragmentWords(n) values.
inline void PackProbeFragments(const MccCylinder* cyl, int n, uint32_t* out) {
  const int tiles = (n + kRows - 1) / kRows;
  for (int tile = 0; tile < tiles; ++tile) {
    for (int chunk = 0; chunk < kChunks; ++chunk) {
      for (int lane = 0; lane < 32; ++lane) {
        for (int reg = 0; reg < 4; ++reg) {
          const int row = tile * kRows + ARow(lane, reg);
          *out++ = row < n ? CylinderWord(cyl[row], chunk, AWord(lane, reg)) : 0u;
        }
      }
    }
  }
}

// --- LssCudaKernel::kWarpMma: the warps' scratch and the launch plan --------

// Bytes of one comparison's scratch (lss.cu ComparisonScratch: a warp's in
// kWarpMma, the block's in kBlock): the packed radix histogram (128 words),
// the matrix, then five arrays of k_capacity (selected values and indices,
// lambda0 and two lambda buffers).
TESSERA_FP_HD size_t ComparisonScratchBytes(int matrix_entries, int k_capacity) {
  return 128 * 4 + static_cast<size_t>(matrix_entries) * 4 + static_cast<size_t>(k_capacity) * 4 * 5;
}

// Capacity of a comparison's selection: min(na, nb) pairs for LSS-R's
// relaxation, at least the largest n_P for LSS's top-n_P sum.
TESSERA_FP_HD int SelectionCapacity(int na, int width, int max_np) {
  const int pairs = na < width ? na : width;
  return pairs > max_np ? pairs : max_np;
}

// What the plan needs of the GPU and the kernel (cudaDeviceGetAttribute,
// cudaOccupancyMaxActiveBlocksPerMultiprocessor without shared memory).
struct SplitDevice {
  int shared_per_sm = 0;         // bytes
  int reserved_per_block = 0;    // bytes the runtime keeps per block
  int max_shared_per_block = 0;  // opt-in limit
  int register_blocks = 0;       // blocks of max_warps_per_block warps the registers allow per SM
  int max_warps_per_block = 8;
};

// One or two launches: templates of nb_lo..nb_hi cylinders, scratch for an
// na x width matrix per warp, `warps` warps per block (0: one warp does not fit).
struct SplitPlan {
  struct Pass {
    int nb_lo = 0, nb_hi = 0, width = 1, k_capacity = 0, warps = 0;
    size_t warp_bytes = 0;
  };
  int passes = 1;
  Pass pass[2];
  int blocks_per_sm = 0;  // the occupancy the first pass was planned for (0: not planned, one pass)
};

// The plan for a probe of `na` cylinders against templates of up to `max_nb`
// (max_np: the largest n_P; probe_bytes: the probe's share of each block):
// the most blocks per SM (registers permitting) whose per-warp scratch still
// holds templates of `scratch_size` cylinders (the gallery's typical largest,
// e.g. its 90th percentile); the width is then the widest that fits that
// occupancy. Templates wider than it (if any) get a second pass sized for
// max_nb. scratch_size <= 0 or >= max_nb, or na == 0: one pass sized for
// max_nb.
inline SplitPlan PlanSplit(int na, int max_nb, int scratch_size, int max_np, size_t probe_bytes,
                           const SplitDevice& d) {
  max_nb = max_nb < 1 ? 1 : max_nb;
  const int max_warps = d.max_warps_per_block < 1 ? 1 : d.max_warps_per_block;
  auto bytes = [&](int width) {
    return (ComparisonScratchBytes(na * width, SelectionCapacity(na, width, max_np)) + 15) / 16 * 16;
  };
  auto make_pass = [&](int lo, int hi, int width) {
    SplitPlan::Pass p;
    p.nb_lo = lo;
    p.nb_hi = hi;
    p.width = width;
    p.k_capacity = SelectionCapacity(na, width, max_np);
    p.warp_bytes = bytes(width);
    const long long room = static_cast<long long>(d.max_shared_per_block) - static_cast<long long>(probe_bytes);
    const long long fit = room > 0 ? room / static_cast<long long>(p.warp_bytes) : 0;
    p.warps = static_cast<int>(fit < max_warps ? fit : max_warps);
    return p;
  };
  SplitPlan plan;
  int width = max_nb;
  if (na > 0 && scratch_size > 0 && scratch_size < max_nb) {
    for (int b = d.register_blocks < 1 ? 1 : d.register_blocks; b >= 1; --b) {
      long long block = d.shared_per_sm / b - d.reserved_per_block;
      if (block > d.max_shared_per_block) block = d.max_shared_per_block;
      const long long per_warp = (block - static_cast<long long>(probe_bytes)) / max_warps;
      if (per_warp <= 0) continue;
      int w = max_nb;
      while (w >= scratch_size && static_cast<long long>(bytes(w)) > per_warp) --w;
      if (w >= scratch_size) {
        width = w;
        plan.blocks_per_sm = b;
        break;
      }
    }
  }
  plan.pass[0] = make_pass(0, width >= max_nb ? INT_MAX : width, width);
  if (width < max_nb) {
    plan.passes = 2;
    plan.pass[1] = make_pass(width + 1, INT_MAX, max_nb);
  }
  return plan;
}

}  // namespace lss_mma
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_KERNELS_FINGERPRINT_LSS_MMA_LAYOUT_H_

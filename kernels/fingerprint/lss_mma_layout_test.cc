// The operand and result indexing of the tensor-core local similarities
// (lss_mma_layout.h, LssCudaKernel::kWarpMma) checked on the host: the
// instruction mma.m16n8k256 .b1 .and.popc is emulated from the PTX fragment
// layouts the header encodes, fed exactly as the kernel feeds it (the packed
// probe fragments, the gallery words of MccGallery's layout), and every count
// it yields for every (probe cylinder, gallery cylinder) pair must equal the
// plain popcount of the cylinders' words; every pair must be produced once.
// Random cylinders (never zero), sizes on and off the 16 x 8 tile edges.
#include "kernels/fingerprint/lss_mma_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bitset>
#include <climits>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/fingerprint/lss.h"
#include "kernels/fingerprint/mcc.h"

namespace tessera {
namespace fingerprint {
namespace {

using namespace lss_mma;  // NOLINT: test of this namespace

int Popcount(uint64_t v) { return static_cast<int>(std::bitset<64>(v).count()); }

MccTemplate RandomTemplate(int n, std::mt19937_64& rng) {
  MccTemplate t;
  for (int i = 0; i < n; ++i) {
    MccCylinder c{};
    for (uint64_t& w : c.mask) w = rng() | 1;  // never all zero
    for (int w = 0; w < kMccBitWords; ++w) c.bits[w] = rng() & rng();  // sparser than the masks
    c.x = static_cast<float>(i);
    c.y = 0;
    c.theta = 0;
    c.minutia = i;
    t.cylinders.push_back(c);
  }
  t.num_minutiae = n;
  return t;
}

// One emulated instruction: C += A (16 x 256) B (256 x 8) with AND / popcount,
// operands and results in the per-lane registers of the PTX layouts.
void EmulateMma(const uint32_t a[32][4], const uint32_t b[32][2], int c[32][4]) {
  uint32_t am[kRows][8] = {}, bm[kCols][8] = {};
  for (int lane = 0; lane < 32; ++lane) {
    for (int reg = 0; reg < 4; ++reg) am[ARow(lane, reg)][AWord(lane, reg)] = a[lane][reg];
    for (int reg = 0; reg < 2; ++reg) bm[BCol(lane)][BWord(lane, reg)] = b[lane][reg];
  }
  for (int lane = 0; lane < 32; ++lane) {
    for (int reg = 0; reg < 4; ++reg) {
      for (int w = 0; w < 8; ++w) c[lane][reg] += Popcount(am[CRow(lane, reg)][w] & bm[CCol(lane, reg)][w]);
    }
  }
}

TEST(LssMmaLayout, EmulatedCountsEqualPopcounts) {
  std::mt19937_64 rng(16);
  for (int na : {1, 15, 16, 17, 40}) {
    for (int nb : {1, 7, 8, 9, 30}) {
      const MccTemplate probe = RandomTemplate(na, rng);
      MccGallery gallery;
      gallery.Append(RandomTemplate(3, rng));  // the template under test is not the first
      gallery.Append(RandomTemplate(nb, rng));
      const int base = gallery.start[1];
      const uint32_t* g_bits = reinterpret_cast<const uint32_t*>(gallery.bits.data() + kMccBitWords * base);
      const uint32_t* g_mask = reinterpret_cast<const uint32_t*>(gallery.mask.data() + kMccMaskWords * base);
      const MccTemplate b_t = gallery.Get(1);
      std::vector<uint32_t> frag(ProbeFragmentWords(na));
      PackProbeFragments(probe.cylinders.data(), na, frag.data());
      std::vector<int> seen(na * nb, 0);
      for (int col0 = 0; col0 < nb; col0 += kCols) {
        // B registers of every chunk, as the kernel loads them.
        uint32_t b[kChunks][32][2];
        for (int chunk = 0; chunk < kChunks; ++chunk) {
          for (int lane = 0; lane < 32; ++lane) {
            const int col = col0 + BCol(lane);
            for (int reg = 0; reg < 2; ++reg) {
              const uint32_t* src = chunk == kMaskChunk ? g_mask : g_bits;
              b[chunk][lane][reg] = col < nb ? src[GalleryWordIndex(nb, col, chunk, BWord(lane, reg))] : 0u;
            }
          }
        }
        for (int row0 = 0; row0 < na; row0 += kRows) {
          auto a = [&](int chunk) {
            return reinterpret_cast<const uint32_t(*)[4]>(frag.data() + ((row0 / kRows) * kChunks + chunk) * 32 * 4);
          };
          int nab[32][4] = {}, nac[32][4] = {}, nbc[32][4] = {}, common[32][4] = {};
          for (int l = 0; l < kMccNd; ++l) {
            EmulateMma(a(l), b[l], nab);
            EmulateMma(a(l), b[kMaskChunk], nac);
            EmulateMma(a(kMaskChunk), b[l], nbc);
          }
          EmulateMma(a(kMaskChunk), b[kMaskChunk], common);
          for (int lane = 0; lane < 32; ++lane) {
            for (int reg = 0; reg < 4; ++reg) {
              const int r = row0 + CRow(lane, reg), j = col0 + CCol(lane, reg);
              if (r >= na || j >= nb) continue;
              ++seen[r * nb + j];
              const MccCylinder& ca = probe.cylinders[r];
              const MccCylinder& cb = b_t.cylinders[j];
              int e_ab = 0, e_ac = 0, e_bc = 0, e_common = 0;
              for (int w = 0; w < kMccBitWords; ++w) {
                e_ab += Popcount(ca.bits[w] & cb.bits[w]);
                e_ac += Popcount(ca.bits[w] & cb.mask[w % kMccMaskWords]);
                e_bc += Popcount(cb.bits[w] & ca.mask[w % kMccMaskWords]);
              }
              for (int q = 0; q < kMccMaskWords; ++q) e_common += Popcount(ca.mask[q] & cb.mask[q]);
              ASSERT_GT(e_ab, 0);  // the inputs are not degenerate
              ASSERT_EQ(nab[lane][reg], e_ab) << "na " << na << " nb " << nb << " r " << r << " j " << j;
              ASSERT_EQ(nac[lane][reg], e_ac) << "na " << na << " nb " << nb << " r " << r << " j " << j;
              ASSERT_EQ(nbc[lane][reg], e_bc) << "na " << na << " nb " << nb << " r " << r << " j " << j;
              ASSERT_EQ(common[lane][reg], e_common) << "na " << na << " nb " << nb << " r " << r << " j " << j;
            }
          }
        }
      }
      for (int i = 0; i < na * nb; ++i) ASSERT_EQ(seen[i], 1) << "pair " << i << " of " << na << " x " << nb;
    }
  }
}

// Rows past the probe's last cylinder are zero in the packed fragments (so
// they count nothing whatever the gallery holds).
TEST(LssMmaLayout, PaddingRowsAreZero) {
  std::mt19937_64 rng(17);
  const MccTemplate probe = RandomTemplate(5, rng);
  std::vector<uint32_t> frag(ProbeFragmentWords(5));
  ASSERT_EQ(frag.size(), static_cast<size_t>(kChunks * 32 * 4));
  PackProbeFragments(probe.cylinders.data(), 5, frag.data());
  for (int chunk = 0; chunk < kChunks; ++chunk) {
    for (int lane = 0; lane < 32; ++lane) {
      for (int reg = 0; reg < 4; ++reg) {
        const uint32_t v = frag[(chunk * 32 + lane) * 4 + reg];
        const int row = ARow(lane, reg);
        if (row >= 5) {
          EXPECT_EQ(v, 0u);
        } else {
          EXPECT_EQ(v, CylinderWord(probe.cylinders[row], chunk, AWord(lane, reg)));
        }
      }
    }
  }
}

// --- kWarpMma's launch plan (PlanSplit) ---------------------------------------

// An H200 as the CUDA runtime reports it (228 KB per SM, 1 KB reserved per
// block, 227 KB opt-in per block) with the warp-mma kernel's 4 blocks of 8 warps
// of 64 registers.
SplitDevice H200() {
  SplitDevice d;
  d.shared_per_sm = 233472;
  d.reserved_per_block = 1024;
  d.max_shared_per_block = 232448;
  d.register_blocks = 4;
  d.max_warps_per_block = 8;
  return d;
}

size_t ProbeBytes(int na) { return (static_cast<size_t>(ProbeFragmentWords(na)) * 4 + na * 20 + 15) / 16 * 16; }

// Every plan covers every template size exactly once, each pass's scratch
// holds its widest template's matrix, K and n_P, the first pass reaches the
// percentile it was given and its blocks fit the SM at the planned occupancy.
TEST(LssSplitPlan, PassesCoverAllSizesAndFit) {
  const SplitDevice d = H200();
  for (int na : {1, 12, 20, 30, 60, 150}) {
    for (int max_nb : {1, 40, 68, 150}) {
      for (int scratch : {0, 1, 30, 43, 67, 68, 200}) {
        SCOPED_TRACE(testing::Message() << "na " << na << " max " << max_nb << " scratch " << scratch);
        const SplitPlan plan = PlanSplit(na, max_nb, scratch, 12, ProbeBytes(na), d);
        ASSERT_TRUE(plan.passes == 1 || plan.passes == 2);
        EXPECT_EQ(plan.pass[0].nb_lo, 0);
        EXPECT_EQ(plan.pass[plan.passes - 1].nb_hi, INT_MAX);
        if (plan.passes == 2) {
          EXPECT_EQ(plan.pass[1].nb_lo, plan.pass[0].nb_hi + 1);
          EXPECT_EQ(plan.pass[0].width, plan.pass[0].nb_hi);
          EXPECT_EQ(plan.pass[1].width, max_nb);
          EXPECT_GE(plan.pass[0].width, scratch);
          EXPECT_LT(plan.pass[0].width, max_nb);
        } else {
          EXPECT_EQ(plan.pass[0].width, max_nb);
        }
        if (scratch <= 0 || scratch >= max_nb) {
          EXPECT_EQ(plan.passes, 1);
        }
        for (int i = 0; i < plan.passes; ++i) {
          const SplitPlan::Pass& p = plan.pass[i];
          EXPECT_EQ(p.warp_bytes % 16, 0u);
          EXPECT_GE(p.k_capacity, std::min(na, p.width));
          EXPECT_GE(p.k_capacity, 12);
          EXPECT_GE(p.warp_bytes, ComparisonScratchBytes(na * p.width, p.k_capacity));
          EXPECT_GE(p.warps, 1);
          EXPECT_LE(p.warps, 8);
          EXPECT_LE(ProbeBytes(na) + p.warps * p.warp_bytes, static_cast<size_t>(d.max_shared_per_block));
        }
        if (plan.blocks_per_sm > 0) {
          const size_t block = ProbeBytes(na) + plan.pass[0].warps * plan.pass[0].warp_bytes + d.reserved_per_block;
          EXPECT_LE(block * plan.blocks_per_sm, static_cast<size_t>(d.shared_per_sm));
        }
      }
    }
  }
}

// The numbers the issue is about: latent crops of 20 cylinders against
// 10^6-gallery batches (P90 40, largest 68) reach 4 blocks (32 warps) per SM
// with scratch nearly as wide as the largest template; a 30-cylinder crop
// gets 4 blocks with a second pass for the templates above 42 cylinders;
// the older warp-mma kernel's sizing (one pass for 68, 70 registers) gave 3
// blocks.
TEST(LssSplitPlan, LatentCropsReachFourBlocksPerSm) {
  const SplitDevice d = H200();
  const SplitPlan p20 = PlanSplit(20, 68, 40, 12, ProbeBytes(20), d);
  EXPECT_EQ(p20.blocks_per_sm, 4);
  EXPECT_EQ(p20.passes, 2);
  EXPECT_GE(p20.pass[0].width, 60);
  const SplitPlan p30 = PlanSplit(30, 68, 40, 12, ProbeBytes(30), d);
  EXPECT_EQ(p30.blocks_per_sm, 4);
  EXPECT_EQ(p30.passes, 2);
  EXPECT_GE(p30.pass[0].width, 40);
  const SplitPlan p14 = PlanSplit(14, 68, 40, 12, ProbeBytes(14), d);
  EXPECT_EQ(p14.blocks_per_sm, 4);
  EXPECT_EQ(p14.passes, 1);  // the largest template fits at 4 blocks
  EXPECT_EQ(p14.pass[0].width, 68);
}

// LssScratchTemplateSize: the smallest size with at least ceil(q n) templates
// at or below it.
TEST(LssScratchTemplateSize, Quantiles) {
  // Sizes 1..100 once each.
  std::vector<int32_t> start(101, 0);
  for (int t = 0; t < 100; ++t) start[t + 1] = start[t] + (t + 1);
  EXPECT_EQ(LssScratchTemplateSize(start.data(), 100, 0.9), 90);
  EXPECT_EQ(LssScratchTemplateSize(start.data(), 100, 0.95), 95);
  EXPECT_EQ(LssScratchTemplateSize(start.data(), 100, 1.0), 100);
  EXPECT_EQ(LssScratchTemplateSize(start.data(), 100, 0.0), 1);
  EXPECT_EQ(LssScratchTemplateSize(start.data(), 0, 0.9), 0);
  // Empty templates count as size 0.
  const std::vector<int32_t> empty(4, 0);
  EXPECT_EQ(LssScratchTemplateSize(empty.data(), 3, 0.9), 0);
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera

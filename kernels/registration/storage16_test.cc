// The host FromFloat<BFloat16> (storage16.h: the NaN case as a select, so
// that loops storing bf16 vectorise) against the branch it replaced: the same
// 16 bits for every float whose low half decides the rounding (every high
// half: signs, zeros, denormals, normals, infinities, signalling and quiet
// NaNs) and for random bit patterns.
#include "kernels/registration/storage16.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

namespace tessera::registration {
namespace {

// The host conversion before the select (early return for NaN).
uint16_t BranchFromFloatBf16(float v) {
  uint32_t x;
  std::memcpy(&x, &v, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

float FromBits(uint32_t x) {
  float v;
  std::memcpy(&v, &x, sizeof v);
  return v;
}

// Returns how many of the patterns differ (reporting the first few).
int64_t CountDifferences(uint32_t x, int64_t* reported) {
  const float v = FromBits(x);
  const uint16_t want = BranchFromFloatBf16(v), got = FromFloat<BFloat16>(v).bits;
  if (want == got) return 0;
  if ((*reported)++ < 5) ADD_FAILURE() << std::hex << "bits 0x" << x << ": 0x" << got << " vs 0x" << want;
  return 1;
}

TEST(Storage16, Bf16SelectMatchesBranchOnEveryHighHalf) {
  // Low halves around the rounding's decisions (below, at and above the
  // half-way point 0x8000, the ends), each with every high half.
  const uint32_t lows[] = {0x0000, 0x0001, 0x003f, 0x0040, 0x3fff, 0x7ffe, 0x7fff, 0x8000,
                           0x8001, 0xbfff, 0xc000, 0xfffe, 0xffff};
  int64_t differ = 0, reported = 0;
  for (uint32_t high = 0; high <= 0xffffu; ++high) {
    for (const uint32_t low : lows) differ += CountDifferences(high << 16 | low, &reported);
  }
  EXPECT_EQ(differ, 0);
}

TEST(Storage16, Bf16SelectMatchesBranchOnRandomPatterns) {
  std::mt19937 rng(1208);
  int64_t differ = 0, reported = 0;
  for (int i = 0; i < 4000000; ++i) differ += CountDifferences(static_cast<uint32_t>(rng()), &reported);
  EXPECT_EQ(differ, 0);
}

// The cases the contract names, spelled out: ties to even, overflow to
// infinity, NaNs quiet with their sign.
TEST(Storage16, Bf16KnownValues) {
  EXPECT_EQ(FromFloat<BFloat16>(FromBits(0x3f808000u)).bits, 0x3f80u);  // tie, even stays
  EXPECT_EQ(FromFloat<BFloat16>(FromBits(0x3f818000u)).bits, 0x3f82u);  // tie, odd rounds up
  EXPECT_EQ(FromFloat<BFloat16>(FromBits(0x7f7fffffu)).bits, 0x7f80u);  // largest float -> inf
  EXPECT_EQ(FromFloat<BFloat16>(FromBits(0x7f800001u)).bits, 0x7fc0u);  // signalling NaN made quiet
  EXPECT_EQ(FromFloat<BFloat16>(FromBits(0xffffffffu)).bits, 0xffffu);  // negative NaN keeps its payload
  EXPECT_EQ(FromFloat<BFloat16>(-std::numeric_limits<float>::infinity()).bits, 0xff80u);
  EXPECT_EQ(FromFloat<BFloat16>(FromBits(0x00008000u)).bits, 0x0000u);  // denormal tie to even (0)
}

}  // namespace
}  // namespace tessera::registration

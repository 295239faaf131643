// WSQ decoder tests: the real NIST files against the NIST reference decoder
// (NBIS dwsq, see bench/results/2026-12-06-wsq-decoder-vs-nbis.md), the
// wavelet synthesis against a direct analysis (perfect reconstruction),
// restart markers on a synthetic stream, and malformed input of every kind.
#include "services/fingerprint/image/wsq_decode.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "services/fingerprint/formats/fvc_data.h"
#include "services/fingerprint/image/wsq_subbands.h"
#include "services/fingerprint/image/wsq_tables.h"
#include "services/fingerprint/image/wsq_wavelet.h"

namespace tessera {
namespace fingerprint {
namespace {

constexpr int64_t kMaxPixels = int64_t{64} << 20;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string NistDir() {
  absl::StatusOr<std::string> dir = FindFingerprintDataDir();
  EXPECT_TRUE(dir.ok()) << dir.status();
  return dir.ok() ? *dir + "/nist/" : "";
}

std::string ImgWsq() { return ReadFile(NistDir() + "libbiomeval/img.wsq"); }

std::string TestdataPath(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const std::string rel = "services/fingerprint/image/testdata/" + name;
  if (srcdir != nullptr) return std::string(srcdir) + "/tessera/" + rel;
  return rel;
}

// A binary PGM ("P5 w h 255" and the pixels).
GrayImage ReadPgm(const std::string& bytes) {
  GrayImage image;
  std::istringstream in(bytes);
  std::string magic;
  int maxval = 0;
  in >> magic >> image.width >> image.height >> maxval;
  in.get();  // the single whitespace after the header
  EXPECT_EQ(magic, "P5");
  EXPECT_EQ(maxval, 255);
  image.pixels.resize(static_cast<size_t>(image.width) * image.height);
  in.read(reinterpret_cast<char*>(image.pixels.data()), image.pixels.size());
  EXPECT_EQ(in.gcount(), static_cast<std::streamsize>(image.pixels.size()));
  return image;
}

// The WSQ streams inside an ANSI/NIST file: SOI followed by a table, COM or
// SOF marker. Each runs to the end of the file (the decoder stops at EOI).
std::vector<std::string> WsqStreams(const std::string& file) {
  std::vector<std::string> streams;
  for (size_t p = 0; p + 4 <= file.size(); ++p) {
    const auto b = [&](size_t i) { return static_cast<uint8_t>(file[i]); };
    if (b(p) == 0xFF && b(p + 1) == 0xA0 && b(p + 2) == 0xFF && b(p + 3) >= 0xA2 && b(p + 3) <= 0xA8) {
      streams.push_back(file.substr(p));
    }
  }
  return streams;
}

struct Stats {
  double mean = 0, stddev = 0;
};
Stats PixelStats(const GrayImage& image) {
  Stats s;
  for (uint8_t p : image.pixels) s.mean += p;
  s.mean /= image.pixels.size();
  for (uint8_t p : image.pixels) s.stddev += (p - s.mean) * (p - s.mean);
  s.stddev = std::sqrt(s.stddev / image.pixels.size());
  return s;
}

// Every failure must be INVALID_ARGUMENT "WSQ: ... (offset N)".
void ExpectWsqError(const absl::StatusOr<GrayImage>& result, const std::string& what) {
  ASSERT_FALSE(result.ok()) << what;
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << what << ": " << result.status();
  EXPECT_TRUE(absl::StartsWith(result.status().message(), "WSQ: ")) << what << ": " << result.status();
  EXPECT_TRUE(absl::StrContains(result.status().message(), "(offset ")) << what << ": " << result.status();
}

// The marker segments of img.wsq before its first block: offset and total
// size (marker included).
struct SegmentPos {
  uint16_t marker;
  size_t offset, size;
};
std::vector<SegmentPos> HeaderSegments(const std::string& wsq) {
  std::vector<SegmentPos> out;
  size_t p = 2;
  while (p + 4 <= wsq.size()) {
    const uint16_t marker = static_cast<uint16_t>((static_cast<uint8_t>(wsq[p]) << 8) | static_cast<uint8_t>(wsq[p + 1]));
    const size_t length = (static_cast<uint8_t>(wsq[p + 2]) << 8) | static_cast<uint8_t>(wsq[p + 3]);
    out.push_back({marker, p, length + 2});
    if (marker == 0xFFA3) break;  // SOB
    p += length + 2;
  }
  return out;
}
SegmentPos Find(const std::vector<SegmentPos>& segments, uint16_t marker) {
  for (const SegmentPos& s : segments) {
    if (s.marker == marker) return s;
  }
  ADD_FAILURE() << "no segment " << std::hex << marker;
  return {0, 0, 0};
}
std::string Without(const std::string& wsq, uint16_t marker) {
  const SegmentPos s = Find(HeaderSegments(wsq), marker);
  return wsq.substr(0, s.offset) + wsq.substr(s.offset + s.size);
}

// ---------------------------------------------------------------------------
// Real files against the NIST reference decoder.

TEST(WsqDecodeTest, ImgWsqMatchesTheNbisDecoding) {
  absl::StatusOr<GrayImage> image = DecodeWsq(ImgWsq(), kMaxPixels);
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->width, 256);
  EXPECT_EQ(image->height, 256);
  EXPECT_EQ(image->ppi, 500);  // NISTCOM "PPI 500"
  // testdata/img_wsq_nbis.pgm: NBIS 5.0.0 dwsq's decoding of the same file.
  const GrayImage nbis = ReadPgm(ReadFile(TestdataPath("img_wsq_nbis.pgm")));
  ASSERT_EQ(nbis.width, 256);
  ASSERT_EQ(nbis.height, 256);
  // Both decoders compute in single precision, in different orders: a
  // reconstructed value within float rounding of x.5 can round either way.
  // Tolerance: |diff| <= 1 everywhere, on at most 0.1 % of the pixels
  // (measured: 5 of 65536 pixels differ, by 1).
  int max_diff = 0, differing = 0;
  double sum = 0;
  for (size_t i = 0; i < nbis.pixels.size(); ++i) {
    const int d = std::abs(int{image->pixels[i]} - int{nbis.pixels[i]});
    max_diff = std::max(max_diff, d);
    differing += d != 0;
    sum += d;
  }
  const double mean_diff = sum / nbis.pixels.size();
  std::cout << "img.wsq vs NBIS: max |diff| " << max_diff << ", mean |diff| " << mean_diff << ", " << differing
            << " of " << nbis.pixels.size() << " pixels differ\n";
  EXPECT_LE(max_diff, 1);
  EXPECT_LE(differing, static_cast<int>(nbis.pixels.size() / 1000));
  EXPECT_LT(mean_diff, 0.001);
}

TEST(WsqDecodeTest, AnsiNistWsqImages) {
  struct Expected {
    int width, height;
    double nbis_mean;  // mean pixel of NBIS's decoding
  };
  const Expected slaps[] = {{1608, 1000, 215.311}, {412, 1000, 187.072}, {392, 1000, 214.958}, {1572, 1000, 209.811}};
  const std::vector<std::pair<std::string, std::vector<Expected>>> files = {
      {"libbiomeval/type4-slaps.an2k", {slaps[0], slaps[1], slaps[2], slaps[3]}},
      {"ansi-nist-reference/type-14-tip-eji-wsq.an2",
       {{344, 370, 209.350}, {678, 1426, 169.354}, {399, 1460, 186.802}, {399, 1460, 184.340}, {399, 1460, 189.715}}},
      {"ansi-nist-reference/type-14-tpcard-nqm.an2",
       {{804, 752, 183.817}, {804, 752, 172.877}, {804, 752, 185.121}, {776, 752, 174.625}, {796, 752, 186.180},
        {804, 748, 185.969}, {804, 748, 178.946}, {804, 748, 178.727}, {776, 748, 194.125}, {796, 748, 199.521},
        slaps[0], slaps[1], slaps[2], slaps[3]}},
  };
  for (const auto& [name, expected] : files) {
    const std::vector<std::string> streams = WsqStreams(ReadFile(NistDir() + name));
    ASSERT_EQ(streams.size(), expected.size()) << name;
    for (size_t i = 0; i < streams.size(); ++i) {
      const auto start = std::chrono::steady_clock::now();
      absl::StatusOr<GrayImage> image = DecodeWsq(streams[i], kMaxPixels);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      ASSERT_TRUE(image.ok()) << name << " #" << i << ": " << image.status();
      EXPECT_EQ(image->width, expected[i].width) << name << " #" << i;
      EXPECT_EQ(image->height, expected[i].height) << name << " #" << i;
      EXPECT_GT(image->ppi, 0) << name << " #" << i;
      const Stats stats = PixelStats(*image);
      EXPECT_GT(stats.stddev, 20) << name << " #" << i << " looks blank";
      // One pixel in 10^4 off by one moves the mean by 10^-4.
      EXPECT_NEAR(stats.mean, expected[i].nbis_mean, 0.01) << name << " #" << i;
      std::cout << name << " #" << i << ": " << image->width << "x" << image->height << " ppi " << image->ppi
                << " mean " << stats.mean << " sd " << stats.stddev << ", " << ms << " ms\n";
    }
  }
}

TEST(WsqDecodeTest, PpiComesFromTheNistcomComment) {
  const std::string wsq = ImgWsq();
  const size_t ppi = wsq.find("PPI 500");
  ASSERT_NE(ppi, std::string::npos);
  std::string unknown = wsq;
  unknown.replace(ppi + 4, 3, "-01");
  absl::StatusOr<GrayImage> image = DecodeWsq(unknown, kMaxPixels);
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->ppi, 0);
  std::string not_nistcom = wsq;
  not_nistcom.replace(wsq.find("NIST_COM"), 8, "NOT_NIST");
  image = DecodeWsq(not_nistcom, kMaxPixels);
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->ppi, 0);
}

TEST(WsqDecodeTest, BytesAfterEoiAreIgnoredAndDecodingIsDeterministic) {
  const std::string wsq = ImgWsq();
  absl::StatusOr<GrayImage> a = DecodeWsq(wsq, kMaxPixels);
  absl::StatusOr<GrayImage> b = DecodeWsq(wsq + std::string(100, '\xFF') + "junk", kMaxPixels);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->pixels, b->pixels);
}

// ---------------------------------------------------------------------------
// The wavelet synthesis and the subband layout.

using wsq_internal::BuildLineSynthesis;
using wsq_internal::BuildSubbandLayout;
using wsq_internal::LineSynthesis;
using wsq_internal::WaveletFilters;

// A DTT payload for analysis filters given by their halves (centre first;
// for even lengths the right half, the highpass being antisymmetric).
std::string DttPayload(int lowpass_length, int highpass_length, const std::vector<double>& lowpass_half,
                       const std::vector<double>& highpass_half) {
  std::string d = {static_cast<char>(lowpass_length), static_cast<char>(highpass_length)};
  for (const std::vector<double>* half : {&lowpass_half, &highpass_half}) {
    for (double c : *half) {
      const uint32_t m = static_cast<uint32_t>(std::llround(std::fabs(c) * 1e9));
      d += {static_cast<char>(c < 0), 9, static_cast<char>(m >> 24), static_cast<char>(m >> 16),
            static_cast<char>(m >> 8), static_cast<char>(m)};
    }
  }
  return d;
}

struct FilterPair {
  const char* name;
  int lowpass_length, highpass_length;
  std::vector<double> lowpass_half, highpass_half;
};

std::vector<FilterPair> PerfectReconstructionPairs() {
  const double r2 = std::sqrt(0.5), s2 = std::sqrt(2.0);
  return {
      // The FBI encoder's pair (as img.wsq transmits it, rounded).
      {"CDF 9/7", 9, 7, {0.852698679, 0.377402856, -0.110624404, -0.023849465, 0.037828456},
       {0.788485616, -0.418092273, -0.040689418, 0.064538883}},
      {"LeGall 5/3", 5, 3, {0.75 * s2, 0.25 * s2, -0.125 * s2}, {0.5 * s2, -0.25 * s2}},
      // Even lengths: a symmetric lowpass and an antisymmetric highpass.
      {"Haar 2/2", 2, 2, {r2}, {-r2}},
      {"2/6", 2, 6, {r2}, {-r2, r2 / 8, r2 / 8}},
  };
}

// The encoder's analysis of x (the spec's symmetric extension): lowpass
// and highpass bands laid out as the decoder expects them.
std::vector<float> Analyze(const FilterPair& f, const std::vector<double>& x, bool inverted) {
  const int n = static_cast<int>(x.size());
  const bool even = f.lowpass_length % 2 == 0;
  std::vector<double> h0(f.lowpass_length), h1(f.highpass_length);
  const int a = static_cast<int>(f.lowpass_half.size()), b = static_cast<int>(f.highpass_half.size());
  for (int j = 0; j < a; ++j) h0[even ? a + j : a - 1 + j] = h0[a - 1 - j] = f.lowpass_half[j];
  for (int j = 0; j < b; ++j) {
    h1[even ? b + j : b - 1 + j] = f.highpass_half[j];
    h1[b - 1 - j] = even ? -f.highpass_half[j] : f.highpass_half[j];
  }
  auto sample = [&](int i) {  // whole-sample (odd filters) or half-sample (even) symmetric extension
    while (i < 0 || i >= n) {
      if (i < 0) i = even ? -1 - i : (n == 1 ? 0 : -i);
      else i = even ? 2 * n - 1 - i : (n == 1 ? 0 : 2 * (n - 1) - i);
    }
    return x[i];
  };
  const int low = (n + 1) / 2, high = n / 2;
  std::vector<float> line(n);
  for (int k = 0; k < low; ++k) {
    double s = 0;
    const int centre = even ? 2 * k + f.lowpass_length / 2 : 2 * k + (f.lowpass_length - 1) / 2;
    for (int i = 0; i < f.lowpass_length; ++i) s += h0[i] * sample(centre - i);
    line[(inverted ? high : 0) + k] = static_cast<float>(s);
  }
  for (int k = 0; k < high; ++k) {
    double s = 0;
    const int centre = even ? 2 * k + f.highpass_length / 2 : 2 * k + 1 + (f.highpass_length - 1) / 2;
    for (int i = 0; i < f.highpass_length; ++i) s += h1[i] * sample(centre - i);
    line[(inverted ? 0 : low) + k] = static_cast<float>(s);
  }
  return line;
}

TEST(WsqWaveletTest, SynthesisInvertsTheAnalysisAtEveryLength) {
  std::mt19937 rng(20261206);
  for (const FilterPair& pair : PerfectReconstructionPairs()) {
    const std::string dtt = DttPayload(pair.lowpass_length, pair.highpass_length, pair.lowpass_half,
                                       pair.highpass_half);
    wsq_internal::SegmentCursor in(dtt, 0, "DTT segment");
    absl::StatusOr<WaveletFilters> filters = wsq_internal::ParseTransformTable(in);
    ASSERT_TRUE(filters.ok()) << filters.status();
    for (int n = 1; n <= 64; ++n) {
      for (bool inverted : {false, true}) {
        std::vector<double> x(n);
        for (double& v : x) v = static_cast<int>(rng() % 255) - 127;
        const std::vector<float> line = Analyze(pair, x, inverted);
        const LineSynthesis s = BuildLineSynthesis(*filters, n, inverted);
        for (int i = 0; i < n; ++i) {
          double y = 0;
          for (int j = s.start[i]; j < s.start[i + 1]; ++j) y += s.weight[j] * line[s.source[j]];
          ASSERT_NEAR(y, x[i], 1e-3) << pair.name << " length " << n << (inverted ? " inverted" : "") << " sample " << i;
        }
        // The regular middle gives the same sums as the matrix rows.
        for (int parity = 0; parity < 2; ++parity) {
          const LineSynthesis::Interior& mid = s.interior[parity];
          for (int t = mid.begin; t < mid.end; ++t) {
            double y = 0;
            for (const LineSynthesis::Tap& tap : mid.taps) y += tap.weight * line[tap.source + t];
            ASSERT_NEAR(y, x[2 * t + parity], 1e-3) << pair.name << " length " << n << " interior " << 2 * t + parity;
          }
        }
      }
    }
  }
}

TEST(WsqWaveletTest, SubbandsTileTheImage) {
  for (auto [w, h] : std::vector<std::pair<int, int>>{{256, 256}, {1608, 1000}, {399, 1460}, {33, 17}, {1, 1}, {2, 3}}) {
    const wsq_internal::SubbandLayout layout = BuildSubbandLayout(w, h);
    std::vector<int> cover(static_cast<size_t>(w) * h, 0);
    for (const wsq_internal::Rect& r : layout.subbands) {
      ASSERT_GE(r.x, 0);
      ASSERT_GE(r.y, 0);
      ASSERT_LE(r.x + r.width, w);
      ASSERT_LE(r.y + r.height, h);
      for (int y = r.y; y < r.y + r.height; ++y) {
        for (int x = r.x; x < r.x + r.width; ++x) ++cover[static_cast<size_t>(y) * w + x];
      }
    }
    for (int c : cover) ASSERT_EQ(c, 1) << w << "x" << h;
    EXPECT_EQ(layout.steps.size(), 20u);
  }
  const wsq_internal::SubbandLayout layout = BuildSubbandLayout(256, 256);
  EXPECT_EQ(layout.subbands[0].width, 8);   // 256 halved five times
  EXPECT_EQ(layout.subbands[51].width, 64);
  EXPECT_EQ(layout.subbands[52].x, 128);    // the level-1 horizontal detail, split once more
  EXPECT_EQ(layout.subbands[52].width, 64);
}

// ---------------------------------------------------------------------------
// A synthetic stream: restart markers, and an all-zero image.

class BitWriter {
 public:
  void Put(uint32_t code, int length) {
    for (int i = length - 1; i >= 0; --i) {
      byte_ = static_cast<uint8_t>((byte_ << 1) | ((code >> i) & 1));
      if (++bits_ == 8) Flush();
    }
  }
  // Pads the last byte with ones (the spec's rule) and appends `marker`.
  void AlignAndMarker(uint16_t marker) {
    while (bits_ != 0) Put(1, 1);
    out_ += static_cast<char>(marker >> 8);
    out_ += static_cast<char>(marker & 0xFF);
  }
  std::string Finish() {
    while (bits_ != 0) Put(1, 1);
    return out_;
  }

 private:
  void Flush() {
    out_ += static_cast<char>(byte_);
    if (byte_ == 0xFF) out_ += '\0';  // stuffing
    byte_ = 0;
    bits_ = 0;
  }
  std::string out_;
  uint8_t byte_ = 0;
  int bits_ = 0;
};

std::string U8(int v) { return std::string(1, static_cast<char>(v)); }
std::string U16(int v) { return U8(v >> 8) + U8(v & 0xFF); }
std::string Segment(uint16_t marker, const std::string& payload) {
  return U16(marker) + U16(static_cast<int>(payload.size()) + 2) + payload;
}

// A 64 x 64 stream: every subband quantized with bin width 1, one Huffman
// table, coefficients +1 / -1 at the start and a zero run for the rest
// (64*64 - 32*32 = 3072 coefficients: subbands 60-63 are not coded).
// `restart_every` > 0 puts RST markers every that many symbols.
std::string SyntheticWsq(const std::string& dtt_segment, int restart_every, bool with_drt, bool zero = false) {
  std::string dqt = U8(2) + U16(44);                                           // C = 0.44
  for (int k = 0; k < 64; ++k) dqt += U8(0) + U16(1) + U8(1) + U16(12);        // Q 1, Z 1.2
  // Codes: 00 -> 106 (16-bit zero run), 01 -> 181 (+1), 100 -> 179 (-1),
  // 101 -> 1 (one zero). No code is all ones.
  std::string dht = U8(0) + U8(0) + U8(2) + U8(2) + std::string(13, '\0') + U8(106) + U8(181) + U8(179) + U8(1);
  // Black 0, white 255, 64 x 64, M = 128, R = 10, encoder 0, software 0.
  std::string sof = U8(0) + U8(255) + U16(64) + U16(64) + U8(0) + U16(128) + U8(0) + U16(10) + U8(0) + U16(0);
  std::string head = U16(0xFFA0) + dtt_segment + Segment(0xFFA5, dqt) + Segment(0xFFA6, dht);
  if (with_drt) head += Segment(0xFFA7, U16(4));
  head += Segment(0xFFA2, sof) + Segment(0xFFA3, U8(0));
  BitWriter bits;
  int symbols = 0, restarts = 0;
  // A symbol and its escape value bits (if any), then perhaps a restart.
  auto symbol = [&](uint32_t code, int length, uint32_t value = 0, int value_bits = 0) {
    bits.Put(code, length);
    if (value_bits > 0) bits.Put(value, value_bits);
    if (restart_every > 0 && ++symbols % restart_every == 0) bits.AlignAndMarker(0xFFB0 + (restarts++ % 8));
  };
  int coded = 0;
  if (!zero) {
    for (int i = 0; i < 40; ++i) {
      switch (i % 3) {
        case 0: symbol(0b01, 2); break;   // +1
        case 1: symbol(0b100, 3); break;  // -1
        case 2: symbol(0b101, 3); break;  // 0
      }
      ++coded;
    }
  }
  symbol(0b00, 2, 3072 - coded, 16);  // the rest: one 16-bit zero run
  return head + bits.Finish() + U16(0xFFA1);
}

std::string ImgDttSegment() {
  const std::string wsq = ImgWsq();
  const SegmentPos dtt = Find(HeaderSegments(wsq), 0xFFA4);
  return wsq.substr(dtt.offset, dtt.size);
}

TEST(WsqSyntheticTest, AllZeroCoefficientsGiveTheShift) {
  absl::StatusOr<GrayImage> image = DecodeWsq(SyntheticWsq(ImgDttSegment(), 0, false, /*zero=*/true), kMaxPixels);
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->width, 64);
  EXPECT_EQ(image->ppi, 0);  // no NISTCOM
  for (uint8_t p : image->pixels) ASSERT_EQ(p, 128);  // M = 128
}

TEST(WsqSyntheticTest, RestartMarkersOnlyRealignTheData) {
  const std::string dtt = ImgDttSegment();
  absl::StatusOr<GrayImage> plain = DecodeWsq(SyntheticWsq(dtt, 0, false), kMaxPixels);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_GT(PixelStats(*plain).stddev, 0.1);  // the +-1 coefficients show
  for (int every : {1, 3, 7}) {
    absl::StatusOr<GrayImage> restarted = DecodeWsq(SyntheticWsq(dtt, every, true), kMaxPixels);
    ASSERT_TRUE(restarted.ok()) << restarted.status();
    EXPECT_EQ(restarted->pixels, plain->pixels) << "restart every " << every;
  }
  absl::StatusOr<GrayImage> no_drt = DecodeWsq(SyntheticWsq(dtt, 3, false), kMaxPixels);
  ExpectWsqError(no_drt, "RST without DRT");
  EXPECT_TRUE(absl::StrContains(no_drt.status().message(), "without a DRT")) << no_drt.status();
}

// ---------------------------------------------------------------------------
// Malformed input: errors, never crashes.

TEST(WsqMalformedTest, EmptyAndTiny) {
  ExpectWsqError(DecodeWsq("", kMaxPixels), "empty");
  ExpectWsqError(DecodeWsq("\xFF", kMaxPixels), "one byte");
  ExpectWsqError(DecodeWsq("\xFF\xA0", kMaxPixels), "SOI only");
  ExpectWsqError(DecodeWsq("\xFF\xA0\xFF\xA1", kMaxPixels), "SOI EOI");
  ExpectWsqError(DecodeWsq("\xFF\xD8\xFF\xE0", kMaxPixels), "a JPEG");
}

TEST(WsqMalformedTest, EveryTruncationFails) {
  const std::string wsq = ImgWsq();
  ASSERT_GT(wsq.size(), 2000u);
  for (size_t n = 0; n < wsq.size(); n += (n < 2000 ? 1 : 97)) {
    ExpectWsqError(DecodeWsq(wsq.substr(0, n), kMaxPixels), "truncated to " + std::to_string(n));
  }
  ExpectWsqError(DecodeWsq(wsq.substr(0, wsq.size() - 1), kMaxPixels), "without the last byte");
}

// A mutated stream may still decode (a changed coefficient); otherwise it
// must fail cleanly. The sizes must be consistent either way.
void DecodeMutated(const std::string& bytes, const std::string& what) {
  absl::StatusOr<GrayImage> image = DecodeWsq(bytes, kMaxPixels);
  if (image.ok()) {
    ASSERT_EQ(image->pixels.size(), static_cast<size_t>(image->width) * image->height) << what;
  } else {
    ExpectWsqError(image, what);
  }
}

TEST(WsqMalformedTest, SingleByteMutations) {
  const std::string wsq = ImgWsq();
  std::mt19937 rng(20261206);
  int failed = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string m = wsq;
    const size_t pos = rng() % m.size();
    m[pos] = static_cast<char>(m[pos] ^ (1 + rng() % 255));
    DecodeMutated(m, "byte " + std::to_string(pos));
    failed += !DecodeWsq(m, kMaxPixels).ok();
  }
  std::cout << failed << " of 2000 single-byte mutations refused\n";
  EXPECT_GT(failed, 100);
}

TEST(WsqMalformedTest, ManyByteMutationsAndRandomData) {
  const std::string wsq = ImgWsq();
  const size_t header = Find(HeaderSegments(wsq), 0xFFA3).offset + 5;  // through the first SOB
  std::mt19937 rng(6122026);
  for (int i = 0; i < 300; ++i) {
    std::string m = wsq;
    const int changes = 2 + rng() % 15;
    for (int c = 0; c < changes; ++c) m[rng() % m.size()] = static_cast<char>(rng());
    DecodeMutated(m, "mutation set " + std::to_string(i));
  }
  for (int i = 0; i < 300; ++i) {
    std::string random(rng() % 4096, '\0');
    for (char& c : random) c = static_cast<char>(rng());
    DecodeMutated(random, "random " + std::to_string(i));
    DecodeMutated("\xFF\xA0" + random, "SOI + random " + std::to_string(i));
    DecodeMutated(wsq.substr(0, header) + random, "header + random " + std::to_string(i));
  }
}

TEST(WsqMalformedTest, OversizedImagesAreRefusedFromTheHeader) {
  const std::string wsq = ImgWsq();
  const SegmentPos sof = Find(HeaderSegments(wsq), 0xFFA2);
  std::string huge = wsq;
  huge.replace(sof.offset + 6, 4, "\xFF\xFF\xFF\xFF");  // 65535 x 65535
  absl::StatusOr<GrayImage> image = DecodeWsq(huge, kMaxPixels);
  ExpectWsqError(image, "65535 x 65535");
  EXPECT_TRUE(absl::StrContains(image.status().message(), "over the limit")) << image.status();
  // Within the limit but far beyond the data: fails on the data, quickly.
  std::string big = wsq;
  big.replace(sof.offset + 6, 4, "\x1F\x40\x1F\x40");  // 8000 x 8000
  const auto start = std::chrono::steady_clock::now();
  ExpectWsqError(DecodeWsq(big, kMaxPixels), "8000 x 8000 with 256 x 256 data");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
  ExpectWsqError(DecodeWsq(wsq, 256 * 256 - 1), "one pixel over max_pixels");
  std::string empty = wsq;
  empty.replace(sof.offset + 6, 2, std::string("\x00\x00", 2));  // height 0
  ExpectWsqError(DecodeWsq(empty, kMaxPixels), "height 0");
}

TEST(WsqMalformedTest, MissingSegmentsAreNamed) {
  const std::string wsq = ImgWsq();
  absl::StatusOr<GrayImage> image = DecodeWsq(Without(wsq, 0xFFA6), kMaxPixels);
  ExpectWsqError(image, "no DHT");
  EXPECT_TRUE(absl::StrContains(image.status().message(), "Huffman table 0 used by block 1 is not defined"))
      << image.status();
  image = DecodeWsq(Without(wsq, 0xFFA4), kMaxPixels);
  ExpectWsqError(image, "no DTT");
  EXPECT_TRUE(absl::StrContains(image.status().message(), "no DTT")) << image.status();
  image = DecodeWsq(Without(wsq, 0xFFA5), kMaxPixels);
  ExpectWsqError(image, "no DQT");
  EXPECT_TRUE(absl::StrContains(image.status().message(), "before any DQT")) << image.status();
  image = DecodeWsq(Without(wsq, 0xFFA2), kMaxPixels);
  ExpectWsqError(image, "no SOF");
  image = DecodeWsq(wsq.substr(0, wsq.size() - 2), kMaxPixels);
  ExpectWsqError(image, "no EOI");
  // A second frame header.
  const SegmentPos sof = Find(HeaderSegments(wsq), 0xFFA2);
  const std::string twice = wsq.substr(0, sof.offset) + wsq.substr(sof.offset, sof.size) + wsq.substr(sof.offset);
  image = DecodeWsq(twice, kMaxPixels);
  ExpectWsqError(image, "two SOF");
  EXPECT_TRUE(absl::StrContains(image.status().message(), "second SOF")) << image.status();
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera

#include "services/fingerprint/image/wsq_wavelet.h"

#include <algorithm>

namespace tessera {
namespace fingerprint {
namespace wsq_internal {
namespace {

// How a band continues past one of its ends.
enum class Edge {
  kWholeSymmetric,      // ... b2 b1 | b0 b1 b2 ...   (the axis is on b0)
  kHalfSymmetric,       // ... b1 b0 | b0 b1 ...      (the axis is between samples)
  kHalfAntisymmetric,   // ... -b1 -b0 | b0 b1 ...
  kWholeAntisymmetric,  // ... -b1 0 | b0 ...  at the right end: b(n-1) 0 -b(n-1) ...
};

struct BandExtension {
  int length = 0;
  Edge left = Edge::kWholeSymmetric;
  Edge right = Edge::kWholeSymmetric;
};

// The sample at index k of the extended band: sets *index (inside the band)
// and returns its sign, or 0 where the extension is an implied zero.
int Extend(int k, const BandExtension& band, int* index) {
  const int n = band.length;
  int sign = 1;
  // Each reflection brings k closer to the band; the filters (<= 32 taps)
  // reach at most a few periods out even for one-sample bands.
  for (int guard = 0; guard < 256; ++guard) {
    if (k >= 0 && k < n) {
      *index = k;
      return sign;
    }
    if (k < 0) {
      switch (band.left) {
        case Edge::kWholeSymmetric: k = n == 1 ? 0 : -k; break;
        case Edge::kHalfSymmetric: k = -1 - k; break;
        case Edge::kHalfAntisymmetric: k = -1 - k; sign = -sign; break;
        case Edge::kWholeAntisymmetric:
          if (k == -1) return 0;
          k = -2 - k;
          sign = -sign;
          break;
      }
    } else {
      switch (band.right) {
        case Edge::kWholeSymmetric: k = n == 1 ? 0 : 2 * (n - 1) - k; break;
        case Edge::kHalfSymmetric: k = 2 * n - 1 - k; break;
        case Edge::kHalfAntisymmetric: k = 2 * n - 1 - k; sign = -sign; break;
        case Edge::kWholeAntisymmetric:
          if (k == n) return 0;
          k = 2 * n - k;
          sign = -sign;
          break;
      }
    }
  }
  return 0;
}

// One band's part of the synthesis: output n receives
// filter[i] * band[(n + phase - i) / 2] for the taps i where n + phase - i
// is even (band indices outside the band go through its extension).
struct BandPart {
  const std::vector<float>* filter;
  int phase;
  int base;  // where the band starts in the line
  BandExtension extension;
};

// out[i] += w * in[i] for i < n (the arrays do not overlap). In blocks of
// 8 so that the compiler vectorizes it without a runtime trip count check.
void AddScaled(float w, const float* __restrict in, float* __restrict out, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) out[i + k] += w * in[i + k];
  }
  for (; i < n; ++i) out[i] += w * in[i];
}

}  // namespace

LineSynthesis BuildLineSynthesis(const WaveletFilters& filters, int length, bool inverted) {
  const int low_length = (length + 1) / 2;
  const int high_length = length / 2;
  const bool odd_length = length % 2 == 1;
  BandPart low{&filters.lowpass, 0, inverted ? high_length : 0, {low_length}};
  BandPart high{&filters.highpass, 0, inverted ? 0 : low_length, {high_length}};
  const int low_taps = static_cast<int>(filters.lowpass.size());
  const int high_taps = static_cast<int>(filters.highpass.size());
  if (!filters.even_length()) {
    // Lowpass samples at 2k, highpass at 2k+1, filters centred.
    low.phase = (low_taps - 1) / 2;
    high.phase = (high_taps - 1) / 2 - 1;
    low.extension.left = Edge::kWholeSymmetric;
    low.extension.right = odd_length ? Edge::kWholeSymmetric : Edge::kHalfSymmetric;
    high.extension.left = Edge::kHalfSymmetric;
    high.extension.right = odd_length ? Edge::kHalfSymmetric : Edge::kWholeSymmetric;
  } else {
    // Both bands at 2k + 1/2 (the phases of NBIS's join_lets, which this
    // matches to float rounding; wsq_decode_test checks reconstruction).
    low.phase = low_taps / 2 - 1;
    high.phase = high_taps / 2 - 1;
    low.extension.left = Edge::kHalfSymmetric;
    low.extension.right = odd_length ? Edge::kWholeSymmetric : Edge::kHalfSymmetric;
    high.extension.left = Edge::kHalfAntisymmetric;
    high.extension.right = odd_length ? Edge::kWholeAntisymmetric : Edge::kHalfAntisymmetric;
  }

  LineSynthesis s;
  s.start.reserve(length + 1);
  s.start.push_back(0);
  for (int n = 0; n < length; ++n) {
    const size_t first = s.source.size();
    for (const BandPart* part : {&low, &high}) {
      if (part->extension.length == 0) continue;
      const std::vector<float>& filter = *part->filter;
      for (int i = 0; i < static_cast<int>(filter.size()); ++i) {
        const int m = n + part->phase - i;
        if (m % 2 != 0) continue;
        int index = 0;
        const int sign = Extend(m / 2, part->extension, &index);
        if (sign == 0) continue;
        const int32_t source = part->base + index;
        const float w = static_cast<float>(sign) * filter[i];
        // A mirrored sample can be reached twice near the ends: one weight.
        auto it = std::find(s.source.begin() + first, s.source.end(), source);
        if (it != s.source.end()) {
          s.weight[it - s.source.begin()] += w;
        } else {
          s.source.push_back(source);
          s.weight.push_back(w);
        }
      }
    }
    s.start.push_back(static_cast<int32_t>(s.source.size()));
  }
  // The regular part: the outputs whose taps all fall inside their bands.
  for (int parity = 0; parity < 2; ++parity) {
    LineSynthesis::Interior& in = s.interior[parity];
    int begin = 0;
    int end = (length - parity + 1) / 2;  // outputs 2t + parity < length
    for (const BandPart* part : {&low, &high}) {
      const std::vector<float>& filter = *part->filter;
      for (int i = 0; i < static_cast<int>(filter.size()); ++i) {
        const int m = parity + part->phase - i;
        if (m % 2 != 0) continue;
        const int offset = m / 2;  // band index = t + offset
        begin = std::max(begin, -offset);
        end = std::min(end, part->extension.length - offset);
        in.taps.push_back({part->base + offset, filter[i]});
      }
    }
    if (begin < end) {
      in.begin = begin;
      in.end = end;
    } else {
      in.taps.clear();  // too short: the matrix rows do it all
    }
  }
  return s;
}

void InverseWaveletTransform(const WaveletFilters& filters, const SubbandLayout& layout, int width,
                             std::vector<float>& image) {
  std::vector<float> columns;  // one step's rectangle after the column pass
  std::vector<float> sums;     // the regular outputs of one row, one parity
  for (const SynthesisStep& step : layout.steps) {
    const Rect& r = step.rect;
    if (r.width == 0 || r.height == 0) continue;
    columns.assign(static_cast<size_t>(r.width) * r.height, 0.0f);
    // Columns: each output row is a weighted sum of whole input rows.
    const LineSynthesis down = BuildLineSynthesis(filters, r.height, step.invert_y);
    for (int y = 0; y < r.height; ++y) {
      float* out = columns.data() + static_cast<size_t>(y) * r.width;
      for (int32_t j = down.start[y]; j < down.start[y + 1]; ++j) {
        const float* in = image.data() + static_cast<size_t>(r.y + down.source[j]) * width + r.x;
        AddScaled(down.weight[j], in, out, r.width);
      }
    }
    // Rows, back into the image: the regular middle tap by tap over the
    // whole row, then the ends from the matrix rows.
    const LineSynthesis across = BuildLineSynthesis(filters, r.width, step.invert_x);
    for (int y = 0; y < r.height; ++y) {
      const float* in = columns.data() + static_cast<size_t>(y) * r.width;
      float* out = image.data() + static_cast<size_t>(r.y + y) * width + r.x;
      for (int parity = 0; parity < 2; ++parity) {
        const LineSynthesis::Interior& mid = across.interior[parity];
        const int n = mid.end - mid.begin;
        if (n <= 0) continue;
        sums.assign(n, 0.0f);
        for (const LineSynthesis::Tap& tap : mid.taps) AddScaled(tap.weight, in + tap.source + mid.begin, sums.data(), n);
        for (int t = 0; t < n; ++t) out[2 * (mid.begin + t) + parity] = sums[t];
      }
      for (int x = 0; x < r.width; ++x) {
        const LineSynthesis::Interior& mid = across.interior[x % 2];
        if (x / 2 >= mid.begin && x / 2 < mid.end) continue;
        float sum = 0.0f;
        for (int32_t j = across.start[x]; j < across.start[x + 1]; ++j) sum += across.weight[j] * in[across.source[j]];
        out[x] = sum;
      }
    }
  }
}

}  // namespace wsq_internal
}  // namespace fingerprint
}  // namespace tessera

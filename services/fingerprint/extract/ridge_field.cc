#include "services/fingerprint/extract/ridge_field.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <queue>

namespace tessera {
namespace fingerprint {
namespace {

constexpr float kPi = 3.14159265358979f;

// A Gaussian blur of a block grid (cols x rows), border clamped.
std::vector<float> BlurGrid(const std::vector<float>& g, int cols, int rows, float sigma) {
  FloatImage img(cols, rows);
  img.v = g;
  return GaussianBlur(img, sigma).v;
}

// Morphology on the block mask: 3x3 dilation (grow) or erosion.
std::vector<uint8_t> Morph(const std::vector<uint8_t>& m, int cols, int rows, bool grow) {
  std::vector<uint8_t> out(m.size());
  for (int y = 0; y < rows; ++y) {
    for (int x = 0; x < cols; ++x) {
      bool any = false, all = true;
      for (int dy = -1; dy <= 1; ++dy) {
        for (int dx = -1; dx <= 1; ++dx) {
          const int xx = x + dx, yy = y + dy;
          const bool v = xx >= 0 && yy >= 0 && xx < cols && yy < rows && m[yy * cols + xx];
          any |= v;
          all &= v;
        }
      }
      out[y * cols + x] = grow ? any : all;
    }
  }
  return out;
}

// Keeps the largest 4-connected component of the mask and fills its holes
// (background not connected to the border).
std::vector<uint8_t> LargestComponentFilled(const std::vector<uint8_t>& m, int cols, int rows) {
  std::vector<int> label(m.size(), -1);
  int best = -1, best_size = 0, next = 0;
  for (int start = 0; start < static_cast<int>(m.size()); ++start) {
    if (!m[start] || label[start] >= 0) continue;
    int size = 0;
    std::queue<int> q;
    q.push(start);
    label[start] = next;
    while (!q.empty()) {
      const int i = q.front();
      q.pop();
      ++size;
      const int x = i % cols, y = i / cols;
      const int nb[4][2] = {{x - 1, y}, {x + 1, y}, {x, y - 1}, {x, y + 1}};
      for (const auto& n : nb) {
        if (n[0] < 0 || n[1] < 0 || n[0] >= cols || n[1] >= rows) continue;
        const int j = n[1] * cols + n[0];
        if (m[j] && label[j] < 0) {
          label[j] = next;
          q.push(j);
        }
      }
    }
    if (size > best_size) best_size = size, best = next;
    ++next;
  }
  std::vector<uint8_t> out(m.size(), 0);
  if (best < 0) return out;
  for (size_t i = 0; i < m.size(); ++i) out[i] = label[i] == best;
  // Fill holes: flood the background from the border; what it misses is inside.
  std::vector<uint8_t> outside(m.size(), 0);
  std::queue<int> q;
  for (int y = 0; y < rows; ++y) {
    for (int x = 0; x < cols; ++x) {
      if ((x == 0 || y == 0 || x == cols - 1 || y == rows - 1) && !out[y * cols + x]) {
        outside[y * cols + x] = 1;
        q.push(y * cols + x);
      }
    }
  }
  while (!q.empty()) {
    const int i = q.front();
    q.pop();
    const int x = i % cols, y = i / cols;
    const int nb[4][2] = {{x - 1, y}, {x + 1, y}, {x, y - 1}, {x, y + 1}};
    for (const auto& n : nb) {
      if (n[0] < 0 || n[1] < 0 || n[0] >= cols || n[1] >= rows) continue;
      const int j = n[1] * cols + n[0];
      if (!out[j] && !outside[j]) {
        outside[j] = 1;
        q.push(j);
      }
    }
  }
  for (size_t i = 0; i < m.size(); ++i) out[i] = !outside[i];
  return out;
}

// The ridge period in a window centred on (cx, cy), across ridges running
// at `theta`: the intensity profile along the normal (averaged along the
// ridge) correlated with cosines of candidate periods; 0 when no period stands out.
float WavelengthAt(const FloatImage& img, float cx, float cy, float theta, const RidgeFieldOptions& o,
                   float* power) {
  *power = 0;
  constexpr int kLength = 32;  // samples across the ridges
  constexpr int kWidth = 12;   // samples along the ridges
  const float ux = std::cos(theta), uy = std::sin(theta);  // along the ridge
  const float nx = -uy, ny = ux;                            // across
  float profile[kLength];
  float mean = 0;
  for (int i = 0; i < kLength; ++i) {
    const float t = i - (kLength - 1) / 2.0f;
    float acc = 0;
    for (int j = 0; j < kWidth; ++j) {
      const float s = j - (kWidth - 1) / 2.0f;
      acc += img.Sample(cx + t * nx + s * ux, cy + t * ny + s * uy);
    }
    profile[i] = acc / kWidth;
    mean += profile[i];
  }
  mean /= kLength;
  float energy = 0;
  for (float& p : profile) {
    p -= mean;
    energy += p * p;
  }
  if (energy <= 1e-6f) return 0;
  float best_power = 0, best_period = 0;
  for (float period = o.min_wavelength; period <= o.max_wavelength + 1e-3f; period += 0.5f) {
    float c = 0, s = 0;
    for (int i = 0; i < kLength; ++i) {
      const float a = 2 * kPi * i / period;
      c += profile[i] * std::cos(a);
      s += profile[i] * std::sin(a);
    }
    const float power = (c * c + s * s) / (energy * kLength);
    if (power > best_power) best_power = power, best_period = period;
  }
  // A clean sinusoid gives power 0.5; noise gives little.
  *power = best_power;
  if (best_power < 0.15f) return 0;
  return best_period;
}

// A print's ridge period changes slowly and little; a block whose estimate
// is far from the print's median caught noise, most often a sub-harmonic
// (every other ridge darker: twice the period). Dropped before the
// neighbours fill the gap, so it cannot pull them off.
void RejectWavelengthOutliers(float median, float spread, std::vector<float>& wl, std::vector<float>& have) {
  for (size_t b = 0; b < wl.size(); ++b) {
    if (have[b] && (wl[b] * spread < median || wl[b] > median * spread)) wl[b] = 0, have[b] = 0;
  }
}

}  // namespace

int RidgeField::BlockOf(int x, int y) const {
  int bx = x / block, by = y / block;
  bx = std::min(std::max(bx, 0), cols - 1);
  by = std::min(std::max(by, 0), rows - 1);
  return index(bx, by);
}

float RidgeField::OrientationAt(float x, float y) const {
  // Block centres at (b + 0.5) * block.
  const float gx = x / block - 0.5f, gy = y / block - 0.5f;
  const int x0 = static_cast<int>(std::floor(gx)), y0 = static_cast<int>(std::floor(gy));
  const float fx = gx - x0, fy = gy - y0;
  float c = 0, s = 0;
  for (int dy = 0; dy <= 1; ++dy) {
    for (int dx = 0; dx <= 1; ++dx) {
      const int bx = std::min(std::max(x0 + dx, 0), cols - 1);
      const int by = std::min(std::max(y0 + dy, 0), rows - 1);
      const float w = (dx ? fx : 1 - fx) * (dy ? fy : 1 - fy);
      const float t = orientation[index(bx, by)];
      c += w * std::cos(2 * t);
      s += w * std::sin(2 * t);
    }
  }
  float t = 0.5f * std::atan2(s, c);
  if (t < 0) t += kPi;
  return t;
}

RidgeField EstimateRidgeField(const FloatImage& img, const RidgeFieldOptions& o) {
  RidgeField f;
  f.block = o.block;
  f.cols = (img.width + o.block - 1) / o.block;
  f.rows = (img.height + o.block - 1) / o.block;
  const int nb = f.cols * f.rows;
  // Gradients of the lightly smoothed image, summed into the block tensor.
  const FloatImage smooth = GaussianBlur(img, 1.0f);
  std::vector<float> gxx(nb, 0), gyy(nb, 0), gxy(nb, 0), sum(nb, 0), sum2(nb, 0), count(nb, 0);
  for (int y = 0; y < img.height; ++y) {
    for (int x = 0; x < img.width; ++x) {
      const float gx = (smooth.clamped(x + 1, y - 1) + 2 * smooth.clamped(x + 1, y) + smooth.clamped(x + 1, y + 1)) -
                       (smooth.clamped(x - 1, y - 1) + 2 * smooth.clamped(x - 1, y) + smooth.clamped(x - 1, y + 1));
      const float gy = (smooth.clamped(x - 1, y + 1) + 2 * smooth.clamped(x, y + 1) + smooth.clamped(x + 1, y + 1)) -
                       (smooth.clamped(x - 1, y - 1) + 2 * smooth.clamped(x, y - 1) + smooth.clamped(x + 1, y - 1));
      const int b = f.index(x / o.block, y / o.block);
      gxx[b] += gx * gx;
      gyy[b] += gy * gy;
      gxy[b] += gx * gy;
      const float v = img.at(x, y);
      sum[b] += v;
      sum2[b] += v * v;
      count[b] += 1;
    }
  }
  gxx = BlurGrid(gxx, f.cols, f.rows, o.tensor_sigma_blocks);
  gyy = BlurGrid(gyy, f.cols, f.rows, o.tensor_sigma_blocks);
  gxy = BlurGrid(gxy, f.cols, f.rows, o.tensor_sigma_blocks);
  f.coherence.resize(nb);
  std::vector<float> c2(nb), s2(nb);
  for (int b = 0; b < nb; ++b) {
    const float d = gxx[b] - gyy[b];
    const float mag = std::sqrt(d * d + 4 * gxy[b] * gxy[b]);
    const float trace = gxx[b] + gyy[b];
    f.coherence[b] = trace > 1e-6f ? mag / trace : 0;
    // Doubled gradient angle; the ridge runs perpendicular (a half turn of the doubled angle).
    const float w = mag;
    c2[b] = -d / (mag + 1e-12f) * w;
    s2[b] = -2 * gxy[b] / (mag + 1e-12f) * w;
  }
  c2 = BlurGrid(c2, f.cols, f.rows, o.angle_sigma_blocks);
  s2 = BlurGrid(s2, f.cols, f.rows, o.angle_sigma_blocks);
  f.orientation.resize(nb);
  for (int b = 0; b < nb; ++b) {
    float t = 0.5f * std::atan2(s2[b], c2[b]);
    if (t < 0) t += kPi;
    f.orientation[b] = t;
  }
  // Contrast: the std of a 3x3-block window.
  f.contrast.assign(nb, 0);
  for (int by = 0; by < f.rows; ++by) {
    for (int bx = 0; bx < f.cols; ++bx) {
      float s = 0, s2w = 0, n = 0;
      for (int dy = -1; dy <= 1; ++dy) {
        for (int dx = -1; dx <= 1; ++dx) {
          const int xx = bx + dx, yy = by + dy;
          if (xx < 0 || yy < 0 || xx >= f.cols || yy >= f.rows) continue;
          const int j = f.index(xx, yy);
          s += sum[j];
          s2w += sum2[j];
          n += count[j];
        }
      }
      const float mean = s / n;
      f.contrast[f.index(bx, by)] = std::sqrt(std::max(0.0f, s2w / n - mean * mean));
    }
  }
  std::vector<float> sorted = f.contrast;
  std::sort(sorted.begin(), sorted.end());
  const float p90 = sorted[static_cast<size_t>(0.9 * (sorted.size() - 1))];
  std::vector<uint8_t> mask(nb);
  for (int b = 0; b < nb; ++b) mask[b] = f.contrast[b] > o.contrast_share * p90;
  mask = Morph(Morph(mask, f.cols, f.rows, true), f.cols, f.rows, false);    // close
  mask = Morph(Morph(mask, f.cols, f.rows, false), f.cols, f.rows, true);    // open
  f.foreground = LargestComponentFilled(mask, f.cols, f.rows);
  // Wavelength per foreground block; gaps filled from the neighbours, then smoothed.
  std::vector<float> wl(nb, 0), have(nb, 0);
  f.ridge_power.assign(nb, 0);
  for (int by = 0; by < f.rows; ++by) {
    for (int bx = 0; bx < f.cols; ++bx) {
      const int b = f.index(bx, by);
      if (!f.foreground[b]) continue;
      const float w =
          WavelengthAt(smooth, (bx + 0.5f) * o.block, (by + 0.5f) * o.block, f.orientation[b], o, &f.ridge_power[b]);
      if (w > 0) wl[b] = w, have[b] = 1;
    }
  }
  std::vector<float> valid;
  for (int b = 0; b < nb; ++b) if (have[b]) valid.push_back(wl[b]);
  float median = o.default_wavelength;
  if (!valid.empty()) {
    std::nth_element(valid.begin(), valid.begin() + valid.size() / 2, valid.end());
    median = valid[valid.size() / 2];
  }
  RejectWavelengthOutliers(median, o.wavelength_spread, wl, have);
  std::vector<float> wsum(nb), wcnt(nb);
  for (int b = 0; b < nb; ++b) wsum[b] = wl[b], wcnt[b] = have[b];
  wsum = BlurGrid(wsum, f.cols, f.rows, 2.0f);
  wcnt = BlurGrid(wcnt, f.cols, f.rows, 2.0f);
  f.wavelength.resize(nb);
  for (int b = 0; b < nb; ++b) {
    f.wavelength[b] = wcnt[b] > 0.05f ? wsum[b] / wcnt[b] : median;
    f.wavelength[b] = std::min(std::max(f.wavelength[b], o.min_wavelength), o.max_wavelength);
  }
  return f;
}

}  // namespace fingerprint
}  // namespace tessera

// CUDA kernels of the batched extractor (extract_cuda.h) and its plan.
// Built with -fmad=false: every float expression below is the reference's
// (extractor.cc, ridge_field.cc, gabor_enhance.cc, float_image.cc,
// skeleton.cc), in its order, unfused; comments name the reference function.
//
// Kernels, in order, over the whole batch (grid.y or grid.x = image):
//   PixelSums         integer sum and sum of squares per image (NormalizeImage)
//   Normalize         zero mean, unit variance
//   Blur1D x2        GaussianBlur(normalized, 1): the smoothed image
//   BlockTensor       per block, in the reference's pixel order: the gradient
//                     tensor sums and the intensity sums (one thread a block)
//   FieldGrid         one CTA per image: tensor blur, coherence, orientation,
//                     contrast, its 90th percentile (by rank), the mask's
//                     close/open, the largest component with holes filled
//   Wavelength        WavelengthAt per foreground block (one thread a block)
//   WavelengthGrid    one CTA per image: median (by rank), fill, clamp
//   Gabor             per pixel: the kernel the reference picks, the response,
//                     and the binarization
//   Thin              one CTA per image: Zhang-Suen sub-iterations until no
//                     change, then the staircase sweep as a wavefront
//                     (pixel (x, y) at step x + 2y: its raster predecessors
//                     NW, N, NE, W are done, its successors untouched)
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/cuda_check.h"
#include "common/device.h"
#include "common/status.h"
#include "services/fingerprint/extract/extract_cuda.h"
#include "services/fingerprint/extract/extract_cuda_impl.h"

namespace tessera {
namespace fingerprint {

using extract_cuda_internal::DenseResults;
using extract_cuda_internal::ImageDesc;
using extract_cuda_internal::kProfileLength;
using extract_cuda_internal::kProfileWidth;
using extract_cuda_internal::Tables;

namespace {

constexpr float kPi = 3.14159265358979f;  // the reference's constant
constexpr int kPixelThreads = 256;
constexpr int kBlockThreads = 128;
constexpr int kGridThreads = 256;
constexpr int kThinThreads = 512;

// Per-block float arrays, each total_blocks long.
enum BlockArray {
  kGxx, kGyy, kGxy, kSum, kSum2, kCount, kCoherence, kOrientation, kContrast, kWavelength, kRidgePower,
  kC2, kS2, kCos2, kSin2, kScratch, kWl, kHave, kBlockArrays
};

struct Dev {
  const ImageDesc* desc;
  int n;
  const uint8_t* gray;
  float* norm;
  float* tmp;
  float* smooth;
  float* enhanced;
  uint8_t* skeleton;
  unsigned long long* sums;  // 2 per image
  float* blocks;             // kBlockArrays x total_blocks
  int64_t total_blocks;
  uint8_t* mask;             // 3 x total_blocks: foreground, scratch a, scratch b
  int* label;                // total_blocks
  int* comp_size;            // total_blocks
  unsigned long long* best;  // per image
  // Tables.
  const float* g_pixel;
  const float* g_tensor;
  const float* g_angle;
  const float* g_wl;
  int r_pixel, r_tensor, r_angle, r_wl;
  const float* gabor;
  int directions, gabor_wls, gabor_radius;
  float gabor_min_wl, gabor_step;
  const float* periods;
  const float* pcos;
  const float* psin;
  const float* taper;  // null: no taper (Tables::profile_taper)
  float taper_norm;
  int n_periods;
  const uint8_t* rules;
  int block;
  float contrast_share, min_wl, max_wl, default_wl, wl_spread;

  __device__ float* arr(int a, const ImageDesc& d) const { return blocks + a * total_blocks + d.block_offset; }
};

__device__ __forceinline__ int ClampI(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// FloatImage::clamped / Sample.
__device__ __forceinline__ float Clamped(const float* img, int w, int h, int x, int y) {
  return img[static_cast<int64_t>(ClampI(y, 0, h - 1)) * w + ClampI(x, 0, w - 1)];
}
__device__ float Sample(const float* img, int w, int h, float x, float y) {
  const int x0 = static_cast<int>(floorf(x));
  const int y0 = static_cast<int>(floorf(y));
  const float fx = x - x0;
  const float fy = y - y0;
  const float a = Clamped(img, w, h, x0, y0) * (1 - fx) + Clamped(img, w, h, x0 + 1, y0) * fx;
  const float b = Clamped(img, w, h, x0, y0 + 1) * (1 - fx) + Clamped(img, w, h, x0 + 1, y0 + 1) * fx;
  return a * (1 - fy) + b * fy;
}

// glibc's float atan2/cos/sin, within an ulp: double, rounded.
__device__ __forceinline__ float Atan2F(float y, float x) {
  return static_cast<float>(atan2(static_cast<double>(y), static_cast<double>(x)));
}
__device__ __forceinline__ float CosF(float v) { return static_cast<float>(cos(static_cast<double>(v))); }
__device__ __forceinline__ float SinF(float v) { return static_cast<float>(sin(static_cast<double>(v))); }

// ---- NormalizeImage -------------------------------------------------------

__global__ void PixelSums(Dev dev) {
  const ImageDesc d = dev.desc[blockIdx.y];
  const int64_t np = static_cast<int64_t>(d.width) * d.height;
  unsigned long long s = 0, s2 = 0;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < np;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const unsigned v = dev.gray[d.pixel_offset + p];
    s += v;
    s2 += v * v;
  }
  for (int o = 16; o > 0; o >>= 1) {
    s += __shfl_down_sync(0xffffffffu, s, o);
    s2 += __shfl_down_sync(0xffffffffu, s2, o);
  }
  if ((threadIdx.x & 31) == 0 && (s | s2)) {
    atomicAdd(&dev.sums[2 * blockIdx.y], s);  // integers: any order gives the same sum
    atomicAdd(&dev.sums[2 * blockIdx.y + 1], s2);
  }
}

__global__ void Normalize(Dev dev) {
  const ImageDesc d = dev.desc[blockIdx.y];
  const int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t np = static_cast<int64_t>(d.width) * d.height;
  if (p >= np) return;
  const double sum = static_cast<double>(dev.sums[2 * blockIdx.y]);
  const double sum2 = static_cast<double>(dev.sums[2 * blockIdx.y + 1]);
  const double n = static_cast<double>(np);
  const double mean = sum / n;
  const double var = fmax(0.0, sum2 / n - mean * mean);
  const float inv = var > 1e-9 ? static_cast<float>(1 / sqrt(var)) : 0.0f;
  dev.norm[d.pixel_offset + p] = static_cast<float>(dev.gray[d.pixel_offset + p] - mean) * inv;
}

// ---- GaussianBlur(normalized, 1) ------------------------------------------

// One pass of the separable blur: along rows (kDx 1, kDy 0) or columns.
template <int kDx, int kDy>
__global__ void Blur1D(Dev dev, const float* in, float* out) {
  const ImageDesc d = dev.desc[blockIdx.y];
  const int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= static_cast<int64_t>(d.width) * d.height) return;
  const int x = static_cast<int>(p % d.width), y = static_cast<int>(p / d.width);
  const float* img = in + d.pixel_offset;
  const int r = dev.r_pixel;
  float acc = 0;
  for (int i = -r; i <= r; ++i) acc += dev.g_pixel[i + r] * Clamped(img, d.width, d.height, x + kDx * i, y + kDy * i);
  out[d.pixel_offset + p] = acc;
}

// ---- EstimateRidgeField ---------------------------------------------------

__global__ void BlockTensor(Dev dev) {
  const ImageDesc d = dev.desc[blockIdx.y];
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= d.cols * d.rows) return;
  const int bx = b % d.cols, by = b / d.cols, B = dev.block;
  const float* s = dev.smooth + d.pixel_offset;
  const float* img = dev.norm + d.pixel_offset;
  const int w = d.width, h = d.height;
  float gxx = 0, gyy = 0, gxy = 0, sum = 0, sum2 = 0, count = 0;
  for (int y = by * B; y < min(h, (by + 1) * B); ++y) {
    for (int x = bx * B; x < min(w, (bx + 1) * B); ++x) {
      const float gx = (Clamped(s, w, h, x + 1, y - 1) + 2 * Clamped(s, w, h, x + 1, y) + Clamped(s, w, h, x + 1, y + 1)) -
                       (Clamped(s, w, h, x - 1, y - 1) + 2 * Clamped(s, w, h, x - 1, y) + Clamped(s, w, h, x - 1, y + 1));
      const float gy = (Clamped(s, w, h, x - 1, y + 1) + 2 * Clamped(s, w, h, x, y + 1) + Clamped(s, w, h, x + 1, y + 1)) -
                       (Clamped(s, w, h, x - 1, y - 1) + 2 * Clamped(s, w, h, x, y - 1) + Clamped(s, w, h, x + 1, y - 1));
      gxx += gx * gx;
      gyy += gy * gy;
      gxy += gx * gy;
      const float v = img[static_cast<int64_t>(y) * w + x];
      sum += v;
      sum2 += v * v;
      count += 1;
    }
  }
  dev.arr(kGxx, d)[b] = gxx;
  dev.arr(kGyy, d)[b] = gyy;
  dev.arr(kGxy, d)[b] = gxy;
  dev.arr(kSum, d)[b] = sum;
  dev.arr(kSum2, d)[b] = sum2;
  dev.arr(kCount, d)[b] = count;
}

// BlurGrid (GaussianBlur of a cols x rows grid) by one CTA; `in` may be `out`.
__device__ void CtaBlurGrid(const float* in, float* out, float* scratch, int cols, int rows, const float* k, int r) {
  const int nb = cols * rows;
  for (int i = threadIdx.x; i < nb; i += blockDim.x) {
    const int x = i % cols, y = i / cols;
    float acc = 0;
    for (int j = -r; j <= r; ++j) acc += k[j + r] * in[y * cols + ClampI(x + j, 0, cols - 1)];
    scratch[i] = acc;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < nb; i += blockDim.x) {
    const int x = i % cols, y = i / cols;
    float acc = 0;
    for (int j = -r; j <= r; ++j) acc += k[j + r] * scratch[ClampI(y + j, 0, rows - 1) * cols + x];
    out[i] = acc;
  }
  __syncthreads();
}

// Morph: 3x3 dilation (grow) or erosion of the block mask.
__device__ void CtaMorph(const uint8_t* m, uint8_t* out, int cols, int rows, bool grow) {
  for (int i = threadIdx.x; i < cols * rows; i += blockDim.x) {
    const int x = i % cols, y = i / cols;
    bool any = false, all = true;
    for (int dy = -1; dy <= 1; ++dy) {
      for (int dx = -1; dx <= 1; ++dx) {
        const int xx = x + dx, yy = y + dy;
        const bool v = xx >= 0 && yy >= 0 && xx < cols && yy < rows && m[yy * cols + xx];
        any |= v;
        all &= v;
      }
    }
    out[i] = grow ? any : all;
  }
  __syncthreads();
}

// The rank-k value of v[0..n) (what sorting and indexing k gives), among the
// entries with keep[i] (all when keep is null). Every thread gets it.
__device__ float CtaSelect(const float* v, const float* keep, int n, long long k, float* shared_result) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    if (keep && !(keep[i] > 0)) continue;
    const float x = v[i];
    long long less = 0, equal = 0;
    for (int j = 0; j < n; ++j) {
      if (keep && !(keep[j] > 0)) continue;
      less += v[j] < x;
      equal += v[j] == x;
    }
    if (less <= k && k < less + equal) *shared_result = x;  // every such writer writes x
  }
  __syncthreads();
  const float r = *shared_result;
  __syncthreads();
  return r;
}

__global__ void __launch_bounds__(kGridThreads) FieldGrid(Dev dev) {
  const int img = blockIdx.x;
  const ImageDesc d = dev.desc[img];
  const int cols = d.cols, rows = d.rows, nb = cols * rows;
  float* scratch = dev.arr(kScratch, d);
  float* gxx = dev.arr(kGxx, d);
  float* gyy = dev.arr(kGyy, d);
  float* gxy = dev.arr(kGxy, d);
  CtaBlurGrid(gxx, gxx, scratch, cols, rows, dev.g_tensor, dev.r_tensor);
  CtaBlurGrid(gyy, gyy, scratch, cols, rows, dev.g_tensor, dev.r_tensor);
  CtaBlurGrid(gxy, gxy, scratch, cols, rows, dev.g_tensor, dev.r_tensor);
  float* coherence = dev.arr(kCoherence, d);
  float* c2 = dev.arr(kC2, d);
  float* s2 = dev.arr(kS2, d);
  for (int b = threadIdx.x; b < nb; b += blockDim.x) {
    const float dd = gxx[b] - gyy[b];
    const float mag = sqrtf(dd * dd + 4 * gxy[b] * gxy[b]);
    const float trace = gxx[b] + gyy[b];
    coherence[b] = trace > 1e-6f ? mag / trace : 0;
    const float w = mag;
    c2[b] = -dd / (mag + 1e-12f) * w;
    s2[b] = -2 * gxy[b] / (mag + 1e-12f) * w;
  }
  __syncthreads();
  CtaBlurGrid(c2, c2, scratch, cols, rows, dev.g_angle, dev.r_angle);
  CtaBlurGrid(s2, s2, scratch, cols, rows, dev.g_angle, dev.r_angle);
  float* orientation = dev.arr(kOrientation, d);
  float* cos2 = dev.arr(kCos2, d);
  float* sin2 = dev.arr(kSin2, d);
  for (int b = threadIdx.x; b < nb; b += blockDim.x) {
    float t = 0.5f * Atan2F(s2[b], c2[b]);
    if (t < 0) t += kPi;
    orientation[b] = t;
    cos2[b] = CosF(2 * t);  // RidgeField::OrientationAt's per-block terms
    sin2[b] = SinF(2 * t);
  }
  // Contrast: the std of a 3x3-block window.
  const float* sum = dev.arr(kSum, d);
  const float* sum2 = dev.arr(kSum2, d);
  const float* count = dev.arr(kCount, d);
  float* contrast = dev.arr(kContrast, d);
  for (int b = threadIdx.x; b < nb; b += blockDim.x) {
    const int bx = b % cols, by = b / cols;
    float s = 0, s2w = 0, n = 0;
    for (int dy = -1; dy <= 1; ++dy) {
      for (int dx = -1; dx <= 1; ++dx) {
        const int xx = bx + dx, yy = by + dy;
        if (xx < 0 || yy < 0 || xx >= cols || yy >= rows) continue;
        const int j = yy * cols + xx;
        s += sum[j];
        s2w += sum2[j];
        n += count[j];
      }
    }
    const float mean = s / n;
    contrast[b] = sqrtf(fmaxf(0.0f, s2w / n - mean * mean));
  }
  __syncthreads();
  __shared__ float selected;
  const long long k90 = static_cast<long long>(0.9 * static_cast<double>(nb - 1));
  const float p90 = CtaSelect(contrast, nullptr, nb, k90, &selected);
  uint8_t* fg = dev.mask + d.block_offset;
  uint8_t* ma = dev.mask + dev.total_blocks + d.block_offset;
  uint8_t* mb = dev.mask + 2 * dev.total_blocks + d.block_offset;
  for (int b = threadIdx.x; b < nb; b += blockDim.x) ma[b] = contrast[b] > dev.contrast_share * p90;
  __syncthreads();
  CtaMorph(ma, mb, cols, rows, true);  // close
  CtaMorph(mb, ma, cols, rows, false);
  CtaMorph(ma, mb, cols, rows, false);  // open
  CtaMorph(mb, ma, cols, rows, true);
  // LargestComponentFilled: 4-connected labels = the component's smallest
  // index (the reference's scan meets components in that order), sizes, the
  // largest (ties: the first), holes filled from the border.
  int* label = dev.label + d.block_offset;
  int* size = dev.comp_size + d.block_offset;
  for (int b = threadIdx.x; b < nb; b += blockDim.x) {
    label[b] = ma[b] ? b : INT_MAX;
    size[b] = 0;
  }
  if (threadIdx.x == 0) dev.best[img] = 0;
  __syncthreads();
  for (;;) {
    int changed = 0;
    for (int b = threadIdx.x; b < nb; b += blockDim.x) {
      if (!ma[b]) continue;
      const int x = b % cols, y = b / cols;
      int l = label[b];
      if (x > 0 && ma[b - 1]) l = min(l, label[b - 1]);
      if (x < cols - 1 && ma[b + 1]) l = min(l, label[b + 1]);
      if (y > 0 && ma[b - cols]) l = min(l, label[b - cols]);
      if (y < rows - 1 && ma[b + cols]) l = min(l, label[b + cols]);
      if (l < label[b]) {
        label[b] = l;
        changed = 1;
      }
    }
    if (!__syncthreads_or(changed)) break;
  }
  for (int b = threadIdx.x; b < nb; b += blockDim.x) {
    if (ma[b]) atomicAdd(&size[label[b]], 1);  // integer counts
  }
  __syncthreads();
  for (int b = threadIdx.x; b < nb; b += blockDim.x) {
    if (ma[b] && label[b] == b) {
      const unsigned long long key =
          (static_cast<unsigned long long>(size[b]) << 32) | (0xffffffffull - static_cast<unsigned>(b));
      atomicMax(&dev.best[img], key);  // a max: any order gives the same
    }
  }
  __syncthreads();
  const unsigned long long best = dev.best[img];
  const int best_root = best == 0 ? -1 : static_cast<int>(0xffffffffull - (best & 0xffffffffull));
  // mb: the component; fg: outside (flooded from the border), then its complement.
  for (int b = threadIdx.x; b < nb; b += blockDim.x) {
    mb[b] = best_root >= 0 && ma[b] && label[b] == best_root;
    const int x = b % cols, y = b / cols;
    fg[b] = (x == 0 || y == 0 || x == cols - 1 || y == rows - 1) && !mb[b];
  }
  __syncthreads();
  for (;;) {
    int changed = 0;
    for (int b = threadIdx.x; b < nb; b += blockDim.x) {
      if (mb[b] || fg[b]) continue;
      const int x = b % cols, y = b / cols;
      if ((x > 0 && fg[b - 1]) || (x < cols - 1 && fg[b + 1]) || (y > 0 && fg[b - cols]) ||
          (y < rows - 1 && fg[b + cols])) {
        fg[b] = 1;
        changed = 1;
      }
    }
    if (!__syncthreads_or(changed)) break;
  }
  for (int b = threadIdx.x; b < nb; b += blockDim.x) fg[b] = best_root >= 0 ? !fg[b] : 0;
}

// WavelengthAt for each foreground block.
__global__ void Wavelength(Dev dev) {
  const ImageDesc d = dev.desc[blockIdx.y];
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= d.cols * d.rows) return;
  float* wl = dev.arr(kWl, d);
  float* have = dev.arr(kHave, d);
  float* power_out = dev.arr(kRidgePower, d);
  wl[b] = 0;
  have[b] = 0;
  power_out[b] = 0;
  if (!dev.mask[d.block_offset + b]) return;
  const int bx = b % d.cols, by = b / d.cols;
  const float cx = (bx + 0.5f) * dev.block, cy = (by + 0.5f) * dev.block;
  const float theta = dev.arr(kOrientation, d)[b];
  const float* img = dev.smooth + d.pixel_offset;
  const int w = d.width, h = d.height;
  const float ux = CosF(theta), uy = SinF(theta);
  const float nx = -uy, ny = ux;
  float profile[kProfileLength];
  float mean = 0;
  for (int i = 0; i < kProfileLength; ++i) {
    const float t = i - (kProfileLength - 1) / 2.0f;
    float acc = 0;
    for (int j = 0; j < kProfileWidth; ++j) {
      const float s = j - (kProfileWidth - 1) / 2.0f;
      acc += Sample(img, w, h, cx + t * nx + s * ux, cy + t * ny + s * uy);
    }
    profile[i] = acc / kProfileWidth;
    mean += profile[i];
  }
  float energy = 0;
  float norm = kProfileLength;
  if (dev.taper == nullptr) {
    mean /= kProfileLength;
    for (int i = 0; i < kProfileLength; ++i) {
      profile[i] -= mean;
      energy += profile[i] * profile[i];
    }
  } else {  // RemoveLinearTrend, then the taper
    const float mid = (kProfileLength - 1) / 2.0f;
    float m = 0, slope_num = 0, slope_den = 0;
    for (int i = 0; i < kProfileLength; ++i) m += profile[i];
    m /= kProfileLength;
    for (int i = 0; i < kProfileLength; ++i) {
      slope_num += (i - mid) * (profile[i] - m);
      slope_den += (i - mid) * (i - mid);
    }
    const float slope = slope_num / slope_den;
    for (int i = 0; i < kProfileLength; ++i) profile[i] -= m + slope * (i - mid);
    for (int i = 0; i < kProfileLength; ++i) {
      profile[i] *= dev.taper[i];
      energy += profile[i] * profile[i];
    }
    norm = dev.taper_norm;
  }
  if (energy <= 1e-6f) return;
  float best_power = 0, best_period = 0;
  for (int q = 0; q < dev.n_periods; ++q) {
    const float* cs = dev.pcos + q * kProfileLength;
    const float* sn = dev.psin + q * kProfileLength;
    float c = 0, s = 0;
    for (int i = 0; i < kProfileLength; ++i) {
      c += profile[i] * cs[i];
      s += profile[i] * sn[i];
    }
    const float power = (c * c + s * s) / (energy * norm);
    if (power > best_power) best_power = power, best_period = dev.periods[q];
  }
  power_out[b] = best_power;
  if (best_power < 0.15f) return;
  if (best_period > 0) wl[b] = best_period, have[b] = 1;
}

__global__ void __launch_bounds__(kGridThreads) WavelengthGrid(Dev dev) {
  const ImageDesc d = dev.desc[blockIdx.x];
  const int nb = d.cols * d.rows;
  float* wl = dev.arr(kWl, d);
  float* have = dev.arr(kHave, d);
  __shared__ int valid;
  __shared__ float selected;
  if (threadIdx.x == 0) valid = 0;
  __syncthreads();
  int mine = 0;
  for (int b = threadIdx.x; b < nb; b += blockDim.x) mine += have[b] > 0;
  atomicAdd(&valid, mine);  // integer
  __syncthreads();
  float median = dev.default_wl;
  if (valid > 0) median = CtaSelect(wl, have, nb, valid / 2, &selected);
  // ridge_field.cc RejectWavelengthOutliers: far from the median is noise.
  for (int b = threadIdx.x; b < nb; b += blockDim.x) {
    if (have[b] > 0 && (wl[b] * dev.wl_spread < median || wl[b] > median * dev.wl_spread)) wl[b] = 0, have[b] = 0;
  }
  __syncthreads();
  // wsum = wl (0 where none), wcnt = have; both blurred in place.
  float* scratch = dev.arr(kScratch, d);
  CtaBlurGrid(wl, wl, scratch, d.cols, d.rows, dev.g_wl, dev.r_wl);
  CtaBlurGrid(have, have, scratch, d.cols, d.rows, dev.g_wl, dev.r_wl);
  float* out = dev.arr(kWavelength, d);
  for (int b = threadIdx.x; b < nb; b += blockDim.x) {
    float v = have[b] > 0.05f ? wl[b] / have[b] : median;
    out[b] = fminf(fmaxf(v, dev.min_wl), dev.max_wl);
  }
}

// ---- GaborEnhance + BinarizeRidges ----------------------------------------

__global__ void Gabor(Dev dev) {
  const ImageDesc d = dev.desc[blockIdx.y];
  const int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= static_cast<int64_t>(d.width) * d.height) return;
  const int w = d.width, h = d.height, B = dev.block;
  const int x = static_cast<int>(p % w), y = static_cast<int>(p / w);
  const int b = ClampI(y / B, 0, d.rows - 1) * d.cols + ClampI(x / B, 0, d.cols - 1);
  if (!dev.mask[d.block_offset + b]) {
    dev.enhanced[d.pixel_offset + p] = 0;
    dev.skeleton[d.pixel_offset + p] = 0;
    return;
  }
  // RidgeField::OrientationAt(x, y).
  const float* cos2 = dev.arr(kCos2, d);
  const float* sin2 = dev.arr(kSin2, d);
  const float gx = static_cast<float>(x) / B - 0.5f, gy = static_cast<float>(y) / B - 0.5f;
  const int x0 = static_cast<int>(floorf(gx)), y0 = static_cast<int>(floorf(gy));
  const float fx = gx - x0, fy = gy - y0;
  float c = 0, s = 0;
  for (int dy = 0; dy <= 1; ++dy) {
    for (int dx = 0; dx <= 1; ++dx) {
      const int bx = ClampI(x0 + dx, 0, d.cols - 1);
      const int by = ClampI(y0 + dy, 0, d.rows - 1);
      const float wt = (dx ? fx : 1 - fx) * (dy ? fy : 1 - fy);
      c += wt * cos2[by * d.cols + bx];
      s += wt * sin2[by * d.cols + bx];
    }
  }
  float theta = 0.5f * Atan2F(s, c);
  if (theta < 0) theta += kPi;
  const int kd = static_cast<int>(lroundf(theta / kPi * dev.directions) % dev.directions);
  int kw = static_cast<int>(lroundf((dev.arr(kWavelength, d)[b] - dev.gabor_min_wl) / dev.gabor_step));
  kw = ClampI(kw, 0, dev.gabor_wls - 1);
  const int r = dev.gabor_radius, side = 2 * r + 1;
  const float* k = dev.gabor + (static_cast<int64_t>(kd) * dev.gabor_wls + kw) * side * side;
  const float* img = dev.norm + d.pixel_offset;
  float acc = 0;
  if (y >= r && y < h - r && x >= r && x < w - r) {
    for (int dy = -r; dy <= r; ++dy) {
      const float* row = img + static_cast<int64_t>(y + dy) * w + (x - r);
      const float* kr = k + (dy + r) * side;
      for (int i = 0; i < side; ++i) acc += kr[i] * row[i];
    }
  } else {
    for (int dy = -r; dy <= r; ++dy) {
      for (int dx = -r; dx <= r; ++dx) acc += k[(dy + r) * side + dx + r] * Clamped(img, w, h, x + dx, y + dy);
    }
  }
  dev.enhanced[d.pixel_offset + p] = acc;
  dev.skeleton[d.pixel_offset + p] = acc < 0;
}

// ---- Thin -----------------------------------------------------------------

// Ring bits N, NE, E, SE, S, SW, W, NW of (x, y); a pixel counts as set when
// its value is 1 or `also` (a pixel marked for deletion in this sub-iteration).
__device__ __forceinline__ int RingBits(const uint8_t* b, int w, int x, int y, uint8_t also) {
  const uint8_t* up = b + static_cast<int64_t>(y - 1) * w + x;
  const uint8_t* mid = up + w;
  const uint8_t* dn = mid + w;
  const auto on = [also](uint8_t v) { return (v == 1 || v == also) ? 1 : 0; };
  return on(up[0]) | on(up[1]) << 1 | on(mid[1]) << 2 | on(dn[1]) << 3 | on(dn[0]) << 4 | on(dn[-1]) << 5 |
         on(mid[-1]) << 6 | on(up[-1]) << 7;
}

__global__ void __launch_bounds__(kThinThreads) Thin(Dev dev) {
  const ImageDesc d = dev.desc[blockIdx.x];
  const int w = d.width, h = d.height;
  uint8_t* b = dev.skeleton + d.pixel_offset;
  __shared__ uint8_t rules[3 * 256];
  for (int i = threadIdx.x; i < 3 * 256; i += blockDim.x) rules[i] = dev.rules[i];
  for (int x = threadIdx.x; x < w; x += blockDim.x) b[x] = b[static_cast<int64_t>(h - 1) * w + x] = 0;
  for (int y = threadIdx.x; y < h; y += blockDim.x) b[static_cast<int64_t>(y) * w] = b[static_cast<int64_t>(y) * w + w - 1] = 0;
  __syncthreads();
  const int inner_w = w - 2, inner = (w - 2) * (h - 2);
  for (;;) {
    int changed = 0;
    for (int pass = 0; pass < 2; ++pass) {
      // Mark (2) what this sub-iteration deletes, judged on the image before it.
      for (int i = threadIdx.x; i < inner; i += blockDim.x) {
        const int x = 1 + i % inner_w, y = 1 + i / inner_w;
        uint8_t* px = b + static_cast<int64_t>(y) * w + x;
        if (*px != 1) continue;
        if (rules[pass * 256 + RingBits(b, w, x, y, 2)]) {
          *px = 2;
          changed = 1;
        }
      }
      __syncthreads();
      for (int i = threadIdx.x; i < inner; i += blockDim.x) {
        uint8_t* px = b + static_cast<int64_t>(1 + i / inner_w) * w + 1 + i % inner_w;
        if (*px == 2) *px = 0;
      }
      __syncthreads();
    }
    if (!__syncthreads_or(changed)) break;
  }
  // The staircase sweep in raster order, as a wavefront.
  const int steps = (w - 2) + 2 * (h - 2) + 1;
  for (int t = 3; t < 3 + steps; ++t) {  // t = x + 2y, x >= 1, y >= 1
    for (int y = 1 + threadIdx.x; y < h - 1; y += blockDim.x) {
      const int x = t - 2 * y;
      if (x < 1 || x >= w - 1) continue;
      uint8_t* px = b + static_cast<int64_t>(y) * w + x;
      if (*px && rules[512 + RingBits(b, w, x, y, 1)]) *px = 0;
    }
    __syncthreads();
  }
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

// ---- The plan -------------------------------------------------------------

struct ExtractCudaPlan::Impl {
  int ordinal = 0;
  Stream stream = Stream::Cpu();
  int images = 0;          // capacity
  int64_t pixels = 0;
  int64_t blocks = 0;
  std::shared_ptr<Buffer> d_desc, d_gray, d_norm, d_tmp, d_smooth, d_enh, d_skel, d_sums, d_blocks, d_mask,
      d_label, d_size, d_best;
  std::shared_ptr<Buffer> h_gray, h_enh, h_skel, h_block_out, h_mask;  // pinned
  std::vector<float> tables_key;
  bool has_tables = false;
  Tables tables;
  std::shared_ptr<Buffer> d_tables, d_rules;

  absl::Status Reserve(int n, int64_t np, int64_t nb) {
    const auto dev = [&](std::shared_ptr<Buffer>& buf, size_t bytes) -> absl::Status {
      TESSERA_ASSIGN_OR_RETURN(buf, Buffer::Allocate(MemoryKind::kDevice, std::max<size_t>(bytes, 16), ordinal));
      return absl::OkStatus();
    };
    const auto pin = [&](std::shared_ptr<Buffer>& buf, size_t bytes) -> absl::Status {
      TESSERA_ASSIGN_OR_RETURN(buf, Buffer::Allocate(MemoryKind::kPinned, std::max<size_t>(bytes, 16), ordinal));
      return absl::OkStatus();
    };
    if (n > images) {
      images = std::max(n, images * 3 / 2);
      TESSERA_RETURN_IF_ERROR(dev(d_desc, images * sizeof(ImageDesc)));
      TESSERA_RETURN_IF_ERROR(dev(d_sums, images * 2 * sizeof(unsigned long long)));
      TESSERA_RETURN_IF_ERROR(dev(d_best, images * sizeof(unsigned long long)));
    }
    if (np > pixels) {
      pixels = std::max(np, pixels * 3 / 2);
      const size_t fbytes = pixels * sizeof(float);
      TESSERA_RETURN_IF_ERROR(dev(d_gray, pixels));
      TESSERA_RETURN_IF_ERROR(dev(d_norm, fbytes));
      TESSERA_RETURN_IF_ERROR(dev(d_tmp, fbytes));
      TESSERA_RETURN_IF_ERROR(dev(d_smooth, fbytes));
      TESSERA_RETURN_IF_ERROR(dev(d_enh, fbytes));
      TESSERA_RETURN_IF_ERROR(dev(d_skel, pixels));
      TESSERA_RETURN_IF_ERROR(pin(h_gray, pixels));
      TESSERA_RETURN_IF_ERROR(pin(h_enh, fbytes));
      TESSERA_RETURN_IF_ERROR(pin(h_skel, pixels));
    }
    if (nb > blocks) {
      blocks = std::max(nb, blocks * 3 / 2);
      TESSERA_RETURN_IF_ERROR(dev(d_blocks, kBlockArrays * blocks * sizeof(float)));
      TESSERA_RETURN_IF_ERROR(dev(d_mask, 3 * blocks));
      TESSERA_RETURN_IF_ERROR(dev(d_label, blocks * sizeof(int)));
      TESSERA_RETURN_IF_ERROR(dev(d_size, blocks * sizeof(int)));
      TESSERA_RETURN_IF_ERROR(pin(h_block_out, 5 * blocks * sizeof(float)));
      TESSERA_RETURN_IF_ERROR(pin(h_mask, blocks));
    }
    return absl::OkStatus();
  }
};

ExtractCudaPlan::ExtractCudaPlan(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ExtractCudaPlan::~ExtractCudaPlan() = default;

absl::StatusOr<std::unique_ptr<ExtractCudaPlan>> ExtractCudaPlan::Create(int ordinal, int images, int64_t pixels) {
  if (!DeviceRegistry::Get().cuda_available()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no GPU for the CUDA extractor: ", DeviceRegistry::Get().cuda_unavailable_reason()));
  }
  auto impl = std::make_unique<Impl>();
  impl->ordinal = ordinal;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal));
  TESSERA_ASSIGN_OR_RETURN(impl->stream, Stream::Create(Backend::kCuda, ordinal));
  if (images > 0 && pixels > 0) TESSERA_RETURN_IF_ERROR(impl->Reserve(images, pixels, pixels / 32 + images * 64));
  return std::unique_ptr<ExtractCudaPlan>(new ExtractCudaPlan(std::move(impl)));
}

namespace extract_cuda_internal {

absl::StatusOr<DenseResults> RunDense(ExtractCudaPlan::Impl& plan, const std::vector<GrayImage>& images,
                                      const std::vector<ImageDesc>& desc, const std::vector<float>& tables_key,
                                      const std::function<Tables()>& make_tables, bool return_enhanced) {
  const int n = static_cast<int>(desc.size());
  DenseResults out;
  if (n == 0) return out;
  const int64_t np = desc.back().pixel_offset + static_cast<int64_t>(desc.back().width) * desc.back().height;
  const int64_t nb = desc.back().block_offset + static_cast<int64_t>(desc.back().cols) * desc.back().rows;
  int64_t max_pixels = 0, max_blocks = 0;
  for (const ImageDesc& d : desc) {
    max_pixels = std::max<int64_t>(max_pixels, static_cast<int64_t>(d.width) * d.height);
    max_blocks = std::max<int64_t>(max_blocks, static_cast<int64_t>(d.cols) * d.rows);
  }
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(plan.ordinal));
  TESSERA_RETURN_IF_ERROR(plan.Reserve(n, np, nb));
  cudaStream_t stream = static_cast<cudaStream_t>(plan.stream.native());

  if (!plan.has_tables || plan.tables_key != tables_key) {
    plan.tables = make_tables();
    const Tables& t = plan.tables;
    std::vector<float> all;
    for (const std::vector<float>* v : {&t.gauss_pixel, &t.gauss_tensor, &t.gauss_angle, &t.gauss_wavelength,
                                        &t.gabor_taps, &t.periods, &t.period_cos, &t.period_sin,
                                        &t.profile_taper}) {
      all.insert(all.end(), v->begin(), v->end());
    }
    TESSERA_ASSIGN_OR_RETURN(plan.d_tables, UploadVector(all, plan.stream));
    TESSERA_ASSIGN_OR_RETURN(plan.d_rules, UploadVector(t.thin_rules, plan.stream));
    TESSERA_RETURN_IF_ERROR(plan.stream.Synchronize());  // the host vectors go away
    plan.tables_key = tables_key;
    plan.has_tables = true;
  }
  const Tables& t = plan.tables;

  Dev dev{};
  dev.desc = static_cast<const ImageDesc*>(plan.d_desc->data());
  dev.n = n;
  dev.gray = static_cast<const uint8_t*>(plan.d_gray->data());
  dev.norm = static_cast<float*>(plan.d_norm->data());
  dev.tmp = static_cast<float*>(plan.d_tmp->data());
  dev.smooth = static_cast<float*>(plan.d_smooth->data());
  dev.enhanced = static_cast<float*>(plan.d_enh->data());
  dev.skeleton = static_cast<uint8_t*>(plan.d_skel->data());
  dev.sums = static_cast<unsigned long long*>(plan.d_sums->data());
  dev.blocks = static_cast<float*>(plan.d_blocks->data());
  dev.total_blocks = plan.blocks;
  dev.mask = static_cast<uint8_t*>(plan.d_mask->data());
  dev.label = static_cast<int*>(plan.d_label->data());
  dev.comp_size = static_cast<int*>(plan.d_size->data());
  dev.best = static_cast<unsigned long long*>(plan.d_best->data());
  const float* tab = static_cast<const float*>(plan.d_tables->data());
  const auto take = [&tab](const std::vector<float>& v) {
    const float* p = tab;
    tab += v.size();
    return p;
  };
  dev.g_pixel = take(t.gauss_pixel);
  dev.g_tensor = take(t.gauss_tensor);
  dev.g_angle = take(t.gauss_angle);
  dev.g_wl = take(t.gauss_wavelength);
  dev.gabor = take(t.gabor_taps);
  dev.periods = take(t.periods);
  dev.pcos = take(t.period_cos);
  dev.psin = take(t.period_sin);
  dev.taper = t.profile_taper.empty() ? nullptr : take(t.profile_taper);
  dev.taper_norm = t.taper_norm;
  dev.r_pixel = static_cast<int>(t.gauss_pixel.size() / 2);
  dev.r_tensor = static_cast<int>(t.gauss_tensor.size() / 2);
  dev.r_angle = static_cast<int>(t.gauss_angle.size() / 2);
  dev.r_wl = static_cast<int>(t.gauss_wavelength.size() / 2);
  dev.directions = t.gabor_directions;
  dev.gabor_wls = t.gabor_wavelengths;
  dev.gabor_radius = t.gabor_radius;
  dev.gabor_min_wl = t.gabor_min_wavelength;
  dev.gabor_step = t.gabor_step;
  dev.n_periods = static_cast<int>(t.periods.size());
  dev.rules = static_cast<const uint8_t*>(plan.d_rules->data());
  dev.block = t.block;
  dev.contrast_share = t.contrast_share;
  dev.min_wl = t.min_wavelength;
  dev.max_wl = t.max_wavelength;
  dev.default_wl = t.default_wavelength;
  dev.wl_spread = t.wavelength_spread;

  // Upload: the pixels packed into pinned memory, then one copy.
  uint8_t* h_gray = static_cast<uint8_t*>(plan.h_gray->data());
  for (int i = 0; i < n; ++i) {
    std::memcpy(h_gray + desc[i].pixel_offset, images[i].pixels.data(), images[i].pixels.size());
  }
  TESSERA_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(plan.d_gray->data(), h_gray, np, cudaMemcpyHostToDevice, stream));
  TESSERA_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(plan.d_desc->data(), desc.data(), n * sizeof(ImageDesc), cudaMemcpyHostToDevice, stream));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(plan.d_sums->data(), 0, 2 * n * sizeof(unsigned long long), stream));

  const dim3 pixel_grid(static_cast<unsigned>(CeilDiv(max_pixels, kPixelThreads)), n);
  const dim3 block_grid(static_cast<unsigned>(CeilDiv(max_blocks, kBlockThreads)), n);
  const dim3 sum_grid(static_cast<unsigned>(CeilDiv(max_pixels, kPixelThreads * 16)), n);
  PixelSums<<<sum_grid, kPixelThreads, 0, stream>>>(dev);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("PixelSums");
  Normalize<<<pixel_grid, kPixelThreads, 0, stream>>>(dev);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("Normalize");
  Blur1D<1, 0><<<pixel_grid, kPixelThreads, 0, stream>>>(dev, dev.norm, dev.tmp);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("Blur1D rows");
  Blur1D<0, 1><<<pixel_grid, kPixelThreads, 0, stream>>>(dev, dev.tmp, dev.smooth);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("Blur1D columns");
  BlockTensor<<<block_grid, kBlockThreads, 0, stream>>>(dev);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("BlockTensor");
  FieldGrid<<<n, kGridThreads, 0, stream>>>(dev);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("FieldGrid");
  Wavelength<<<block_grid, kBlockThreads, 0, stream>>>(dev);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("Wavelength");
  WavelengthGrid<<<n, kGridThreads, 0, stream>>>(dev);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("WavelengthGrid");
  Gabor<<<pixel_grid, kPixelThreads, 0, stream>>>(dev);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("Gabor");
  Thin<<<n, kThinThreads, 0, stream>>>(dev);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("Thin");

  // Download.
  float* h_blocks = static_cast<float*>(plan.h_block_out->data());
  const int from[5] = {kOrientation, kCoherence, kContrast, kWavelength, kRidgePower};
  for (int a = 0; a < 5; ++a) {
    TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(h_blocks + a * nb, dev.blocks + from[a] * plan.blocks,
                                                 nb * sizeof(float), cudaMemcpyDeviceToHost, stream));
  }
  TESSERA_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(plan.h_mask->data(), dev.mask, nb, cudaMemcpyDeviceToHost, stream));
  TESSERA_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(plan.h_skel->data(), dev.skeleton, np, cudaMemcpyDeviceToHost, stream));
  if (return_enhanced) {
    TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(plan.h_enh->data(), dev.enhanced, np * sizeof(float),
                                                 cudaMemcpyDeviceToHost, stream));
  }
  TESSERA_RETURN_IF_ERROR(plan.stream.Synchronize());
  out.orientation = h_blocks;
  out.coherence = h_blocks + nb;
  out.contrast = h_blocks + 2 * nb;
  out.wavelength = h_blocks + 3 * nb;
  out.ridge_power = h_blocks + 4 * nb;
  out.foreground = static_cast<const uint8_t*>(plan.h_mask->data());
  out.skeleton = static_cast<const uint8_t*>(plan.h_skel->data());
  out.enhanced = return_enhanced ? static_cast<const float*>(plan.h_enh->data()) : nullptr;
  return out;
}

}  // namespace extract_cuda_internal
}  // namespace fingerprint
}  // namespace tessera

// Between extract_cuda.cc (host: checks, tables, the CPU part) and
// extract_cuda.cu (the plan's buffers and the kernels). Internal.
#ifndef TESSERA_SERVICES_FINGERPRINT_EXTRACT_EXTRACT_CUDA_IMPL_H_
#define TESSERA_SERVICES_FINGERPRINT_EXTRACT_EXTRACT_CUDA_IMPL_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "services/fingerprint/extract/extract_cuda.h"
#include "services/fingerprint/image/gray_image.h"

namespace tessera {
namespace fingerprint {
namespace extract_cuda_internal {

// One image of a batch: its pixels start at pixel_offset, its blocks
// (cols x rows, row-major) at block_offset.
struct ImageDesc {
  int width = 0;
  int height = 0;
  int cols = 0;
  int rows = 0;
  int64_t pixel_offset = 0;
  int64_t block_offset = 0;
};

constexpr int kProfileLength = 32;  // WavelengthAt's samples across the ridges
constexpr int kProfileWidth = 12;   // and along them

// Everything the kernels need from the options, computed on the host by the
// reference's own code.
struct Tables {
  int block = 8;
  float contrast_share = 0;
  float min_wavelength = 0;
  float max_wavelength = 0;
  float default_wavelength = 0;
  float wavelength_spread = 0;  // RidgeFieldOptions::wavelength_spread
  std::vector<float> gauss_pixel;       // GaussianKernel(1): the smoothed image
  std::vector<float> gauss_tensor;      // tensor_sigma_blocks
  std::vector<float> gauss_angle;       // angle_sigma_blocks
  std::vector<float> gauss_wavelength;  // 2 blocks
  int gabor_directions = 0;
  int gabor_wavelengths = 0;
  int gabor_radius = 0;
  float gabor_min_wavelength = 0;
  float gabor_step = 0;
  std::vector<float> gabor_taps;
  // The wavelength search: candidate periods and cos/sin(2 pi i / period),
  // [period][kProfileLength].
  std::vector<float> periods;
  std::vector<float> period_cos;
  std::vector<float> period_sin;
  // Empty: the profile loses its mean and the power is normalized by its
  // length. Else (the detrended, tapered variant of WavelengthAt): the
  // least-squares line is removed, the profile multiplied by these
  // kProfileLength weights, the power normalized by taper_norm.
  std::vector<float> profile_taper;
  float taper_norm = 0;
  std::vector<uint8_t> thin_rules;  // [ZS pass 0 | ZS pass 1 | staircase][256]
};

// The batch's results in the plan's pinned host memory, valid until its
// next batch; per-block arrays at ImageDesc::block_offset, per-pixel ones at
// pixel_offset.
struct DenseResults {
  const float* orientation = nullptr;
  const float* coherence = nullptr;
  const float* contrast = nullptr;
  const float* wavelength = nullptr;
  const float* ridge_power = nullptr;
  const uint8_t* foreground = nullptr;
  const float* enhanced = nullptr;  // null unless asked for
  const uint8_t* skeleton = nullptr;
};

// Runs the dense stages of `images` (laid out by `desc`) on the plan's GPU.
// `tables_key` identifies the options; `make_tables` is called only when
// the plan holds no tables for that key.
absl::StatusOr<DenseResults> RunDense(ExtractCudaPlan::Impl& plan, const std::vector<GrayImage>& images,
                                      const std::vector<ImageDesc>& desc, const std::vector<float>& tables_key,
                                      const std::function<Tables()>& make_tables, bool return_enhanced);

}  // namespace extract_cuda_internal
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_EXTRACT_EXTRACT_CUDA_IMPL_H_

// The host side of the batched CUDA extractor (extract_cuda.h): checks, the
// batch layout, the tables the kernels use (built by the CPU reference's own
// functions), and the CPU part, MinutiaeFromSkeleton, on the host's threads.
#include "services/fingerprint/extract/extract_cuda.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status.h"
#include "services/fingerprint/extract/extract_cuda_impl.h"
#include "services/fingerprint/extract/float_image.h"
#include "services/fingerprint/extract/gabor_enhance.h"
#include "services/fingerprint/extract/skeleton.h"

namespace tessera {
namespace fingerprint {

using extract_cuda_internal::DenseResults;
using extract_cuda_internal::ImageDesc;
using extract_cuda_internal::kProfileLength;
using extract_cuda_internal::Tables;

namespace {

constexpr float kPi = 3.14159265358979f;  // ridge_field.cc's

// Whether ridge_field.cc's WavelengthAt detrends and Hann-tapers its profile
// (a change in progress there when this was written; the committed
// reference does not). Keep equal to the reference: parity depends on it.
constexpr bool kWavelengthTaper = false;

Tables MakeTables(const ExtractOptions& o) {
  Tables t;
  const RidgeFieldOptions& f = o.field;
  t.block = f.block;
  t.contrast_share = f.contrast_share;
  t.min_wavelength = f.min_wavelength;
  t.max_wavelength = f.max_wavelength;
  t.default_wavelength = f.default_wavelength;
  t.wavelength_spread = f.wavelength_spread;
  t.gauss_pixel = GaussianKernel(1.0f);
  t.gauss_tensor = GaussianKernel(f.tensor_sigma_blocks);
  t.gauss_angle = GaussianKernel(f.angle_sigma_blocks);
  t.gauss_wavelength = GaussianKernel(2.0f);
  GaborKernelBank bank = MakeGaborKernelBank(f, o.gabor);
  t.gabor_directions = bank.directions;
  t.gabor_wavelengths = bank.wavelengths;
  t.gabor_radius = bank.radius;
  t.gabor_min_wavelength = bank.min_wavelength;
  t.gabor_step = bank.step;
  t.gabor_taps = std::move(bank.taps);
  // ridge_field.cc WavelengthAt's candidate periods and its cosines.
  for (float period = f.min_wavelength; period <= f.max_wavelength + 1e-3f; period += 0.5f) {
    t.periods.push_back(period);
    for (int i = 0; i < kProfileLength; ++i) {
      const float a = 2 * kPi * i / period;
      t.period_cos.push_back(std::cos(a));
      t.period_sin.push_back(std::sin(a));
    }
  }
  if (kWavelengthTaper) {  // ridge_field.cc's Hann()
    float sum = 0, sum_sq = 0;
    for (int i = 0; i < kProfileLength; ++i) {
      t.profile_taper.push_back(0.5f - 0.5f * std::cos(2 * kPi * (i + 0.5f) / kProfileLength));
      sum += t.profile_taper[i];
      sum_sq += t.profile_taper[i] * t.profile_taper[i];
    }
    t.taper_norm = sum * sum / sum_sq;
  }
  t.thin_rules.resize(3 * 256);
  for (int bits = 0; bits < 256; ++bits) {
    t.thin_rules[bits] = ZhangSuenDeletes(0, bits);
    t.thin_rules[256 + bits] = ZhangSuenDeletes(1, bits);
    t.thin_rules[512 + bits] = StaircaseRedundant(bits);
  }
  return t;
}

std::vector<float> TablesKey(const ExtractOptions& o) {
  const RidgeFieldOptions& f = o.field;
  const GaborOptions& g = o.gabor;
  return {static_cast<float>(f.block), f.tensor_sigma_blocks, f.angle_sigma_blocks, f.contrast_share,
          f.min_wavelength, f.max_wavelength, f.default_wavelength, f.wavelength_spread, static_cast<float>(g.directions),
          g.wavelength_step, static_cast<float>(g.radius), g.sigma_across, g.sigma_along};
}

// The dense results of image i as an Extraction (view empty).
Extraction TakeDense(const DenseResults& r, const ImageDesc& d, int block) {
  Extraction e;
  RidgeField& f = e.field;
  f.block = block;
  f.cols = d.cols;
  f.rows = d.rows;
  const size_t nb = static_cast<size_t>(d.cols) * d.rows, np = static_cast<size_t>(d.width) * d.height;
  const auto blocks = [&](const float* a) { return std::vector<float>(a + d.block_offset, a + d.block_offset + nb); };
  f.orientation = blocks(r.orientation);
  f.coherence = blocks(r.coherence);
  f.contrast = blocks(r.contrast);
  f.wavelength = blocks(r.wavelength);
  f.ridge_power = blocks(r.ridge_power);
  f.foreground.assign(r.foreground + d.block_offset, r.foreground + d.block_offset + nb);
  e.enhanced.width = d.width;
  e.enhanced.height = d.height;
  if (r.enhanced != nullptr) e.enhanced.v.assign(r.enhanced + d.pixel_offset, r.enhanced + d.pixel_offset + np);
  e.skeleton.assign(r.skeleton + d.pixel_offset, r.skeleton + d.pixel_offset + np);
  return e;
}

absl::StatusOr<std::vector<Extraction>> RunBatch(const std::vector<GrayImage>& images, const ExtractOptions& o,
                                                 ExtractCudaPlan& plan, const ExtractBatchSettings& settings,
                                                 bool minutiae) {
  if (o.field.block < 1) return absl::InvalidArgumentError("the ridge field's block must be at least 1 pixel");
  std::vector<ImageDesc> desc(images.size());
  int64_t pixels = 0, blocks = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    if (absl::Status s = CheckExtractable(images[i]); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("image ", i, " of the batch: ", s.message()));
    }
    ImageDesc& d = desc[i];
    d.width = images[i].width;
    d.height = images[i].height;
    d.cols = (d.width + o.field.block - 1) / o.field.block;
    d.rows = (d.height + o.field.block - 1) / o.field.block;
    d.pixel_offset = pixels;
    d.block_offset = blocks;
    pixels += static_cast<int64_t>(d.width) * d.height;
    blocks += static_cast<int64_t>(d.cols) * d.rows;
  }
  std::vector<Extraction> out(images.size());
  if (images.empty()) return out;
  TESSERA_ASSIGN_OR_RETURN(
      const DenseResults r,
      extract_cuda_internal::RunDense(plan.impl(), images, desc, TablesKey(o), [&o] { return MakeTables(o); },
                                      settings.return_enhanced));
  ParallelForDynamic(static_cast<int64_t>(images.size()), 4, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      out[i] = TakeDense(r, desc[i], o.field.block);
      if (minutiae) MinutiaeFromSkeleton(o, out[i]);
    }
  });
  return out;
}

}  // namespace

#if !TESSERA_WITH_CUDA
struct ExtractCudaPlan::Impl {};
ExtractCudaPlan::ExtractCudaPlan(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ExtractCudaPlan::~ExtractCudaPlan() = default;
absl::StatusOr<std::unique_ptr<ExtractCudaPlan>> ExtractCudaPlan::Create(int, int, int64_t) {
  return absl::FailedPreconditionError("this build has no CUDA: the CUDA extractor is not available");
}
namespace extract_cuda_internal {
absl::StatusOr<DenseResults> RunDense(ExtractCudaPlan::Impl&, const std::vector<GrayImage>&,
                                      const std::vector<ImageDesc>&, const std::vector<float>&,
                                      const std::function<Tables()>&, bool) {
  return absl::FailedPreconditionError("this build has no CUDA: the CUDA extractor is not available");
}
}  // namespace extract_cuda_internal
#endif

absl::StatusOr<std::vector<Extraction>> ExtractDenseBatchCuda(const std::vector<GrayImage>& images,
                                                              const ExtractOptions& options, ExtractCudaPlan& plan,
                                                              const ExtractBatchSettings& settings) {
  return RunBatch(images, options, plan, settings, /*minutiae=*/false);
}

absl::StatusOr<std::vector<Extraction>> ExtractMinutiaeBatchCuda(const std::vector<GrayImage>& images,
                                                                 const ExtractOptions& options, ExtractCudaPlan& plan,
                                                                 const ExtractBatchSettings& settings) {
  return RunBatch(images, options, plan, settings, /*minutiae=*/true);
}

}  // namespace fingerprint
}  // namespace tessera

// The extractor (extractor.h) on a GPU, for batches of images: the dense,
// per-pixel stages - normalization, ridge field, Gabor enhancement,
// binarization, thinning - run as CUDA kernels over the whole batch (images
// of any sizes, packed back to back at per-image offsets); the sparse part
// (minutiae from the skeleton, their filters, the template) is the CPU
// code's own MinutiaeFromSkeleton, run on the host's threads.
//
// Parity with the CPU reference (extract_cuda_test, bench
// fingerprint_extract_gpu_bench): the kernels evaluate the reference's float
// expressions in its order, unfused (nvcc -fmad=false), with its tables
// (Gaussian taps, Gabor bank, the wavelength search's cosines, the thinning
// rules) built by the reference's own host code; block sums run in the
// reference's pixel order, per-image sums are integer, selections (the 90th
// percentile of contrast, the median wavelength) are by rank, the
// staircase sweep - sequential in raster order on the CPU - runs as an exact
// wavefront. Only atan2, cos and sin of field angles differ: the device
// evaluates them in double and rounds (glibc's float versions are within an
// ulp of that), so an angle may differ by an ulp and, rarely, a pixel's
// Gabor kernel direction flips at a quantization boundary. No atomics-order
// dependent float sums: results are deterministic.
//
// A plan owns the device and pinned host buffers and is reused across
// batches (grown only when a batch is larger than any before); it is not
// thread-safe: one batch at a time per plan. Settings travel with the call.
#ifndef TESSERA_SERVICES_FINGERPRINT_EXTRACT_EXTRACT_CUDA_H_
#define TESSERA_SERVICES_FINGERPRINT_EXTRACT_EXTRACT_CUDA_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/fingerprint/extract/extractor.h"
#include "services/fingerprint/image/gray_image.h"

namespace tessera {
namespace fingerprint {

class ExtractCudaPlan {
 public:
  // A plan on GPU `ordinal` whose buffers hold `images` images of `pixels`
  // pixels in all (0: sized by the first batch). FAILED_PRECONDITION without
  // CUDA or without that GPU.
  static absl::StatusOr<std::unique_ptr<ExtractCudaPlan>> Create(int ordinal = 0, int images = 0,
                                                                 int64_t pixels = 0);
  ~ExtractCudaPlan();
  ExtractCudaPlan(const ExtractCudaPlan&) = delete;
  ExtractCudaPlan& operator=(const ExtractCudaPlan&) = delete;

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  explicit ExtractCudaPlan(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct ExtractBatchSettings {
  // Copy the Gabor response back into Extraction::enhanced (4 bytes a pixel
  // over PCIe); without it `enhanced` has the image's size and no values
  // (MinutiaeFromSkeleton reads only its size).
  bool return_enhanced = true;
};

// Everything ExtractMinutiae computes up to the skeleton, per image: field,
// enhanced (see ExtractBatchSettings), skeleton; `view` is left empty.
// Each image is checked as ExtractMinutiae checks it (CheckExtractable):
// the first bad one fails the batch with its index in the message.
absl::StatusOr<std::vector<Extraction>> ExtractDenseBatchCuda(const std::vector<GrayImage>& images,
                                                              const ExtractOptions& options, ExtractCudaPlan& plan,
                                                              const ExtractBatchSettings& settings = {});

// ExtractMinutiae for each image: ExtractDenseBatchCuda, then
// MinutiaeFromSkeleton on the host's threads (common/parallel.h: all of them,
// or TESSERA_CPU_THREADS).
absl::StatusOr<std::vector<Extraction>> ExtractMinutiaeBatchCuda(const std::vector<GrayImage>& images,
                                                                 const ExtractOptions& options, ExtractCudaPlan& plan,
                                                                 const ExtractBatchSettings& settings = {});

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_EXTRACT_EXTRACT_CUDA_H_

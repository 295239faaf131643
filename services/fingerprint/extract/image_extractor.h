// Many images to templates at once, as a service or a bulk CLI run needs:
// decoding, resampling and the final template on all cores, the extraction
// itself on the GPU when the extractor has one (extract_cuda.h, one batch at
// a time: concurrent callers take turns) or on all cores. Each image gets
// what TemplateFromImage (image_template.h) would give it, status included;
// on the GPU within the parity tolerances of extract_cuda.h.
#ifndef TESSERA_SERVICES_FINGERPRINT_EXTRACT_IMAGE_EXTRACTOR_H_
#define TESSERA_SERVICES_FINGERPRINT_EXTRACT_IMAGE_EXTRACTOR_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/fingerprint/extract/image_template.h"

namespace tessera {
namespace fingerprint {

class ExtractCudaPlan;

class ImageExtractor {
 public:
  // "cpu", "cuda" (FAILED_PRECONDITION without a usable GPU) or "auto" (the
  // GPU when there is one).
  static absl::StatusOr<std::unique_ptr<ImageExtractor>> Create(absl::string_view device,
                                                                const ExtractOptions& options = {});
  ~ImageExtractor();

  // One result per image, in order. `keep_enhanced`: fill
  // Extraction::enhanced (for overlays; costs a copy from the GPU).
  std::vector<absl::StatusOr<ImageTemplate>> ExtractAll(const std::vector<absl::string_view>& images,
                                                        const std::vector<ImageInput>& inputs,
                                                        TemplateFormat output = TemplateFormat::kIso19794,
                                                        bool keep_enhanced = false) const;
  // "cpu" or "cuda".
  std::string backend() const { return plan_ ? "cuda" : "cpu"; }

 private:
  ImageExtractor(ExtractOptions options, std::unique_ptr<ExtractCudaPlan> plan);

  const ExtractOptions options_;
  std::unique_ptr<ExtractCudaPlan> plan_;  // null: CPU
  mutable std::mutex plan_mu_;              // the plan runs one batch at a time
};

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_EXTRACT_IMAGE_EXTRACTOR_H_

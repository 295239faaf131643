#include "services/fingerprint/extract/image_extractor.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/device.h"
#include "common/parallel.h"
#include "common/status.h"
#include "services/fingerprint/extract/extract_cuda.h"

namespace tessera {
namespace fingerprint {
namespace {

// Images per GPU batch: bounds the plan's buffers (about 30 bytes a pixel:
// 256 plain impressions are under 1 GB) while keeping the GPU busy.
constexpr size_t kGpuBatch = 256;

}  // namespace

ImageExtractor::ImageExtractor(ExtractOptions options, std::unique_ptr<ExtractCudaPlan> plan)
    : options_(std::move(options)), plan_(std::move(plan)) {}

ImageExtractor::~ImageExtractor() = default;

absl::StatusOr<std::unique_ptr<ImageExtractor>> ImageExtractor::Create(absl::string_view device,
                                                                       const ExtractOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(Backend backend, ResolveBackend(device));
  std::unique_ptr<ExtractCudaPlan> plan;
  if (backend == Backend::kCuda) {
    TESSERA_ASSIGN_OR_RETURN(plan, ExtractCudaPlan::Create(0));
  }
  return std::unique_ptr<ImageExtractor>(new ImageExtractor(options, std::move(plan)));
}

std::vector<absl::StatusOr<ImageTemplate>> ImageExtractor::ExtractAll(const std::vector<absl::string_view>& images,
                                                                      const std::vector<ImageInput>& inputs,
                                                                      TemplateFormat output,
                                                                      bool keep_enhanced) const {
  const int64_t n = static_cast<int64_t>(images.size());
  std::vector<absl::StatusOr<ImageTemplate>> out(images.size(), absl::UnknownError("not extracted"));
  if (inputs.size() != images.size()) {
    for (auto& o : out) o = absl::InternalError("ExtractAll: one ImageInput per image");
    return out;
  }
  if (plan_ == nullptr) {
    ParallelForDynamic(n, 1, [&](int64_t begin, int64_t end, int) {
      for (int64_t i = begin; i < end; ++i) out[i] = TemplateFromImage(images[i], inputs[i], output, options_);
    });
    return out;
  }
  ParallelForDynamic(n, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) out[i] = DecodeForExtraction(images[i], inputs[i], output);
  });
  std::vector<size_t> ready;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].ok()) ready.push_back(i);
  }
  ExtractBatchSettings settings;
  settings.return_enhanced = keep_enhanced;
  for (size_t begin = 0; begin < ready.size(); begin += kGpuBatch) {
    const size_t end = std::min(ready.size(), begin + kGpuBatch);
    std::vector<GrayImage> batch;
    for (size_t j = begin; j < end; ++j) batch.push_back(std::move(out[ready[j]]->image));
    absl::StatusOr<std::vector<Extraction>> extracted;
    {
      std::lock_guard<std::mutex> lock(plan_mu_);
      extracted = ExtractMinutiaeBatchCuda(batch, options_, *plan_, settings);
    }
    for (size_t j = begin; j < end; ++j) {
      ImageTemplate& t = *out[ready[j]];
      t.image = std::move(batch[j - begin]);
      if (!extracted.ok()) {
        out[ready[j]] = extracted.status();  // the GPU failed: every image of the batch says so
        continue;
      }
      t.extraction = std::move((*extracted)[j - begin]);
    }
  }
  ParallelForDynamic(static_cast<int64_t>(ready.size()), 4, [&](int64_t begin, int64_t end, int) {
    for (int64_t j = begin; j < end; ++j) {
      absl::StatusOr<ImageTemplate>& t = out[ready[j]];
      if (!t.ok()) continue;
      absl::Status finished = FinishImageTemplate(inputs[ready[j]], *t);
      if (!finished.ok()) t = finished;
    }
  });
  return out;
}

}  // namespace fingerprint
}  // namespace tessera

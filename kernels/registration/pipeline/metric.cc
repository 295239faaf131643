#include "kernels/registration/pipeline/metric.h"

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/registration/pipeline/array_helpers.h"
#include "kernels/registration/lncc.h"
#include "kernels/registration/mse.h"
#include "kernels/registration/mutual_info.h"
#include "kernels/registration/workspace.h"

namespace tessera::registration {
namespace {

VoxelMask MaskOf(const NDArray* mask, int64_t count) {
  return mask != nullptr ? VoxelMask{mask->data<uint8_t>(), count} : VoxelMask{};
}


// MSE and LNCC write their loss into one float in stream memory.
class ScalarLossMetric : public SimilarityMetric {
 public:
  ScalarLossMetric(const Stream& stream, NDArray loss) : stream_(stream), loss_(std::move(loss)) {}

 protected:
  absl::StatusOr<double> ReadLoss() {
    float host = 0;
    TESSERA_RETURN_IF_ERROR(CopyBytes(&host, MemoryKind::kHost, loss_.raw_data(), loss_.memory_kind(), sizeof(float), stream_));
    return static_cast<double>(host);
  }
  const Stream& stream_;
  NDArray loss_;
};

class MseMetric final : public ScalarLossMetric {
 public:
  using ScalarLossMetric::ScalarLossMetric;
  absl::StatusOr<double> Evaluate(const NDArray& fixed, const NDArray& warped, NDArray* grad, const NDArray* mask,
                                  int64_t mask_count) override {
    TESSERA_RETURN_IF_ERROR(Mse(stream_, fixed.data<float>(), warped.data<float>(), DimsOf(fixed),
                                loss_.data<float>(), grad ? grad->data<float>() : nullptr, &workspace_,
                                MaskOf(mask, mask_count)));
    return ReadLoss();
  }
  std::string name() const override { return "mse"; }
  bool pointwise() const override { return true; }
  void ReleaseScratch() override { workspace_.Release(); }

 private:
  Workspace workspace_;
};

class LnccMetric final : public ScalarLossMetric {
 public:
  LnccMetric(const Stream& stream, NDArray loss, int window) : ScalarLossMetric(stream, std::move(loss)) {
    options_.window = window;
  }
  absl::StatusOr<double> Evaluate(const NDArray& fixed, const NDArray& warped, NDArray* grad, const NDArray* mask,
                                  int64_t mask_count) override {
    TESSERA_RETURN_IF_ERROR(Lncc(stream_, fixed.data<float>(), warped.data<float>(), DimsOf(fixed), options_,
                                 loss_.data<float>(), grad ? grad->data<float>() : nullptr, &lncc_workspace_,
                                 MaskOf(mask, mask_count)));
    return ReadLoss();
  }
  std::string name() const override { return "lncc"; }
  bool pointwise() const override { return false; }
  void ReleaseScratch() override { lncc_workspace_.Release(); }

 private:
  LnccOptions options_;
  // The reduction partials (CUDA) or, issue 38, the volumes and the level's
  // fixed box sums kept between iterations (CPU).
  LnccWorkspace lncc_workspace_;
};

class MiMetric final : public SimilarityMetric {
 public:
  MiMetric(const Stream& stream, const MetricOptions& options, std::shared_ptr<Buffer> scratch)
      : stream_(stream), options_(MattesMiOptionsFor(options)), scratch_(std::move(scratch)) {}
  absl::StatusOr<double> Evaluate(const NDArray& fixed, const NDArray& warped, NDArray* grad, const NDArray* mask,
                                  int64_t /*mask_count*/) override {
    TESSERA_ASSIGN_OR_RETURN(MattesMiResult r, MattesMutualInformation(fixed, warped, mask, options_, grad,
                                                                       stream_, scratch_.get()));
    return r.loss;
  }
  std::string name() const override { return "mi"; }
  bool pointwise() const override { return true; }

 private:
  const Stream& stream_;
  MattesMiOptions options_;
  std::shared_ptr<Buffer> scratch_;
};

}  // namespace

MattesMiOptions MattesMiOptionsFor(const MetricOptions& options) {
  MattesMiOptions mi;  // fixed and warped ranges [0, 1]: the normalised intensities
  mi.bins = options.mi_bins;
  mi.fixed_kernel = options.mi_fixed_box ? ParzenKernel::kBox : ParzenKernel::kCubicBSpline;
  return mi;
}

absl::StatusOr<std::unique_ptr<SimilarityMetric>> SimilarityMetric::Create(Metric metric,
                                                                          const MetricOptions& options,
                                                                          const Stream& stream) {
  if (metric == Metric::kMi) {
    std::shared_ptr<Buffer> scratch;
    if (stream.backend() == Backend::kCuda) {
      TESSERA_ASSIGN_OR_RETURN(size_t bytes, MattesMiScratchBytes(options.mi_bins, stream.ordinal()));
      TESSERA_ASSIGN_OR_RETURN(scratch, Buffer::Allocate(MemoryKind::kDevice, bytes, stream.ordinal()));
    }
    return std::unique_ptr<SimilarityMetric>(new MiMetric(stream, options, std::move(scratch)));
  }
  if (metric == Metric::kLncc && (options.lncc_window < 1 || options.lncc_window % 2 == 0)) {
    return absl::InvalidArgumentError(absl::StrCat("LNCC window must be odd and positive, got ", options.lncc_window));
  }
  TESSERA_ASSIGN_OR_RETURN(NDArray loss, NDArray::Allocate({1}, DType::kFloat32, MemoryKindFor(stream), stream.ordinal()));
  if (metric == Metric::kMse) return std::unique_ptr<SimilarityMetric>(new MseMetric(stream, std::move(loss)));
  return std::unique_ptr<SimilarityMetric>(new LnccMetric(stream, std::move(loss), options.lncc_window));
}

}  // namespace tessera::registration

// Without CUDA the unfused baselines do not exist: stubs that say so.
#include "kernels/registration/unfused.h"

#if !TESSERA_WITH_CUDA

namespace tessera {
namespace registration {
namespace unfused {
namespace {
absl::Status NoCuda() { return absl::FailedPreconditionError("unfused baselines need a CUDA build"); }
}  // namespace

struct UnfusedSampler::Impl {};
struct UnfusedLncc::Impl {};

UnfusedSampler::UnfusedSampler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UnfusedSampler::~UnfusedSampler() = default;
absl::StatusOr<std::unique_ptr<UnfusedSampler>> UnfusedSampler::Create(const Stream&, Dims3, bool) {
  return NoCuda();
}
absl::Status UnfusedSampler::Forward(const GridSampleArgs&, float*) { return NoCuda(); }
absl::Status UnfusedSampler::Backward(const GridSampleArgs&, const float*, float*) { return NoCuda(); }
const float* UnfusedSampler::grad_grid() const { return nullptr; }
size_t UnfusedSampler::device_bytes() const { return 0; }

UnfusedLncc::UnfusedLncc(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UnfusedLncc::~UnfusedLncc() = default;
absl::StatusOr<std::unique_ptr<UnfusedLncc>> UnfusedLncc::Create(const Stream&, Dims3, int, bool) { return NoCuda(); }
absl::Status UnfusedLncc::Run(const float*, const float*, double, float*, float*) { return NoCuda(); }
size_t UnfusedLncc::device_bytes() const { return 0; }

absl::Status FillUniform(const Stream&, float*, int64_t, uint32_t, float, float) { return NoCuda(); }

}  // namespace unfused
}  // namespace registration
}  // namespace tessera

#endif  // !TESSERA_WITH_CUDA

#include "common/device_warmup.h"

#include <string>

#include "common/device.h"

namespace tessera {

DeviceWarmUp::DeviceWarmUp(absl::string_view requested, int ordinal) {
  if (requested == "cpu") return;
  thread_ = std::thread([device = std::string(requested), ordinal] {
    const absl::StatusOr<Backend> backend = ResolveBackend(device);
    // Creating a stream makes the device current, which creates its primary
    // context (CUDA 12+); the stream itself is dropped.
    if (backend.ok() && *backend == Backend::kCuda) (void)Stream::Create(Backend::kCuda, ordinal);
  });
}

DeviceWarmUp::~DeviceWarmUp() {
  if (thread_.joinable()) thread_.join();
}

}  // namespace tessera

#include "common/device_warm_up.h"

#include "common/device.h"

#if TESSERA_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace tessera {

BackgroundDeviceWarmUp::BackgroundDeviceWarmUp(const std::string& device, int ordinal) {
  if (device == "cpu") return;
  thread_ = std::thread([ordinal] {
    // The registry's probe initialises the driver (thread-safe, once per process).
    const DeviceRegistry& registry = DeviceRegistry::Get();
    if (!registry.cuda_available() || ordinal < 0 || ordinal >= static_cast<int>(registry.gpus().size())) return;
#if TESSERA_WITH_CUDA
    // cudaSetDevice makes the primary context (CUDA >= 12); it and cudaFree(0)
    // only touch this thread's current device. Errors are left to the work.
    if (cudaSetDevice(ordinal) == cudaSuccess) cudaFree(nullptr);
    cudaGetLastError();
#endif
  });
}

BackgroundDeviceWarmUp::~BackgroundDeviceWarmUp() {
  if (thread_.joinable()) thread_.join();
}

}  // namespace tessera

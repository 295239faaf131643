#include <cstdio>

#include "common/device.h"
#include "cli/verbs.h"

namespace tessera::cli {

int RunDevices(int, char**) {
  const DeviceRegistry& registry = DeviceRegistry::Get();
  std::printf("default backend: %s\n", registry.cuda_available() ? "cuda" : "cpu");
  if (!registry.cuda_available()) std::printf("reason: %s\n", registry.cuda_unavailable_reason().c_str());
  for (const GpuInfo& g : registry.gpus()) {
    std::printf("gpu %d: %s, %.1f GiB, %d SMs, sm_%d%d\n", g.ordinal, g.name.c_str(),
                g.total_memory_bytes / 1073741824.0, g.multiprocessors, g.compute_major, g.compute_minor);
  }
  return 0;
}

}  // namespace tessera::cli

// Starts the CUDA driver and a GPU's primary context on a thread of its own,
// so that a command reads its inputs meanwhile: a cold process otherwise
// spends a tenth of a second or more there before its first kernel (issue
// 37's whole-command budget). In a long-running service the context already
// exists and this costs one short thread.
#ifndef TESSERA_COMMON_DEVICE_WARMUP_H_
#define TESSERA_COMMON_DEVICE_WARMUP_H_

#include <thread>

#include "absl/strings/string_view.h"

namespace tessera {

class DeviceWarmUp {
 public:
  // `requested`: a device name as ResolveBackend takes it; "cpu" starts
  // nothing (it never probes CUDA). Errors are not reported here: the run
  // that follows resolves the device itself and reports them.
  DeviceWarmUp(absl::string_view requested, int ordinal);
  ~DeviceWarmUp();  // waits for the thread
  DeviceWarmUp(const DeviceWarmUp&) = delete;
  DeviceWarmUp& operator=(const DeviceWarmUp&) = delete;

 private:
  std::thread thread_;
};

}  // namespace tessera

#endif  // TESSERA_COMMON_DEVICE_WARMUP_H_

// Starts the CUDA driver and a GPU's primary context on a background thread,
// so a command that will compute on the GPU overlaps that one-time cost (0.1 to
// 0.3 s on an H100: the driver's initialisation, then the context) with its own
// start-up work, such as reading and decoding its input files. Work that later
// touches the GPU on any thread finds the context made (the primary context is
// per process) or waits for it inside the driver, as it would have anyway.
#ifndef TESSERA_COMMON_DEVICE_WARM_UP_H_
#define TESSERA_COMMON_DEVICE_WARM_UP_H_

#include <string>
#include <thread>

namespace tessera {

class BackgroundDeviceWarmUp {
 public:
  // `device` as the command's --device: "cpu" starts nothing (a CPU run on a
  // GPU host must not pay the driver's start); "auto", "cuda" or "" warm up
  // GPU `ordinal` when one is present. Never fails: a missing GPU is found and
  // reported by the work itself.
  explicit BackgroundDeviceWarmUp(const std::string& device, int ordinal = 0);
  // Joins the thread (the warm-up ends by itself; nothing is cancelled).
  ~BackgroundDeviceWarmUp();
  BackgroundDeviceWarmUp(const BackgroundDeviceWarmUp&) = delete;
  BackgroundDeviceWarmUp& operator=(const BackgroundDeviceWarmUp&) = delete;

  bool started() const { return thread_.joinable(); }

 private:
  std::thread thread_;
};

}  // namespace tessera

#endif  // TESSERA_COMMON_DEVICE_WARM_UP_H_

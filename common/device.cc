#include "common/device.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"

#if TESSERA_WITH_CUDA
#include <cuda_runtime_api.h>

#include "common/cuda_check.h"
#endif

namespace tessera {

absl::string_view BackendName(Backend backend) { return backend == Backend::kCuda ? "cuda" : "cpu"; }

DeviceRegistry::DeviceRegistry() {
#if TESSERA_WITH_CUDA
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    // No driver, no device, or a driver older than the runtime: all mean CPU.
    reason_ = absl::StrCat("CUDA unavailable: ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
    cudaGetLastError();  // clear the sticky error so later CUDA calls are not confused
  } else if (count == 0) {
    reason_ = "CUDA unavailable: no GPU found";
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    GpuInfo info;
    info.ordinal = i;
    info.name = prop.name;
    info.total_memory_bytes = prop.totalGlobalMem;
    info.multiprocessors = prop.multiProcessorCount;
    info.compute_major = prop.major;
    info.compute_minor = prop.minor;
    gpus_.push_back(info);
  }
#else
  reason_ = "CUDA unavailable: this build has no CUDA support (no toolkit at build time)";
#endif
  if (gpus_.empty()) {
    TESSERA_LOG(INFO) << "using the CPU backend; " << reason_;
  } else {
    TESSERA_LOG(INFO) << "using the CUDA backend: " << Describe();
  }
}

const DeviceRegistry& DeviceRegistry::Get() {
  static const DeviceRegistry* registry = new DeviceRegistry();
  return *registry;
}

std::string DeviceRegistry::Describe() const {
  if (gpus_.empty()) return absl::StrCat("cpu (", reason_, ")");
  std::string out = "cuda (";
  for (size_t i = 0; i < gpus_.size(); ++i) {
    absl::StrAppendFormat(&out, "%s%d: %s, %.0f GiB, sm_%d%d", i ? "; " : "", gpus_[i].ordinal, gpus_[i].name,
                          gpus_[i].total_memory_bytes / 1073741824.0, gpus_[i].compute_major,
                          gpus_[i].compute_minor);
  }
  return out + ")";
}

absl::Status CheckDeviceName(absl::string_view name, absl::string_view field) {
  if (name == "auto" || name == "cpu" || name == "cuda") return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, " '", name, "' is not one of auto, cpu, cuda"));
}

absl::StatusOr<Backend> ResolveBackend(absl::string_view requested) {
  // "cpu" never probes CUDA: on a GPU host that would initialise the driver
  // (a tenth of a second or more) for a run that does not use it.
  if (requested == "cpu") return Backend::kCpu;
  const DeviceRegistry& registry = DeviceRegistry::Get();
  if (requested == "auto" || requested.empty()) {
    return registry.cuda_available() ? Backend::kCuda : Backend::kCpu;
  }
  if (requested == "cuda" || requested == "gpu") {
    if (!registry.cuda_available()) {
      return absl::FailedPreconditionError(
          absl::StrCat("device 'cuda' requested but ", registry.cuda_unavailable_reason()));
    }
    return Backend::kCuda;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown device '", requested, "': expected auto, cpu or cuda"));
}

absl::StatusOr<GpuMemoryInfo> QueryGpuMemory(int ordinal) {
  const DeviceRegistry& registry = DeviceRegistry::Get();
#if TESSERA_WITH_CUDA
  if (ordinal < 0 || ordinal >= static_cast<int>(registry.gpus().size())) {
    return absl::FailedPreconditionError(absl::StrCat("no GPU with ordinal ", ordinal, "; ", registry.Describe()));
  }
  int previous = 0;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaGetDevice(&previous));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal));
  GpuMemoryInfo info;
  info.ordinal = ordinal;
  const absl::Status status = CudaStatus(cudaMemGetInfo(&info.free_bytes, &info.total_bytes), "cudaMemGetInfo");
  cudaSetDevice(previous);  // restore even when the query failed
  if (!status.ok()) return status;
  return info;
#else
  (void)ordinal;
  return absl::FailedPreconditionError(registry.cuda_unavailable_reason());
#endif
}

Stream Stream::Cpu() { return Stream(Backend::kCpu, 0, nullptr); }

absl::StatusOr<Stream> Stream::Create(Backend backend, int ordinal) {
  if (backend == Backend::kCpu) return Cpu();
#if TESSERA_WITH_CUDA
  const auto& gpus = DeviceRegistry::Get().gpus();
  if (ordinal < 0 || ordinal >= static_cast<int>(gpus.size())) {
    return absl::FailedPreconditionError(absl::StrCat("no GPU with ordinal ", ordinal, "; ",
                                                      DeviceRegistry::Get().Describe()));
  }
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal));
  cudaStream_t stream = nullptr;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return Stream(Backend::kCuda, ordinal, stream);
#else
  (void)ordinal;
  return absl::FailedPreconditionError(DeviceRegistry::Get().cuda_unavailable_reason());
#endif
}

Stream::Stream(Stream&& other) noexcept
    : backend_(other.backend_), ordinal_(other.ordinal_), native_(std::exchange(other.native_, nullptr)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    this->~Stream();
    backend_ = other.backend_;
    ordinal_ = other.ordinal_;
    native_ = std::exchange(other.native_, nullptr);
  }
  return *this;
}

Stream::~Stream() {
#if TESSERA_WITH_CUDA
  if (native_ != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(native_));
#endif
}

absl::Status Stream::Synchronize() const {
#if TESSERA_WITH_CUDA
  if (native_ != nullptr) {
    TESSERA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(static_cast<cudaStream_t>(native_)));
  }
#endif
  return absl::OkStatus();
}

}  // namespace tessera

#include "kernels/registration/sharded/sharded_internal.h"

#include "absl/strings/str_cat.h"

namespace tessera {
namespace parallel {
namespace sharded_internal {

absl::Status CheckLocal(const NDArray& a, const SlabLayout& layout, int components, const Stream& stream,
                        const char* what) {
  if (a.dtype() != DType::kFloat32) return absl::InvalidArgumentError(absl::StrCat(what, " must be float32"));
  if (a.shape() != layout.LocalShape(components)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has shape ", ShapeToString(a.shape()), ", ",
                                                   layout.ToString(), " needs ",
                                                   ShapeToString(layout.LocalShape(components))));
  }
  const bool device = a.memory_kind() == MemoryKind::kDevice;
  if (device != (stream.backend() == Backend::kCuda)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is in ", device ? "device" : "host", " memory, the stream is ",
                                                   BackendName(stream.backend())));
  }
  return absl::OkStatus();
}

absl::Status CheckHalo(const SlabLayout& layout, int64_t needed, const char* what) {
  const bool low_ok = layout.rank == 0 || layout.halo_lo >= needed;
  const bool high_ok = layout.rank + 1 == layout.ranks || layout.halo_hi >= needed;
  if (low_ok && high_ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, " needs halos of ", needed, " slices, ", layout.ToString()));
}

absl::Status Scale(float* p, int64_t n, float factor, const Stream& stream) {
  if (stream.backend() == Backend::kCpu) {
    for (int64_t i = 0; i < n; ++i) p[i] *= factor;
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return ScaleCuda(p, n, factor, stream);
#else
  return absl::FailedPreconditionError("CUDA stream in a build without CUDA");
#endif
}

}  // namespace sharded_internal
}  // namespace parallel
}  // namespace tessera

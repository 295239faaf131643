#include "common/ndarray.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/parallel.h"
#include "common/status.h"

namespace tessera {

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) { return shape.empty() ? "scalar" : absl::StrJoin(shape, "x"); }

absl::Status ValidateShape(const Shape& shape, int64_t max_elements) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("negative extent in shape ", ShapeToString(shape)));
    if (d != 0 && n > max_elements / d) {
      return absl::ResourceExhaustedError(
          absl::StrCat("shape ", ShapeToString(shape), " exceeds the limit of ", max_elements, " elements"));
    }
    n *= d;
  }
  return absl::OkStatus();
}

absl::StatusOr<NDArray> NDArray::Allocate(const Shape& shape, DType dtype, MemoryKind kind, int ordinal) {
  if (SizeOf(dtype) == 0) return absl::InvalidArgumentError("cannot allocate an array of invalid dtype");
  TESSERA_RETURN_IF_ERROR(ValidateShape(shape));
  TESSERA_ASSIGN_OR_RETURN(auto buffer, Buffer::Allocate(kind, NumElements(shape) * SizeOf(dtype), ordinal));
  return NDArray(shape, dtype, std::move(buffer));
}

absl::StatusOr<NDArray> NDArray::CopyTo(MemoryKind kind, const Stream& stream, int ordinal) const {
  TESSERA_ASSIGN_OR_RETURN(NDArray out, Allocate(shape_, dtype_, kind, ordinal));
  TESSERA_RETURN_IF_ERROR(CopyBytes(out.raw_data(), kind, raw_data(), memory_kind(), nbytes(), stream));
  return out;
}

absl::StatusOr<NDArray> NDArray::Reshaped(const Shape& shape) const {
  if (NumElements(shape) != num_elements()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot reshape ", ShapeToString(shape_), " to ", ShapeToString(shape)));
  }
  return NDArray(shape, dtype_, buffer_);
}

absl::StatusOr<NDArray> NDArray::View(std::shared_ptr<Buffer> buffer, const Shape& shape, DType dtype) {
  TESSERA_RETURN_IF_ERROR(ValidateShape(shape));
  const size_t bytes = static_cast<size_t>(NumElements(shape)) * SizeOf(dtype);
  if (buffer == nullptr || buffer->size() < bytes) {
    return absl::InvalidArgumentError(absl::StrCat("a view of ", ShapeToString(shape), " needs ", bytes,
                                                   " bytes, the buffer holds ", buffer ? buffer->size() : 0));
  }
  return NDArray(shape, dtype, std::move(buffer));
}

absl::StatusOr<NDArray> NDArray::AsType(DType dtype) const {
  if (memory_kind() == MemoryKind::kDevice) return absl::InvalidArgumentError("AsType needs a host array");
  TESSERA_ASSIGN_OR_RETURN(NDArray out, Allocate(shape_, dtype, MemoryKind::kHost));
  const int64_t n = num_elements();
  bool ok = VisitDType(dtype_, [&](auto src_tag) {
    using Src = decltype(src_tag);
    const Src* src = data<Src>();
    VisitDType(dtype, [&](auto dst_tag) {
      using Dst = decltype(dst_tag);
      Dst* dst = out.data<Dst>();
      // Gigavoxel volumes convert in parallel (1 M elements per chunk at least).
      ParallelFor(
          n, [&](int64_t b, int64_t e, int) {
            for (int64_t i = b; i < e; ++i) dst[i] = static_cast<Dst>(src[i]);
          },
          int64_t{1} << 20);
    });
  });
  if (!ok) return absl::InvalidArgumentError("AsType from an invalid dtype");
  return out;
}

}  // namespace tessera

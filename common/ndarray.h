// A contiguous n-dimensional array on the host, in pinned memory or on a GPU.
//
// Layout: the first dimension varies fastest (x, then y, then z), as in NIfTI
// and ITK, so element (i, j, k) of a 3-D array is at i + nx * (j + ny * k).
// Copies share storage (like a tensor handle); Clone() makes a deep copy.
#ifndef TESSERA_COMMON_NDARRAY_H_
#define TESSERA_COMMON_NDARRAY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/buffer.h"
#include "common/dtype.h"

namespace tessera {

using Shape = std::vector<int64_t>;

int64_t NumElements(const Shape& shape);
std::string ShapeToString(const Shape& shape);  // "181x217x181"
// Rejects negative extents and element counts that overflow or exceed `max_elements`.
absl::Status ValidateShape(const Shape& shape, int64_t max_elements = int64_t{1} << 40);

class NDArray {
 public:
  NDArray() = default;

  static absl::StatusOr<NDArray> Allocate(const Shape& shape, DType dtype, MemoryKind kind = MemoryKind::kHost,
                                          int ordinal = 0);

  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int axis) const { return shape_[axis]; }
  DType dtype() const { return dtype_; }
  int64_t num_elements() const { return NumElements(shape_); }
  size_t nbytes() const { return static_cast<size_t>(num_elements()) * SizeOf(dtype_); }
  MemoryKind memory_kind() const { return buffer_ ? buffer_->kind() : MemoryKind::kHost; }
  int ordinal() const { return buffer_ ? buffer_->ordinal() : 0; }
  bool empty() const { return buffer_ == nullptr; }

  void* raw_data() const { return buffer_ ? buffer_->data() : nullptr; }
  // Typed access; T must match dtype() (checked in debug builds).
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw_data());
  }

  // Deep copy into memory of `kind` (on GPU `ordinal` for device memory).
  absl::StatusOr<NDArray> CopyTo(MemoryKind kind, const Stream& stream, int ordinal = 0) const;
  absl::StatusOr<NDArray> Clone() const { return CopyTo(memory_kind(), Stream::Cpu(), ordinal()); }
  // Same storage, new shape with the same element count.
  absl::StatusOr<NDArray> Reshaped(const Shape& shape) const;
  // The first bytes of `buffer` seen as an array of `shape` (shared storage;
  // INVALID_ARGUMENT when it does not fit): a working buffer reused for arrays
  // of varying shapes (the out-of-core registration stage's shards).
  static absl::StatusOr<NDArray> View(std::shared_ptr<Buffer> buffer, const Shape& shape, DType dtype);
  // Host-only element-wise conversion (e.g. uint8 -> float32).
  absl::StatusOr<NDArray> AsType(DType dtype) const;

 private:
  NDArray(Shape shape, DType dtype, std::shared_ptr<Buffer> buffer)
      : shape_(std::move(shape)), dtype_(dtype), buffer_(std::move(buffer)) {}
  Shape shape_;
  DType dtype_ = DType::kInvalid;
  std::shared_ptr<Buffer> buffer_;
};

}  // namespace tessera

#endif  // TESSERA_COMMON_NDARRAY_H_

// Element types of arrays and volumes.
#ifndef TESSERA_COMMON_DTYPE_H_
#define TESSERA_COMMON_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include "absl/strings/string_view.h"

namespace tessera {

// Values match tessera.v1.DType in protos/tessera/v1/common.proto.
enum class DType : int {
  kInvalid = 0,
  kUInt8 = 1,
  kInt8 = 2,
  kUInt16 = 3,
  kInt16 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kFloat64 = 7,
};

constexpr size_t SizeOf(DType t) {
  switch (t) {
    case DType::kUInt8:
    case DType::kInt8:
      return 1;
    case DType::kUInt16:
    case DType::kInt16:
      return 2;
    case DType::kInt32:
    case DType::kFloat32:
      return 4;
    case DType::kFloat64:
      return 8;
    default:
      return 0;
  }
}

absl::string_view DTypeName(DType t);

template <typename T>
struct DTypeOf;
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::kUInt8; };
template <> struct DTypeOf<int8_t> { static constexpr DType value = DType::kInt8; };
template <> struct DTypeOf<uint16_t> { static constexpr DType value = DType::kUInt16; };
template <> struct DTypeOf<int16_t> { static constexpr DType value = DType::kInt16; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kInt32; };
template <> struct DTypeOf<float> { static constexpr DType value = DType::kFloat32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::kFloat64; };

// Calls fn(T{}) with T the C++ type of `t`; returns false for kInvalid.
template <typename Fn>
bool VisitDType(DType t, Fn&& fn) {
  switch (t) {
    case DType::kUInt8: fn(uint8_t{}); return true;
    case DType::kInt8: fn(int8_t{}); return true;
    case DType::kUInt16: fn(uint16_t{}); return true;
    case DType::kInt16: fn(int16_t{}); return true;
    case DType::kInt32: fn(int32_t{}); return true;
    case DType::kFloat32: fn(float{}); return true;
    case DType::kFloat64: fn(double{}); return true;
    default: return false;
  }
}

}  // namespace tessera

#endif  // TESSERA_COMMON_DTYPE_H_

#include "common/dtype.h"

namespace tessera {

absl::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kUInt16: return "uint16";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    default: return "invalid";
  }
}

}  // namespace tessera

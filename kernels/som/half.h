// The SOM's fp16 codebook conversions: common/half_float.h.
#ifndef TESSERA_KERNELS_SOM_HALF_H_
#define TESSERA_KERNELS_SOM_HALF_H_

#include "common/half_float.h"

namespace tessera {
namespace som {

using ::tessera::FloatToHalf;
using ::tessera::HalfToFloat;

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_KERNELS_SOM_HALF_H_

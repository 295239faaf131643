// Small conversions the registration pipeline needs between common/ arrays
// and the kernels' raw-pointer views.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_ARRAY_HELPERS_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_ARRAY_HELPERS_H_

#include "common/buffer.h"
#include "common/device.h"
#include "common/ndarray.h"
#include "kernels/registration/types.h"

namespace tessera::registration {

// The spatial extent of a (nx, ny, nz[, c]) array.
inline Dims3 DimsOf(const NDArray& a) { return Dims3{a.dim(0), a.dim(1), a.dim(2)}; }

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_ARRAY_HELPERS_H_

// The SOM kernels' fork-join helpers: common/parallel.h under som::.
#ifndef TESSERA_KERNELS_SOM_PARALLEL_H_
#define TESSERA_KERNELS_SOM_PARALLEL_H_

#include "common/parallel.h"

namespace tessera {
namespace som {

using ::tessera::CpuThreads;
using ::tessera::ParallelFor;
using ::tessera::ParallelForDynamic;

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_KERNELS_SOM_PARALLEL_H_

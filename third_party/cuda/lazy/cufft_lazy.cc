// The cuFFT functions the project calls, forwarded to libcufft on first use
// (lazy_library.h says why). Without the library they return
// CUFFT_NOT_SUPPORTED, which the callers report as a cuFFT failure.
#include <cufft.h>

#include "third_party/cuda/lazy/forward.h"

using tessera::cuda_lazy::Cufft;

extern "C" {

cufftResult CUFFTAPI cufftCreate(cufftHandle* handle) {
  TESSERA_LAZY_FORWARD(Cufft, cufftCreate, CUFFT_NOT_SUPPORTED, handle);
}
cufftResult CUFFTAPI cufftDestroy(cufftHandle plan) {
  TESSERA_LAZY_FORWARD(Cufft, cufftDestroy, CUFFT_NOT_SUPPORTED, plan);
}
cufftResult CUFFTAPI cufftExecC2C(cufftHandle plan, cufftComplex* idata, cufftComplex* odata, int direction) {
  TESSERA_LAZY_FORWARD(Cufft, cufftExecC2C, CUFFT_NOT_SUPPORTED, plan, idata, odata, direction);
}
cufftResult CUFFTAPI cufftExecZ2Z(cufftHandle plan, cufftDoubleComplex* idata, cufftDoubleComplex* odata,
                                  int direction) {
  TESSERA_LAZY_FORWARD(Cufft, cufftExecZ2Z, CUFFT_NOT_SUPPORTED, plan, idata, odata, direction);
}
cufftResult CUFFTAPI cufftExecC2R(cufftHandle plan, cufftComplex* idata, cufftReal* odata) {
  TESSERA_LAZY_FORWARD(Cufft, cufftExecC2R, CUFFT_NOT_SUPPORTED, plan, idata, odata);
}
cufftResult CUFFTAPI cufftExecR2C(cufftHandle plan, cufftReal* idata, cufftComplex* odata) {
  TESSERA_LAZY_FORWARD(Cufft, cufftExecR2C, CUFFT_NOT_SUPPORTED, plan, idata, odata);
}
cufftResult CUFFTAPI cufftMakePlanMany(cufftHandle plan, int rank, int* n, int* inembed, int istride, int idist,
                                       int* onembed, int ostride, int odist, cufftType type, int batch,
                                       size_t* workSize) {
  TESSERA_LAZY_FORWARD(Cufft, cufftMakePlanMany, CUFFT_NOT_SUPPORTED, plan, rank, n, inembed, istride, idist, onembed,
                       ostride, odist, type, batch, workSize);
}
cufftResult CUFFTAPI cufftMakePlanMany64(cufftHandle plan, int rank, long long int* n, long long int* inembed,
                                         long long int istride, long long int idist, long long int* onembed,
                                         long long int ostride, long long int odist, cufftType type,
                                         long long int batch, size_t* workSize) {
  TESSERA_LAZY_FORWARD(Cufft, cufftMakePlanMany64, CUFFT_NOT_SUPPORTED, plan, rank, n, inembed, istride, idist,
                       onembed, ostride, odist, type, batch, workSize);
}
cufftResult CUFFTAPI cufftSetAutoAllocation(cufftHandle plan, int autoAllocate) {
  TESSERA_LAZY_FORWARD(Cufft, cufftSetAutoAllocation, CUFFT_NOT_SUPPORTED, plan, autoAllocate);
}
cufftResult CUFFTAPI cufftSetStream(cufftHandle plan, cudaStream_t stream) {
  TESSERA_LAZY_FORWARD(Cufft, cufftSetStream, CUFFT_NOT_SUPPORTED, plan, stream);
}
cufftResult CUFFTAPI cufftSetWorkArea(cufftHandle plan, void* workArea) {
  TESSERA_LAZY_FORWARD(Cufft, cufftSetWorkArea, CUFFT_NOT_SUPPORTED, plan, workArea);
}

}  // extern "C"

// The cuSPARSE functions the project calls, forwarded to libcusparse on first
// use (lazy_library.h says why). Without the library they return
// CUSPARSE_STATUS_NOT_SUPPORTED, and cusparseGetErrorString says so.
#include <cusparse.h>

#include "third_party/cuda/lazy/forward.h"

using tessera::cuda_lazy::Cusparse;

extern "C" {

cusparseStatus_t CUSPARSEAPI cusparseCreate(cusparseHandle_t* handle) {
  TESSERA_LAZY_FORWARD(Cusparse, cusparseCreate, CUSPARSE_STATUS_NOT_SUPPORTED, handle);
}
cusparseStatus_t CUSPARSEAPI cusparseDestroy(cusparseHandle_t handle) {
  TESSERA_LAZY_FORWARD(Cusparse, cusparseDestroy, CUSPARSE_STATUS_NOT_SUPPORTED, handle);
}
cusparseStatus_t CUSPARSEAPI cusparseSetStream(cusparseHandle_t handle, cudaStream_t streamId) {
  TESSERA_LAZY_FORWARD(Cusparse, cusparseSetStream, CUSPARSE_STATUS_NOT_SUPPORTED, handle, streamId);
}
const char* CUSPARSEAPI cusparseGetErrorString(cusparseStatus_t status) {
  TESSERA_LAZY_FORWARD(Cusparse, cusparseGetErrorString, "cuSPARSE library not loaded", status);
}
cusparseStatus_t CUSPARSEAPI cusparseCreateCsr(cusparseSpMatDescr_t* spMatDescr, int64_t rows, int64_t cols,
                                               int64_t nnz, void* csrRowOffsets, void* csrColInd, void* csrValues,
                                               cusparseIndexType_t csrRowOffsetsType,
                                               cusparseIndexType_t csrColIndType, cusparseIndexBase_t idxBase,
                                               cudaDataType valueType) {
  TESSERA_LAZY_FORWARD(Cusparse, cusparseCreateCsr, CUSPARSE_STATUS_NOT_SUPPORTED, spMatDescr, rows, cols, nnz,
                       csrRowOffsets, csrColInd, csrValues, csrRowOffsetsType, csrColIndType, idxBase, valueType);
}
cusparseStatus_t CUSPARSEAPI cusparseCreateConstCsr(cusparseConstSpMatDescr_t* spMatDescr, int64_t rows,
                                                    int64_t cols, int64_t nnz, const void* csrRowOffsets,
                                                    const void* csrColInd, const void* csrValues,
                                                    cusparseIndexType_t csrRowOffsetsType,
                                                    cusparseIndexType_t csrColIndType, cusparseIndexBase_t idxBase,
                                                    cudaDataType valueType) {
  TESSERA_LAZY_FORWARD(Cusparse, cusparseCreateConstCsr, CUSPARSE_STATUS_NOT_SUPPORTED, spMatDescr, rows, cols, nnz,
                       csrRowOffsets, csrColInd, csrValues, csrRowOffsetsType, csrColIndType, idxBase, valueType);
}
cusparseStatus_t CUSPARSEAPI cusparseCreateDnMat(cusparseDnMatDescr_t* dnMatDescr, int64_t rows, int64_t cols,
                                                 int64_t ld, void* values, cudaDataType valueType,
                                                 cusparseOrder_t order) {
  TESSERA_LAZY_FORWARD(Cusparse, cusparseCreateDnMat, CUSPARSE_STATUS_NOT_SUPPORTED, dnMatDescr, rows, cols, ld,
                       values, valueType, order);
}
cusparseStatus_t CUSPARSEAPI cusparseCreateConstDnMat(cusparseConstDnMatDescr_t* dnMatDescr, int64_t rows,
                                                      int64_t cols, int64_t ld, const void* values,
                                                      cudaDataType valueType, cusparseOrder_t order) {
  TESSERA_LAZY_FORWARD(Cusparse, cusparseCreateConstDnMat, CUSPARSE_STATUS_NOT_SUPPORTED, dnMatDescr, rows, cols, ld,
                       values, valueType, order);
}
cusparseStatus_t CUSPARSEAPI cusparseCreateDnVec(cusparseDnVecDescr_t* dnVecDescr, int64_t size, void* values,
                                                 cudaDataType valueType) {
  TESSERA_LAZY_FORWARD(Cusparse, cusparseCreateDnVec, CUSPARSE_STATUS_NOT_SUPPORTED, dnVecDescr, size, values,
                       valueType);
}
cusparseStatus_t CUSPARSEAPI cusparseDestroyDnMat(cusparseConstDnMatDescr_t dnMatDescr) {
  TESSERA_LAZY_FORWARD(Cusparse, cusparseDestroyDnMat, CUSPARSE_STATUS_NOT_SUPPORTED, dnMatDescr);
}
cusparseStatus_t CUSPARSEAPI cusparseDestroyDnVec(cusparseConstDnVecDescr_t dnVecDescr) {
  TESSERA_LAZY_FORWARD(Cusparse, cusparseDestroyDnVec, CUSPARSE_STATUS_NOT_SUPPORTED, dnVecDescr);
}
cusparseStatus_t CUSPARSEAPI cusparseDestroySpMat(cusparseConstSpMatDescr_t spMatDescr) {
  TESSERA_LAZY_FORWARD(Cusparse, cusparseDestroySpMat, CUSPARSE_STATUS_NOT_SUPPORTED, spMatDescr);
}
cusparseStatus_t CUSPARSEAPI cusparseDnVecSetValues(cusparseDnVecDescr_t dnVecDescr, void* values) {
  TESSERA_LAZY_FORWARD(Cusparse, cusparseDnVecSetValues, CUSPARSE_STATUS_NOT_SUPPORTED, dnVecDescr, values);
}
cusparseStatus_t CUSPARSEAPI cusparseSpMM_bufferSize(cusparseHandle_t handle, cusparseOperation_t opA,
                                                     cusparseOperation_t opB, const void* alpha,
                                                     cusparseConstSpMatDescr_t matA, cusparseConstDnMatDescr_t matB,
                                                     const void* beta, cusparseDnMatDescr_t matC,
                                                     cudaDataType computeType, cusparseSpMMAlg_t alg,
                                                     size_t* bufferSize) {
  TESSERA_LAZY_FORWARD(Cusparse, cusparseSpMM_bufferSize, CUSPARSE_STATUS_NOT_SUPPORTED, handle, opA, opB, alpha,
                       matA, matB, beta, matC, computeType, alg, bufferSize);
}
cusparseStatus_t CUSPARSEAPI cusparseSpMM(cusparseHandle_t handle, cusparseOperation_t opA, cusparseOperation_t opB,
                                          const void* alpha, cusparseConstSpMatDescr_t matA,
                                          cusparseConstDnMatDescr_t matB, const void* beta,
                                          cusparseDnMatDescr_t matC, cudaDataType computeType,
                                          cusparseSpMMAlg_t alg, void* externalBuffer) {
  TESSERA_LAZY_FORWARD(Cusparse, cusparseSpMM, CUSPARSE_STATUS_NOT_SUPPORTED, handle, opA, opB, alpha, matA, matB,
                       beta, matC, computeType, alg, externalBuffer);
}
cusparseStatus_t CUSPARSEAPI cusparseSpMV_bufferSize(cusparseHandle_t handle, cusparseOperation_t opA,
                                                     const void* alpha, cusparseConstSpMatDescr_t matA,
                                                     cusparseConstDnVecDescr_t vecX, const void* beta,
                                                     cusparseDnVecDescr_t vecY, cudaDataType computeType,
                                                     cusparseSpMVAlg_t alg, size_t* bufferSize) {
  TESSERA_LAZY_FORWARD(Cusparse, cusparseSpMV_bufferSize, CUSPARSE_STATUS_NOT_SUPPORTED, handle, opA, alpha, matA,
                       vecX, beta, vecY, computeType, alg, bufferSize);
}
cusparseStatus_t CUSPARSEAPI cusparseSpMV_preprocess(cusparseHandle_t handle, cusparseOperation_t opA,
                                                     const void* alpha, cusparseConstSpMatDescr_t matA,
                                                     cusparseConstDnVecDescr_t vecX, const void* beta,
                                                     cusparseDnVecDescr_t vecY, cudaDataType computeType,
                                                     cusparseSpMVAlg_t alg, void* externalBuffer) {
  TESSERA_LAZY_FORWARD(Cusparse, cusparseSpMV_preprocess, CUSPARSE_STATUS_NOT_SUPPORTED, handle, opA, alpha, matA,
                       vecX, beta, vecY, computeType, alg, externalBuffer);
}
cusparseStatus_t CUSPARSEAPI cusparseSpMV(cusparseHandle_t handle, cusparseOperation_t opA, const void* alpha,
                                          cusparseConstSpMatDescr_t matA, cusparseConstDnVecDescr_t vecX,
                                          const void* beta, cusparseDnVecDescr_t vecY, cudaDataType computeType,
                                          cusparseSpMVAlg_t alg, void* externalBuffer) {
  TESSERA_LAZY_FORWARD(Cusparse, cusparseSpMV, CUSPARSE_STATUS_NOT_SUPPORTED, handle, opA, alpha, matA, vecX, beta,
                       vecY, computeType, alg, externalBuffer);
}

}  // extern "C"

// cuSPARSE generic SpMV behind SpmvKernel: the handle, the CSR descriptor and
// the work buffer live with the plan. The dense-vector descriptors are made on
// the first Apply (cuSPARSE needs real vectors to size its buffer) and then
// only re-pointed, so later calls cost one cusparseSpMV.
#if TESSERA_WITH_CUDA
#include <cusparse.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/reconstruction/linalg/spmv_cuda.h"

namespace tessera {
namespace recon {
namespace linalg {
namespace cuda {
namespace {

absl::Status CusparseStatus(cusparseStatus_t status, const char* what) {
  if (status == CUSPARSE_STATUS_SUCCESS) return absl::OkStatus();
  const absl::StatusCode code =
      status == CUSPARSE_STATUS_ALLOC_FAILED ? absl::StatusCode::kResourceExhausted : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat(what, ": ", cusparseGetErrorString(status)));
}

#define TESSERA_CUSPARSE_RETURN_IF_ERROR(expr) TESSERA_RETURN_IF_ERROR(CusparseStatus((expr), #expr))

class CusparseSpmv : public SpmvKernel {
 public:
  CusparseSpmv(const CsrMatrix& m, const Stream& stream, bool deterministic)
      : m_(m), stream_(stream), alg_(deterministic ? CUSPARSE_SPMV_CSR_ALG2 : CUSPARSE_SPMV_CSR_ALG1) {}

  ~CusparseSpmv() override {
    if (x_ != nullptr) cusparseDestroyDnVec(x_);
    if (y_ != nullptr) cusparseDestroyDnVec(y_);
    if (a_ != nullptr) cusparseDestroySpMat(a_);
    if (handle_ != nullptr) cusparseDestroy(handle_);
  }

  absl::Status Init() {
    TESSERA_CUSPARSE_RETURN_IF_ERROR(cusparseCreate(&handle_));
    TESSERA_CUSPARSE_RETURN_IF_ERROR(cusparseSetStream(handle_, static_cast<cudaStream_t>(stream_.native())));
    TESSERA_CUSPARSE_RETURN_IF_ERROR(cusparseCreateConstCsr(&a_, m_.rows, m_.cols, m_.nnz, m_.row_ptr, m_.col_idx,
                                                            m_.values, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                                            CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
    return absl::OkStatus();
  }

  absl::Status Apply(const float* x, float* y, float alpha, float beta) override {
    TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream_.ordinal()));
    if (x_ == nullptr) {
      TESSERA_CUSPARSE_RETURN_IF_ERROR(cusparseCreateDnVec(&x_, m_.cols, const_cast<float*>(x), CUDA_R_32F));
      TESSERA_CUSPARSE_RETURN_IF_ERROR(cusparseCreateDnVec(&y_, m_.rows, y, CUDA_R_32F));
      size_t bytes = 0;
      TESSERA_CUSPARSE_RETURN_IF_ERROR(cusparseSpMV_bufferSize(handle_, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a_,
                                                               x_, &beta, y_, CUDA_R_32F, alg_, &bytes));
      TESSERA_ASSIGN_OR_RETURN(buffer_, Buffer::Allocate(MemoryKind::kDevice, bytes, stream_.ordinal()));
      TESSERA_CUSPARSE_RETURN_IF_ERROR(cusparseSpMV_preprocess(handle_, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a_,
                                                               x_, &beta, y_, CUDA_R_32F, alg_, buffer_->data()));
    } else {
      TESSERA_CUSPARSE_RETURN_IF_ERROR(cusparseDnVecSetValues(x_, const_cast<float*>(x)));
      TESSERA_CUSPARSE_RETURN_IF_ERROR(cusparseDnVecSetValues(y_, y));
    }
    TESSERA_CUSPARSE_RETURN_IF_ERROR(cusparseSpMV(handle_, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a_, x_, &beta, y_,
                                                  CUDA_R_32F, alg_, buffer_->data()));
    return absl::OkStatus();
  }

 private:
  CsrMatrix m_;
  const Stream& stream_;
  cusparseSpMVAlg_t alg_;
  cusparseHandle_t handle_ = nullptr;
  cusparseConstSpMatDescr_t a_ = nullptr;
  cusparseDnVecDescr_t x_ = nullptr;
  cusparseDnVecDescr_t y_ = nullptr;
  std::shared_ptr<Buffer> buffer_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SpmvKernel>> CreateCusparseSpmv(const CsrMatrix& matrix, const Stream& stream,
                                                               bool deterministic) {
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  auto kernel = std::make_unique<CusparseSpmv>(matrix, stream, deterministic);
  TESSERA_RETURN_IF_ERROR(kernel->Init());
  return std::unique_ptr<SpmvKernel>(std::move(kernel));
}

}  // namespace cuda
}  // namespace linalg
}  // namespace recon
}  // namespace tessera
#endif  // TESSERA_WITH_CUDA

// CUDA PCA initialisation (pca.h): the reference's orthogonal power iteration
// with cuSPARSE (X u, X^T y as fp64 SpMMs over the CSR of X and of its
// transpose, so both are deterministic) and cuBLAS (dots, norms, axpy), and
// the codebook fill written in place on the device.
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <dlfcn.h>
#include <cuda_runtime.h>
#include <cusparse.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/som/documents.h"
#include "kernels/som/pca.h"

namespace tessera {
namespace som {
namespace cuda {
namespace {

constexpr int kThreads = 256;

// cuBLAS is opened with dlopen on first use, not linked: libcublasLt's 94 KB
// of static TLS would then sit in every thread of every process that links
// this library (`tessera serve` via the SOM trainer), and civetweb's
// small-stack threads (the Prometheus /metrics server) fail to start
// ("null context when constructing CivetServer"). A dlopen'd library's TLS
// is allocated per thread on demand instead. The table is written once and
// only read after (C++ static initialisation is thread-safe).
struct Cublas {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasDdot_v2) ddot = nullptr;
  decltype(&cublasDaxpy_v2) daxpy = nullptr;
  decltype(&cublasDnrm2_v2) dnrm2 = nullptr;
  decltype(&cublasDscal_v2) dscal = nullptr;
  std::string error;  // why it could not be loaded; empty when loaded
};

const Cublas& LoadCublas() {
  static const Cublas api = [] {
    Cublas a;
    void* lib = nullptr;
    for (const char* name : {"libcublas.so.13", "libcublas.so"}) {
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    }
    if (lib == nullptr) {
      const char* why = dlerror();
      a.error = absl::StrCat("cannot load cuBLAS (libcublas.so.13): ", why == nullptr ? "not found" : why);
      return a;
    }
    auto bind = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, symbol));
      if (fn == nullptr && a.error.empty()) a.error = absl::StrCat("cuBLAS lacks ", symbol);
    };
    bind(a.create, "cublasCreate_v2");
    bind(a.destroy, "cublasDestroy_v2");
    bind(a.set_stream, "cublasSetStream_v2");
    bind(a.ddot, "cublasDdot_v2");
    bind(a.daxpy, "cublasDaxpy_v2");
    bind(a.dnrm2, "cublasDnrm2_v2");
    bind(a.dscal, "cublasDscal_v2");
    return a;
  }();
  return api;
}

absl::Status CublasStatus(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": cuBLAS status ", static_cast<int>(s)));
}
absl::Status CusparseStatus(cusparseStatus_t s, const char* what) {
  if (s == CUSPARSE_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cusparseGetErrorString(s)));
}
#define PCA_CUBLAS(expr) TESSERA_RETURN_IF_ERROR(CublasStatus((expr), #expr))
#define PCA_CUSPARSE(expr) TESSERA_RETURN_IF_ERROR(CusparseStatus((expr), #expr))

// Library handles and descriptors, released on every path.
struct Handles {
  cublasHandle_t blas = nullptr;
  cusparseHandle_t sparse = nullptr;
  cusparseSpMatDescr_t x = nullptr, xt = nullptr;
  cusparseDnMatDescr_t a = nullptr, b = nullptr, y = nullptr;
  ~Handles() {
    if (a != nullptr) cusparseDestroyDnMat(a);
    if (b != nullptr) cusparseDestroyDnMat(b);
    if (y != nullptr) cusparseDestroyDnMat(y);
    if (x != nullptr) cusparseDestroySpMat(x);
    if (xt != nullptr) cusparseDestroySpMat(xt);
    if (sparse != nullptr) cusparseDestroy(sparse);
    if (blas != nullptr) LoadCublas().destroy(blas);
  }
};

__global__ void FillDoubles(double* p, int64_t n, double value) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    p[k] = value;
  }
}

// z_k = z_k / n - mean mu_k, as the reference writes it (no contraction).
__global__ void CenterKernel(double* z, const double* mean, int64_t v_count, double n, double mu0, double mu1) {
  for (int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; v < v_count;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    z[v] = __dsub_rn(__ddiv_rn(z[v], n), __dmul_rn(mean[v], mu0));
    z[v_count + v] = __dsub_rn(__ddiv_rn(z[v_count + v], n), __dmul_rn(mean[v], mu1));
  }
}

template <typename TW>
__global__ void PcaFillKernel(TW* __restrict__ w, int64_t nodes, int64_t features, const double* __restrict__ mean,
                              const double* __restrict__ u0, const double* __restrict__ u1,
                              const double* __restrict__ c0, const double* __restrict__ c1) {
  for (int64_t v = blockIdx.y; v < features; v += gridDim.y) {
    const double m = mean[v], a = u0[v], b = u1[v];
    TW* column = w + v * nodes;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < nodes;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      // (mean + c0 u0) + c1 u1, each step rounded as the CPU reference does.
      const double x = __dadd_rn(__dadd_rn(m, __dmul_rn(c0[i], a)), __dmul_rn(c1[i], b));
      if constexpr (sizeof(TW) == 4) {
        column[i] = __double2float_rn(x);
      } else {
        column[i] = __float2half_rn(__double2float_rn(x));
      }
    }
  }
}

unsigned Blocks(int64_t n) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(65535, (n + kThreads - 1) / kThreads)));
}

absl::StatusOr<std::shared_ptr<Buffer>> Upload(const void* host, size_t bytes, const Stream& stream) {
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> b,
                           Buffer::Allocate(MemoryKind::kDevice, std::max<size_t>(bytes, 8), stream.ordinal()));
  if (bytes > 0) TESSERA_RETURN_IF_ERROR(CopyBytes(b->data(), MemoryKind::kDevice, host, MemoryKind::kHost, bytes, stream));
  return b;
}

std::vector<int32_t> Narrow(const std::vector<int64_t>& offsets) { return {offsets.begin(), offsets.end()}; }

}  // namespace

absl::StatusOr<PrincipalPlane> LeadingComponents(const Stream& stream, const CsrView& x, const PcaOptions& options) {
  const int64_t n = x.rows, v_count = x.cols, nnz = x.nnz();
  if (nnz >= (int64_t{1} << 31) || n >= (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(absl::StrCat("LeadingComponents: ", n, " rows with ", nnz,
                                                   " non-zeros exceed the 32-bit indices of the CUDA path "
                                                   "(lower pca_sample_rows)"));
  }
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  // Host side: 32-bit CSR of X and of X^T, the mean and the start vectors
  // exactly as the reference makes them.
  const std::vector<int32_t> x_offsets = Narrow(std::vector<int64_t>(x.offsets, x.offsets + n + 1));
  const HostCsc csc = BuildCsc(x);
  const std::vector<int32_t> xt_offsets = Narrow(csc.offsets);
  std::vector<double> mean(v_count, 0.0);
  for (int64_t k = 0; k < nnz; ++k) mean[x.indices[k]] += 1.0;
  for (double& e : mean) e /= n;
  PrincipalPlane p;
  PcaStartVectors(v_count, options.seed, p.u);
  Orthonormalize(p.u);
  std::vector<double> u_host(2 * v_count);
  std::copy(p.u[0].begin(), p.u[0].end(), u_host.begin());
  std::copy(p.u[1].begin(), p.u[1].end(), u_host.begin() + v_count);

  TESSERA_ASSIGN_OR_RETURN(auto d_x_offsets, Upload(x_offsets.data(), 4 * x_offsets.size(), stream));
  TESSERA_ASSIGN_OR_RETURN(auto d_x_indices, Upload(x.indices, 4 * nnz, stream));
  TESSERA_ASSIGN_OR_RETURN(auto d_xt_offsets, Upload(xt_offsets.data(), 4 * xt_offsets.size(), stream));
  TESSERA_ASSIGN_OR_RETURN(auto d_xt_indices, Upload(csc.doc_ids.data(), 4 * nnz, stream));
  TESSERA_ASSIGN_OR_RETURN(auto d_mean, Upload(mean.data(), 8 * v_count, stream));
  TESSERA_ASSIGN_OR_RETURN(auto d_u, Upload(u_host.data(), 8 * u_host.size(), stream));
  TESSERA_ASSIGN_OR_RETURN(auto d_z, Buffer::Allocate(MemoryKind::kDevice, 8 * 2 * v_count, stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(auto d_y, Buffer::Allocate(MemoryKind::kDevice, 8 * 2 * n, stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(auto d_ones, Buffer::Allocate(MemoryKind::kDevice, 8 * std::max<int64_t>(1, nnz),
                                                         stream.ordinal()));
  FillDoubles<<<Blocks(nnz), kThreads, 0, s>>>(static_cast<double*>(d_ones->data()), nnz, 1.0);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("FillDoubles");

  Handles h;
  const Cublas& blas = LoadCublas();
  if (!blas.error.empty()) return absl::FailedPreconditionError(blas.error);
  PCA_CUBLAS(blas.create(&h.blas));
  PCA_CUBLAS(blas.set_stream(h.blas, s));
  PCA_CUSPARSE(cusparseCreate(&h.sparse));
  PCA_CUSPARSE(cusparseSetStream(h.sparse, s));
  PCA_CUSPARSE(cusparseCreateCsr(&h.x, n, v_count, nnz, d_x_offsets->data(), d_x_indices->data(), d_ones->data(),
                                 CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F));
  PCA_CUSPARSE(cusparseCreateCsr(&h.xt, v_count, n, nnz, d_xt_offsets->data(), d_xt_indices->data(),
                                 d_ones->data(), CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                                 CUDA_R_64F));
  // Column-major dense operands: the two vectors back to back.
  double* u = static_cast<double*>(d_u->data());
  double* z = static_cast<double*>(d_z->data());
  PCA_CUSPARSE(cusparseCreateDnMat(&h.a, v_count, 2, v_count, u, CUDA_R_64F, CUSPARSE_ORDER_COL));
  PCA_CUSPARSE(cusparseCreateDnMat(&h.b, v_count, 2, v_count, z, CUDA_R_64F, CUSPARSE_ORDER_COL));
  PCA_CUSPARSE(cusparseCreateDnMat(&h.y, n, 2, n, d_y->data(), CUDA_R_64F, CUSPARSE_ORDER_COL));
  const double one = 1.0, zero = 0.0;
  const auto op = CUSPARSE_OPERATION_NON_TRANSPOSE;
  size_t bytes_x = 0, bytes_xt = 0;
  PCA_CUSPARSE(cusparseSpMM_bufferSize(h.sparse, op, op, &one, h.x, h.a, &zero, h.y, CUDA_R_64F,
                                       CUSPARSE_SPMM_ALG_DEFAULT, &bytes_x));
  PCA_CUSPARSE(cusparseSpMM_bufferSize(h.sparse, op, op, &one, h.xt, h.y, &zero, h.b, CUDA_R_64F,
                                       CUSPARSE_SPMM_ALG_DEFAULT, &bytes_xt));
  TESSERA_ASSIGN_OR_RETURN(auto d_work, Buffer::Allocate(MemoryKind::kDevice, std::max<size_t>(8, std::max(bytes_x, bytes_xt)),
                                                         stream.ordinal()));
  const double* d_mean_p = static_cast<const double*>(d_mean->data());
  const int vc = static_cast<int>(v_count);
  if (v_count >= (int64_t{1} << 31)) return absl::InvalidArgumentError("LeadingComponents: too many features");
  cusparseDnMatDescr_t cur = h.a, next = h.b;  // u and z swap roles every iteration
  const int iterations = std::max(1, options.iterations);
  for (int it = 0; it < iterations; ++it) {
    // y = X u; z = X^T y
    PCA_CUSPARSE(cusparseSpMM(h.sparse, op, op, &one, h.x, cur, &zero, h.y, CUDA_R_64F, CUSPARSE_SPMM_ALG_DEFAULT,
                              d_work->data()));
    PCA_CUSPARSE(cusparseSpMM(h.sparse, op, op, &one, h.xt, h.y, &zero, next, CUDA_R_64F,
                              CUSPARSE_SPMM_ALG_DEFAULT, d_work->data()));
    // z = z / n - mean (mean . u)
    double mu[2];
    for (int k = 0; k < 2; ++k) PCA_CUBLAS(blas.ddot(h.blas, vc, d_mean_p, 1, u + k * v_count, 1, &mu[k]));
    CenterKernel<<<Blocks(v_count), kThreads, 0, s>>>(z, d_mean_p, v_count, static_cast<double>(n), mu[0], mu[1]);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("CenterKernel");
    if (it == iterations - 1) {
      for (int k = 0; k < 2; ++k) {
        double rayleigh = 0;
        PCA_CUBLAS(blas.ddot(h.blas, vc, z + k * v_count, 1, u + k * v_count, 1, &rayleigh));
        p.lambda[k] = std::max(0.0, rayleigh);
      }
    }
    std::swap(u, z);
    std::swap(cur, next);
    // Gram-Schmidt of the new u.
    for (int k = 0; k < 2; ++k) {
      double* uk = u + k * v_count;
      if (k == 1) {
        double dot = 0;
        PCA_CUBLAS(blas.ddot(h.blas, vc, uk, 1, u, 1, &dot));
        const double minus = -dot;
        PCA_CUBLAS(blas.daxpy(h.blas, vc, &minus, u, 1, uk, 1));
      }
      double norm = 0;
      PCA_CUBLAS(blas.dnrm2(h.blas, vc, uk, 1, &norm));
      const double inverse = norm == 0 ? 1.0 : 1.0 / norm;
      PCA_CUBLAS(blas.dscal(h.blas, vc, &inverse, uk, 1));
    }
  }
  TESSERA_RETURN_IF_ERROR(CopyBytes(u_host.data(), MemoryKind::kHost, u, MemoryKind::kDevice, 8 * u_host.size(),
                                    stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  std::copy(u_host.begin(), u_host.begin() + v_count, p.u[0].begin());
  std::copy(u_host.begin() + v_count, u_host.end(), p.u[1].begin());
  CanonicalizeSigns(&p);
  return p;
}

absl::Status FillPcaCodebook(const Stream& stream, const CodebookView& cb, const PcaFillInputs& in) {
  if (cb.features == 0) return absl::OkStatus();
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  const dim3 grid(static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(64, (cb.nodes + kThreads - 1) / kThreads))),
                  static_cast<unsigned>(std::min<int64_t>(65535, cb.features)));
  if (cb.type == WeightType::kFloat32) {
    PcaFillKernel<float><<<grid, kThreads, 0, s>>>(static_cast<float*>(cb.weights), cb.nodes, cb.features, in.mean,
                                                   in.u0, in.u1, in.c0, in.c1);
  } else {
    PcaFillKernel<__half><<<grid, kThreads, 0, s>>>(static_cast<__half*>(cb.weights), cb.nodes, cb.features,
                                                    in.mean, in.u0, in.u1, in.c0, in.c1);
  }
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("PcaFillKernel");
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace som
}  // namespace tessera

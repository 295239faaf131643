// Reconstruction linear algebra on the GPU, ours against the CUDA libraries in
// one run (kernels/reconstruction/linalg):
//   1. batched Hermitian positive-definite solves, real and complex, nrhs 1:
//      ours (BatchedCholeskySolve) vs cuSOLVER potrfBatched + potrsBatched and,
//      for n <= 32, cuBLAS getrfBatched + getrsBatched (LU; pivoting). Library
//      runs restore A before each repetition (they factor in place); the copy
//      is outside the timed interval.
//   2. CSR SpMV y = A x: bucketed kernel vs cuSPARSE CSR ALG1 and ALG2 on a
//      uniform-row and a power-law-row matrix; effective GB/s counts
//      values + column indices + row pointers + x + y once.
//   3. CG iteration time on the 2-D Laplacian with each SpMV as the matvec.
// Times are medians of --reps CUDA-event intervals after one warm-up.
//
//   recon_linalg_bench [--small] [--reps=10] [--sections=solve,spmv,cg]
//       [--solve_sizes=3,4,8,16,32,64,128] [--solve_batch=262144] [--solve_batch_large=4096]
//       [--spmv_rows=1000000] [--spmv_row_length=30] [--spmv_max_row=100000] [--cg_grid=1024] [--cg_iterations=50]
//
// --small: 16384 / 256 systems, 100000-row matrices, a 256 x 256 grid, 3 reps.
// Without a GPU it prints why and exits 0.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "bench/bench_util.h"
#include "common/buffer.h"
#include "common/device.h"
#include "kernels/reconstruction/linalg/batched_cholesky.h"
#include "kernels/reconstruction/linalg/conjugate_gradient.h"
#include "kernels/reconstruction/linalg/random_problems.h"
#include "kernels/reconstruction/linalg/spmv.h"

#if TESSERA_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>
#endif

ABSL_FLAG(bool, small, false, "small sizes for a quick run");
ABSL_FLAG(int, reps, 10, "timed repetitions per measurement (median reported)");
ABSL_FLAG(std::vector<std::string>, sections, std::vector<std::string>({"solve", "spmv", "cg"}), "what to run");
ABSL_FLAG(std::vector<std::string>, solve_sizes, std::vector<std::string>({"3", "4", "8", "16", "32", "64", "128"}),
          "matrix sizes n of the batched solves");
ABSL_FLAG(int64_t, solve_batch, 262144, "systems per batch for n <= 8");
ABSL_FLAG(int64_t, solve_batch_large, 4096, "systems per batch for n > 8");
ABSL_FLAG(int64_t, spmv_rows, 1000000, "rows (= columns) of the SpMV matrices");
ABSL_FLAG(int64_t, spmv_row_length, 30, "entries per row (uniform) / mean entries per row (power law)");
ABSL_FLAG(int64_t, spmv_max_row, 100000, "longest row of the power-law matrix");
ABSL_FLAG(int64_t, cg_grid, 1024, "CG on the g x g 2-D Laplacian");
ABSL_FLAG(int, cg_iterations, 50, "CG iterations timed (tolerance 0: no early stop)");

namespace tessera {
namespace recon {
namespace linalg {
namespace {

#if TESSERA_WITH_CUDA

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "recon_linalg_bench: %s\n", what.c_str());
  std::exit(1);
}
void Check(const absl::Status& s, const char* what) {
  if (!s.ok()) Die(std::string(what) + ": " + s.ToString());
}
void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) Die(std::string(what) + ": " + cudaGetErrorString(e));
}
void Check(cusolverStatus_t e, const char* what) {
  if (e != CUSOLVER_STATUS_SUCCESS) Die(std::string(what) + ": cusolver status " + std::to_string(e));
}
void Check(cublasStatus_t e, const char* what) {
  if (e != CUBLAS_STATUS_SUCCESS) Die(std::string(what) + ": cublas status " + std::to_string(e));
}

cudaStream_t Native(const Stream& s) { return static_cast<cudaStream_t>(s.native()); }

// A device allocation for the benchmark's lifetime.
template <typename T>
struct Dev {
  std::shared_ptr<Buffer> buffer;
  size_t n = 0;
  static Dev Make(size_t n, const Stream& s) {
    auto b = Buffer::Allocate(MemoryKind::kDevice, std::max<size_t>(n, 1) * sizeof(T), s.ordinal());
    Check(b.status(), "device allocation");
    return Dev{*b, n};
  }
  static Dev From(const std::vector<T>& host, const Stream& s) {
    Dev d = Make(host.size(), s);
    Check(CopyBytes(d.data(), MemoryKind::kDevice, host.data(), MemoryKind::kHost, host.size() * sizeof(T), s),
          "upload");
    return d;
  }
  T* data() const { return static_cast<T*>(buffer->data()); }
  std::vector<T> Download(const Stream& s) const {
    std::vector<T> h(n);
    Check(CopyBytes(h.data(), MemoryKind::kHost, data(), MemoryKind::kDevice, n * sizeof(T), s), "download");
    return h;
  }
};

// Median of `reps` event-timed runs of `body` (after one warm-up); `setup`
// runs before each, outside the interval.
double MedianMs(const Stream& stream, int reps, const std::function<void()>& body,
                const std::function<void()>& setup = nullptr) {
  cudaEvent_t start, stop;
  Check(cudaEventCreate(&start), "event");
  Check(cudaEventCreate(&stop), "event");
  std::vector<float> ms;
  for (int r = -1; r < reps; ++r) {
    if (setup) setup();
    Check(cudaEventRecord(start, Native(stream)), "record");
    body();
    Check(cudaEventRecord(stop, Native(stream)), "record");
    Check(cudaEventSynchronize(stop), "sync");
    float t = 0;
    Check(cudaEventElapsedTime(&t, start, stop), "elapsed");
    if (r >= 0) ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return bench::Median(std::vector<double>(ms.begin(), ms.end()));
}

template <typename T>
double RelDiff(const std::vector<T>& a, const std::vector<T>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const std::complex<double> x(a[i]), y(b[i]);
    num += std::norm(x - y);
    den += std::norm(y);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

std::string Ratio(double ours_ms, double other_ms) {
  if (!(other_ms > 0)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2fx", other_ms / ours_ms);
  return buf;
}

std::string Ms(double ms) {
  if (!(ms > 0)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", ms);
  return buf;
}

// ---------------------------------------------------------------------------
// Batched solves.

struct Libraries {
  cusolverDnHandle_t solver = nullptr;
  cublasHandle_t blas = nullptr;
};

// Library calls for float / cuComplex.
cusolverStatus_t Potrf(cusolverDnHandle_t h, int n, float** a, int* info, int batch) {
  return cusolverDnSpotrfBatched(h, CUBLAS_FILL_MODE_LOWER, n, a, n, info, batch);
}
cusolverStatus_t Potrf(cusolverDnHandle_t h, int n, cuComplex** a, int* info, int batch) {
  return cusolverDnCpotrfBatched(h, CUBLAS_FILL_MODE_LOWER, n, a, n, info, batch);
}
cusolverStatus_t Potrs(cusolverDnHandle_t h, int n, float** a, float** b, int* info, int batch) {
  return cusolverDnSpotrsBatched(h, CUBLAS_FILL_MODE_LOWER, n, 1, a, n, b, n, info, batch);
}
cusolverStatus_t Potrs(cusolverDnHandle_t h, int n, cuComplex** a, cuComplex** b, int* info, int batch) {
  return cusolverDnCpotrsBatched(h, CUBLAS_FILL_MODE_LOWER, n, 1, a, n, b, n, info, batch);
}
cublasStatus_t Getrf(cublasHandle_t h, int n, float** a, int* piv, int* info, int batch) {
  return cublasSgetrfBatched(h, n, a, n, piv, info, batch);
}
cublasStatus_t Getrf(cublasHandle_t h, int n, cuComplex** a, int* piv, int* info, int batch) {
  return cublasCgetrfBatched(h, n, a, n, piv, info, batch);
}
cublasStatus_t Getrs(cublasHandle_t h, int n, float** a, int* piv, float** b, int* info, int batch) {
  return cublasSgetrsBatched(h, CUBLAS_OP_N, n, 1, a, n, piv, b, n, info, batch);
}
cublasStatus_t Getrs(cublasHandle_t h, int n, cuComplex** a, int* piv, cuComplex** b, int* info, int batch) {
  return cublasCgetrsBatched(h, CUBLAS_OP_N, n, 1, a, n, piv, b, n, info, batch);
}

template <typename T>
std::vector<T*> Pointers(T* base, int64_t batch, int64_t stride) {
  std::vector<T*> p(batch);
  for (int64_t i = 0; i < batch; ++i) p[i] = base + i * stride;
  return p;
}

// T: float or std::complex<float>; L: float or cuComplex (the library type).
template <typename T, typename L>
void BenchSolve(const Stream& stream, const Libraries& libs, int n, int64_t batch, int reps) {
  const bool complex = !std::is_same_v<T, float>;
  std::vector<T> a;
  if constexpr (std::is_same_v<T, float>) {
    a = DominantHpdBatch(batch, n, 17 + n);
  } else {
    a = DominantHpdBatchComplex(batch, n, 17 + n);
  }
  std::vector<T> b(batch * n);
  for (size_t i = 0; i < b.size(); ++i) b[i] = T(std::sin(0.01f * static_cast<float>(i % 100003)) + 0.5f);
  const BatchedSolveShape shape{batch, n, 1};
  Dev<T> da = Dev<T>::From(a, stream), db = Dev<T>::From(b, stream), dx = Dev<T>::Make(b.size(), stream);
  Dev<int> info = Dev<int>::Make(batch, stream);
  const double ours = MedianMs(stream, reps, [&] {
    Check(BatchedCholeskySolve(stream, shape, 0.0f, da.data(), db.data(), dx.data(), info.data()), "ours");
  });
  const std::vector<T> x_ours = dx.Download(stream);

  // Library runs: a working copy of A and B, restored before each repetition.
  Dev<T> wa = Dev<T>::Make(a.size(), stream), wb = Dev<T>::Make(b.size(), stream);
  L* wa_l = reinterpret_cast<L*>(wa.data());
  L* wb_l = reinterpret_cast<L*>(wb.data());
  Dev<L*> pa = Dev<L*>::From(Pointers(wa_l, batch, int64_t{n} * n), stream);
  Dev<L*> pb = Dev<L*>::From(Pointers(wb_l, batch, n), stream);
  const auto restore = [&] {
    Check(cudaMemcpyAsync(wa.data(), da.data(), a.size() * sizeof(T), cudaMemcpyDeviceToDevice, Native(stream)), "cp");
    Check(cudaMemcpyAsync(wb.data(), db.data(), b.size() * sizeof(T), cudaMemcpyDeviceToDevice, Native(stream)), "cp");
  };
  Dev<int> potrs_info = Dev<int>::Make(1, stream);
  const double solver = MedianMs(
      stream, reps,
      [&] {
        Check(Potrf(libs.solver, n, pa.data(), info.data(), static_cast<int>(batch)), "potrfBatched");
        Check(Potrs(libs.solver, n, pa.data(), pb.data(), potrs_info.data(), static_cast<int>(batch)), "potrsBatched");
      },
      restore);
  const double diff_solver = RelDiff(x_ours, wb.Download(stream));

  double blas = -1, diff_blas = -1;
  if (n <= 32) {
    Dev<int> piv = Dev<int>::Make(batch * n, stream);
    int host_info = 0;
    blas = MedianMs(
        stream, reps,
        [&] {
          Check(Getrf(libs.blas, n, pa.data(), piv.data(), info.data(), static_cast<int>(batch)), "getrfBatched");
          Check(Getrs(libs.blas, n, pa.data(), piv.data(), pb.data(), &host_info, static_cast<int>(batch)),
                "getrsBatched");
        },
        restore);
    diff_blas = RelDiff(x_ours, wb.Download(stream));
  }
  const double bytes = static_cast<double>(batch) * (int64_t{n} * n + 2 * n) * sizeof(T);
  char blas_diff[32] = "-";
  if (diff_blas >= 0) std::snprintf(blas_diff, sizeof(blas_diff), "%.1e", diff_blas);
  std::printf("| %s | %d | %ld | %s | %s | %s | %s | %s | %.0f | %.1e | %s |\n", complex ? "complex" : "real", n,
              static_cast<long>(batch), Ms(ours).c_str(), Ms(solver).c_str(), Ms(blas).c_str(),
              Ratio(ours, solver).c_str(), Ratio(ours, blas).c_str(), bytes / (ours * 1e6), diff_solver, blas_diff);
  std::fflush(stdout);
}

void RunSolves(const Stream& stream, const std::vector<int>& sizes, int64_t batch_small_n, int64_t batch_large_n,
               int reps) {
  Libraries libs;
  Check(cusolverDnCreate(&libs.solver), "cusolverDnCreate");
  Check(cusolverDnSetStream(libs.solver, Native(stream)), "cusolverDnSetStream");
  Check(cublasCreate(&libs.blas), "cublasCreate");
  Check(cublasSetStream(libs.blas, Native(stream)), "cublasSetStream");
  std::printf("\n## Batched HPD solves, nrhs 1 (ms, median of %d)\n\n", reps);
  std::printf(
      "| type | n | batch | ours | cuSOLVER potrf+potrs | cuBLAS getrf+getrs | speedup vs cuSOLVER | "
      "speedup vs cuBLAS | ours GB/s | rel diff cuSOLVER | rel diff cuBLAS |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int n : sizes) {
    const int64_t batch = n <= kMaxRegisterSolveSize ? batch_small_n : batch_large_n;
    BenchSolve<float, float>(stream, libs, n, batch, reps);
    BenchSolve<std::complex<float>, cuComplex>(stream, libs, n, batch, reps);
  }
  cublasDestroy(libs.blas);
  cusolverDnDestroy(libs.solver);
}

// ---------------------------------------------------------------------------
// SpMV and CG.

struct DeviceCsr {
  Dev<int32_t> row_ptr, col_idx;
  Dev<float> values;
  CsrMatrix view;
};

DeviceCsr Upload(const HostCsr& m, const Stream& s) {
  DeviceCsr d{Dev<int32_t>::From(m.row_ptr, s), Dev<int32_t>::From(m.col_idx, s), Dev<float>::From(m.values, s), {}};
  d.view = CsrMatrix{m.rows, m.cols, m.nnz(), d.row_ptr.data(), d.col_idx.data(), d.values.data()};
  return d;
}

struct Variant {
  const char* name;
  SpmvOptions options;
};
const Variant kVariants[] = {
    {"bucketed (ours)", {SpmvAlgorithm::kBucketed, ExecutionMode::kDefault}},
    {"cuSPARSE ALG1", {SpmvAlgorithm::kCusparse, ExecutionMode::kDefault}},
    {"cuSPARSE ALG2 (deterministic)", {SpmvAlgorithm::kCusparse, ExecutionMode::kDeterministic}},
};

void BenchSpmv(const Stream& stream, const char* label, const HostCsr& m, int reps) {
  DeviceCsr d = Upload(m, stream);
  const std::vector<float> xh = [&] {
    std::vector<float> v(m.cols);
    for (int64_t i = 0; i < m.cols; ++i) v[i] = std::sin(0.001 * static_cast<double>(i)) + 0.25f;
    return v;
  }();
  Dev<float> x = Dev<float>::From(xh, stream), y = Dev<float>::Make(m.rows, stream);
  const double bytes = 8.0 * m.nnz() + 4.0 * (m.rows + 1) + 4.0 * m.cols + 4.0 * m.rows;
  std::vector<float> first;
  double base_ms = 0;
  for (const Variant& v : kVariants) {
    using bench::Clock;
    const auto t0 = Clock::now();
    auto plan = SpmvPlan::Create(d.view, stream, v.options);
    Check(plan.status(), "SpmvPlan::Create");
    Check((*plan)->Apply(x.data(), y.data()), "first apply");  // cuSPARSE sizes its buffer here
    Check(stream.Synchronize(), "sync");
    const double plan_ms = bench::MsSince(t0);
    const double ms = MedianMs(stream, reps, [&] { Check((*plan)->Apply(x.data(), y.data()), "apply"); });
    const std::vector<float> out = y.Download(stream);
    if (first.empty()) {
      first = out;
      base_ms = ms;
    }
    const RowLengthStats& st = (*plan)->row_stats();
    std::printf("| %s | %ld | %ld | %ld | %.2f | %s | %.4g | %.0f | %s | %.4g | %.1e |\n", label,
                static_cast<long>(m.rows), static_cast<long>(m.nnz()), static_cast<long>(st.max_length),
                st.padding_waste, v.name, ms, bytes / (ms * 1e6), Ratio(base_ms, ms).c_str(), plan_ms,
                RelDiff(out, first));
    std::fflush(stdout);
  }
}

void RunSpmv(const Stream& stream, int64_t rows, int64_t length, int64_t max_row, int reps) {
  std::printf("\n## CSR SpMV y = A x (ms, median of %d; GB/s of values + indices + row_ptr + x + y)\n\n", reps);
  std::printf(
      "| matrix | rows | nnz | max row | padding waste at max row | kernel | ms | GB/s | bucketed speedup | "
      "plan + first apply ms | rel diff vs bucketed |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  BenchSpmv(stream, "uniform", RandomCsr(rows, rows, UniformRowLengths(rows, length), 1), reps);
  BenchSpmv(stream, "power-law",
            RandomCsr(rows, rows, PowerLawRowLengths(rows, static_cast<double>(length), max_row, 1.2, 0.02, 2), 3),
            reps);
}

void RunCg(const Stream& stream, int64_t grid, int iterations, int reps) {
  const HostCsr m = Laplacian2d(grid);
  DeviceCsr d = Upload(m, stream);
  std::vector<float> bh(m.rows);
  for (int64_t i = 0; i < m.rows; ++i) bh[i] = std::cos(0.01 * static_cast<double>(i));
  Dev<float> b = Dev<float>::From(bh, stream), x = Dev<float>::Make(m.rows, stream);
  Dev<float> tmp = Dev<float>::Make(m.rows, stream);
  std::printf("\n## CG on the %ld x %ld 2-D Laplacian (%ld unknowns, %ld nnz), %d iterations (median of %d)\n\n",
              static_cast<long>(grid), static_cast<long>(grid), static_cast<long>(m.rows), static_cast<long>(m.nnz()),
              iterations, reps);
  std::printf(
      "| matvec | ms / iteration | matvec ms | rest ms / iteration (2 dots + 3 axpy-type passes) | "
      "final rel residual |\n|---|---|---|---|---|\n");
  for (const Variant& v : kVariants) {
    auto plan = SpmvPlan::Create(d.view, stream, v.options);
    Check(plan.status(), "SpmvPlan::Create");
    Matvec matvec = [&](const float* in, float* out) { return (*plan)->Apply(in, out); };
    CgOptions options;
    options.max_iterations = iterations;
    options.tolerance = 0;
    options.zero_initial_guess = true;
    double residual = 0;
    const double total = MedianMs(stream, reps, [&] {
      auto r = ConjugateGradient(stream, matvec, b.data(), x.data(), m.rows, options);
      Check(r.status(), "cg");
      residual = r->relative_residual;
    });
    const double mv = MedianMs(stream, reps, [&] { Check(matvec(b.data(), tmp.data()), "matvec"); });
    std::printf("| %s | %.4g | %.4g | %.4g | %.2e |\n", v.name, total / iterations, mv, total / iterations - mv,
                residual);
    std::fflush(stdout);
  }
}

#endif  // TESSERA_WITH_CUDA

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
#if TESSERA_WITH_CUDA
  if (!DeviceRegistry::Get().cuda_available()) {
    std::printf("recon_linalg_bench: no GPU (%s)\n", DeviceRegistry::Get().cuda_unavailable_reason().c_str());
    return 0;
  }
  const bool small = absl::GetFlag(FLAGS_small);
  const int reps = small ? 3 : absl::GetFlag(FLAGS_reps);
  std::vector<int> sizes;
  for (const std::string& s : absl::GetFlag(FLAGS_solve_sizes)) {
    int n = 0;
    if (!absl::SimpleAtoi(s, &n) || n < 1 || n > kMaxBatchedSolveSize) Die("bad --solve_sizes entry " + s);
    sizes.push_back(n);
  }
  auto stream = Stream::Create(Backend::kCuda);
  Check(stream.status(), "stream");
  std::printf("# Reconstruction linear algebra: %s\n", DeviceRegistry::Get().Describe().c_str());
  for (const std::string& section : absl::GetFlag(FLAGS_sections)) {
    if (section == "solve") {
      RunSolves(*stream, sizes, small ? 16384 : absl::GetFlag(FLAGS_solve_batch),
                small ? 256 : absl::GetFlag(FLAGS_solve_batch_large), reps);
    } else if (section == "spmv") {
      RunSpmv(*stream, small ? 100000 : absl::GetFlag(FLAGS_spmv_rows), absl::GetFlag(FLAGS_spmv_row_length),
              small ? 10000 : absl::GetFlag(FLAGS_spmv_max_row), reps);
    } else if (section == "cg") {
      RunCg(*stream, small ? 256 : absl::GetFlag(FLAGS_cg_grid), absl::GetFlag(FLAGS_cg_iterations), reps);
    } else {
      Die("unknown section " + section);
    }
  }
  return 0;
#else
  (void)argc;
  (void)argv;
  std::printf("recon_linalg_bench: built without CUDA\n");
  return 0;
#endif
}

}  // namespace
}  // namespace linalg
}  // namespace recon
}  // namespace tessera

int main(int argc, char** argv) { return tessera::recon::linalg::Main(argc, argv); }

// PCA initialisation of a SOM codebook from sparse binary documents.
//
// LeadingComponents: the two leading principal components of the rows (the
// covariance C = X^T X / n - mean mean^T, never formed) by orthogonal power
// iteration: start from two seeded standard-normal vectors (std::mt19937_64,
// the same on every backend), Gram-Schmidt, then `iterations` times
//   z_k = C u_k,  lambda_k = max(0, z_k . u_k),  u <- Gram-Schmidt(z).
// The CUDA version is a port of the same iteration, not another algorithm:
// X u and X^T y are cuSPARSE SpMMs in fp64 (X^T as the CSR of the transpose,
// so the products are deterministic), the centring and the Gram-Schmidt are
// cuBLAS fp64 calls. Both backends therefore follow the same iterates and
// agree to rounding even when the iteration has not converged; they differ
// only in summation order. The returned components have a canonical sign
// (their entry of largest magnitude, lowest index among equals, positive), so
// the codebook does not depend on the start vectors' signs.
//
// FillPcaCodebook: the plane through the corpus mean spanned by the
// components, laid over the grid,
//   w(x, y) = mean + a(x) sqrt(l1) u1 + b(y) sqrt(l2) u2,  a, b in [-1, 1],
// with the first component along the longer map side (PcaNodeCoefficients),
// then the squared norms. Arithmetic is fp64 in the same order on both
// backends without contraction, rounded once to the stored type, so CPU and
// CUDA store the same bits for the same inputs. The CUDA fill writes the
// codebook in place on the device: a 1024 x 1024 map over 19K features (40 GB
// as fp16) never passes through host memory.
#ifndef TESSERA_KERNELS_SOM_PCA_H_
#define TESSERA_KERNELS_SOM_PCA_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/som/types.h"

namespace tessera {
namespace som {

struct PrincipalPlane {
  std::vector<double> u[2];  // unit vectors over the features, orthogonal
  double lambda[2] = {0, 0};  // their Rayleigh quotients (variances), >= 0
};

struct PcaOptions {
  int iterations = 40;  // < 1 means 1
  uint64_t seed = 1;
};

// Components of `rows` (a host CSR). A CUDA stream runs the iteration on its
// device (rows copied there; INVALID_ARGUMENT past 2^31 non-zeros, the 32-bit
// index limit of the cuSPARSE products); a CPU stream runs the reference.
// INVALID_ARGUMENT for no rows or no features.
absl::StatusOr<PrincipalPlane> LeadingComponents(const Stream& stream, const CsrView& rows,
                                                 const PcaOptions& options);

// Per-node coefficients of the two components: c0[i] = a sqrt(l1), c1[i] =
// b sqrt(l2) for node i at cell (x, y), a and b its coordinates in [-1, 1]
// along the longer and the shorter side (a single cell: 0).
void PcaNodeCoefficients(const GridShape& grid, const PrincipalPlane& plane, std::vector<double>* c0,
                         std::vector<double>* c1);

// The fill's inputs, each in the stream's backend memory: mean, u0, u1 over
// the codebook's features; c0, c1 over its nodes.
struct PcaFillInputs {
  const double* mean = nullptr;
  const double* u0 = nullptr;
  const double* u1 = nullptr;
  const double* c0 = nullptr;
  const double* c1 = nullptr;
};

// w[v][i] = mean[v] + c0[i] u0[v] + c1[i] u1[v] (fp64, that order, no fused
// multiply-add), rounded to the codebook's type; then sq_norms
// (ComputeSqNorms). Feature-major codebooks only.
absl::Status FillPcaCodebook(const Stream& stream, const CodebookView& codebook, const PcaFillInputs& inputs);

// Flips each component so that its entry of largest magnitude (the lowest
// index among equals) is positive.
void CanonicalizeSigns(PrincipalPlane* plane);

namespace cpu {
PrincipalPlane LeadingComponents(const CsrView& rows, const PcaOptions& options);
void FillPcaCodebook(const CodebookView& codebook, const PcaFillInputs& inputs);
}  // namespace cpu
namespace cuda {
absl::StatusOr<PrincipalPlane> LeadingComponents(const Stream& stream, const CsrView& rows,
                                                 const PcaOptions& options);
absl::Status FillPcaCodebook(const Stream& stream, const CodebookView& codebook, const PcaFillInputs& inputs);
}  // namespace cuda

// The seeded start vectors (both backends), before Gram-Schmidt.
void PcaStartVectors(int64_t features, uint64_t seed, std::vector<double> u[2]);
// Gram-Schmidt of u[0], u[1] in place (a zero vector stays zero).
void Orthonormalize(std::vector<double> u[2]);

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_KERNELS_SOM_PCA_H_

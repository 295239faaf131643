// Minutia Cylinder-Code (MCC) descriptors, bit-based version (Cappelli,
// Ferrara, Maltoni, "Minutia Cylinder-Code: a new representation and matching
// technique for fingerprint recognition", IEEE TPAMI 32(12), 2010).
//
// For every minutia m = (x, y, theta) a cylinder of radius R around it,
// aligned with theta, is cut into NS x NS cells by ND direction layers. Cell
// (i, j) of layer k (1-based in the paper) is centred at
//   p_ij = (x, y) + DeltaS * Rot(theta) * (i - (NS+1)/2, j - (NS+1)/2),
//   Rot(theta) = [[cos, sin], [-sin, cos]],  DeltaS = 2R/NS,
// with direction dphi_k = -pi + (k - 1/2) DeltaD, DeltaD = 2 pi / ND. Its value
//   C(i,j,k) = Psi( sum_{m_t in N(p_ij)} G_S(|m_t - p_ij|) * G_D(dphi(dphi_k, dphi(theta, theta_t))) )
// sums, over the other minutiae within 3 sigmaS of the cell centre, a spatial
// Gaussian G_S(d) = exp(-d^2 / 2 sigmaS^2) / (sigmaS sqrt(2 pi)) times the
// directional term G_D(a) = integral over [a - DeltaD/2, a + DeltaD/2] of the
// N(0, sigmaD) density. The bit version's Psi is the step v >= muPsi (the
// sigmoid with tauPsi = 400 belongs to the real-valued version and is not
// used). The image coordinates (y down) and counterclockwise-on-screen
// angles of ISO 19794-2 (services/fingerprint/formats/template.h) are exactly the
// frame in which these formulas are rotation invariant.
//
// Validity rules (the paper's; fractions are of the cells whose centres lie
// within R of the minutia, the most a cylinder can have - 208 of the 256 for
// NS = 16):
//   * a cell is valid when its centre is within R of m (in the cylinder's own
//     frame: DeltaS^2 ((i-(NS+1)/2)^2 + (j-(NS+1)/2)^2) <= R^2) and inside the
//     convex hull of all the template's minutiae enlarged by omega (inside the
//     hull, or within omega of its boundary);
//   * a cylinder is valid when at least min_valid_cells (0.75) of its cells
//     are valid and at least min_neighbours (2) other minutiae lie within
//     R + 3 sigmaS of m. Invalid cylinders are dropped.
// Bits of invalid cells are 0; the mask holds the valid cells (one 256-bit
// spatial mask; it is the same for every layer).
//
// Parameters: R = 70, NS = 16, ND = 6, sigmaS = 28/3, sigmaD = 2 pi / 9,
// muPsi = 0.01, omega = 50, minVC = 0.75, minM = 2. NS and ND are fixed at
// compile time (the bit layout and the GPU kernels depend on them).
#ifndef TESSERA_KERNELS_FINGERPRINT_MCC_H_
#define TESSERA_KERNELS_FINGERPRINT_MCC_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/device.h"

namespace tessera {
namespace fingerprint {

inline constexpr int kMccNs = 16;
inline constexpr int kMccNd = 6;
inline constexpr int kMccCellsPerLayer = kMccNs * kMccNs;          // 256
inline constexpr int kMccLayerWords = kMccCellsPerLayer / 64;      // 4 x uint64
inline constexpr int kMccBitWords = kMccNd * kMccLayerWords;       // 24 x uint64 = 1536 bits
inline constexpr int kMccMaskWords = kMccLayerWords;               // 4 x uint64
inline constexpr int kMccMaxMinutiae = 255;                        // per template (ISO/ANSI limit)

// A minutia as the kernels see it: pixel coordinates (x right, y down) and
// the angle in radians, counterclockwise on the displayed image (ISO 19794-2).
struct MinutiaPoint {
  float x = 0;
  float y = 0;
  float theta = 0;
};

struct MccParams {
  double radius = 70.0;                    // R, pixels
  double sigma_s = 28.0 / 3.0;             // spatial sigma, pixels
  double sigma_d = 2.0 * 3.14159265358979323846 / 9.0;  // directional sigma, radians
  double mu_psi = 0.01;                    // bit threshold on the cell sum
  double omega = 50.0;                     // convex hull enlargement, pixels
  double min_valid_cells = 0.75;           // minVC, fraction of the cells inside the circle
  int min_neighbours = 2;                  // minM, other minutiae within R + 3 sigmaS
};

// One cylinder. Cell (i, j) (0-based, i along the minutia direction) of layer
// k is bit (i + 16 j) of the 256-bit layer k: word k*4 + (i + 16 j) / 64.
struct MccCylinder {
  uint64_t bits[kMccBitWords];
  uint64_t mask[kMccMaskWords];
  float x, y, theta;  // the minutia
  int minutia;        // its index in the input
};

struct MccTemplate {
  std::vector<MccCylinder> cylinders;  // valid cylinders, in minutia order
  int num_minutiae = 0;
};

// Rejects more than kMccMaxMinutiae minutiae, non-finite values, negative or
// huge coordinates (|x|, |y| > 1e6) and invalid parameters.
absl::Status ValidateMccInput(const std::vector<MinutiaPoint>& minutiae, const MccParams& params);

// Cells whose centres lie within R of the minutia (the maximum number of
// valid cells of a cylinder).
int MccCellsInCircle(const MccParams& params);

// Descriptors of many templates on `stream`'s backend (CUDA: one thread block
// per minutia, bits identical to the CPU reference; see mcc.cu).
absl::StatusOr<std::vector<MccTemplate>> BuildMccTemplates(const Stream& stream,
                                                           const std::vector<std::vector<MinutiaPoint>>& templates,
                                                           const MccParams& params = {});

namespace cpu {
// The reference (also the CPU backend). Input must be valid.
MccTemplate BuildMccTemplate(const std::vector<MinutiaPoint>& minutiae, const MccParams& params = {});

// Diagnostics for tests: the cell sum v (before thresholding) of cell (i, j,
// k) of minutia `center`'s cylinder, or -1 for an invalid cell.
double MccCellValue(const std::vector<MinutiaPoint>& minutiae, int center, int i, int j, int k,
                    const MccParams& params = {});
}  // namespace cpu

namespace cuda {
absl::StatusOr<std::vector<MccTemplate>> BuildMccTemplates(const Stream& stream,
                                                           const std::vector<std::vector<MinutiaPoint>>& templates,
                                                           const MccParams& params);
}  // namespace cuda

// ---------------------------------------------------------------------------
// Gallery layout for matching many templates (CPU and GPU): structure of
// arrays over all valid cylinders of all templates, cylinders of template t
// at [start[t], start[t+1]) (the fingerprint start-index table). Bits and
// masks are blocked per template and word-major inside a template: word w of
// cylinder j of template t (n_t cylinders) is at
//   bits[kMccBitWords * start[t] + w * n_t + j]   (mask likewise with 4 words)
// so consecutive GPU threads reading consecutive cylinders of a template
// coalesce, and one template's descriptors are contiguous.
struct MccGallery {
  std::vector<int32_t> start{0};   // size num_templates() + 1
  std::vector<uint64_t> bits;      // kMccBitWords per cylinder
  std::vector<uint64_t> mask;      // kMccMaskWords per cylinder
  std::vector<float> x, y, theta;  // per cylinder
  std::vector<uint16_t> bit_count;  // popcount of each cylinder's bits
  std::vector<uint8_t> full_mask;  // 1 when the mask holds every cell of the circle

  int num_templates() const { return static_cast<int>(start.size()) - 1; }
  int num_cylinders() const { return start.back(); }
  int template_size(int t) const { return start[t + 1] - start[t]; }
  int max_template_size() const;
  void Append(const MccTemplate& t, const MccParams& params = {});
  void Reserve(size_t templates, size_t cylinders);
  // Template t back in the per-cylinder form (minutia indices are 0..n-1).
  MccTemplate Get(int t) const;
  size_t bytes() const;
};

// The spatial mask of the cells inside the circle (for MccGallery::full_mask).
void MccCircleMask(const MccParams& params, uint64_t mask[kMccMaskWords]);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_KERNELS_FINGERPRINT_MCC_H_

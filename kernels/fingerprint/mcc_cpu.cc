// CPU reference of the MCC descriptors (also the CPU backend).
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/fingerprint/fp_math.h"
#include "kernels/fingerprint/mcc.h"
#include "kernels/fingerprint/mcc_impl.h"

namespace tessera {
namespace fingerprint {
namespace cpu {

using mcc_internal::MccConstants;

namespace {

struct Neighbour {
  double x, y;
  double gd[kMccNd];  // directional term per layer
};

// The other minutiae within R + 3 sigmaS of `center`, in index order, with
// their directional terms.
std::vector<Neighbour> Neighbours(const std::vector<MinutiaPoint>& m, int center, const MccConstants& c) {
  using fpmath::Mul;
  std::vector<Neighbour> out;
  const double x = m[center].x, y = m[center].y, theta = m[center].theta;
  for (int t = 0; t < static_cast<int>(m.size()); ++t) {
    if (t == center) continue;
    const double dx = static_cast<double>(m[t].x) - x, dy = static_cast<double>(m[t].y) - y;
    if (Mul(dx, dx) + Mul(dy, dy) > c.neighbourhood2) continue;
    Neighbour n;
    n.x = m[t].x;
    n.y = m[t].y;
    const double relative = fpmath::AngleDiff(theta, static_cast<double>(m[t].theta));
    for (int k = 0; k < kMccNd; ++k) {
      n.gd[k] = mcc_internal::DirectionalTerm(fpmath::AngleDiff(mcc_internal::LayerAngle(k, c), relative), c);
    }
    out.push_back(n);
  }
  return out;
}

// Cell sums of cell (i, j) for every layer; false when the cell is invalid.
bool CellSums(const MinutiaPoint& center, double cs, double sn, const std::vector<Neighbour>& nb,
              const std::vector<double>& hx, const std::vector<double>& hy, int i, int j, const MccConstants& c,
              double v[kMccNd]) {
  using fpmath::Mul;
  if (!mcc_internal::CellInCircle(i, j, c)) return false;
  double px, py;
  mcc_internal::CellCenter(center.x, center.y, cs, sn, i, j, c, &px, &py);
  if (!mcc_internal::InsideEnlargedHull(px, py, hx.data(), hy.data(), static_cast<int>(hx.size()), c)) return false;
  for (int k = 0; k < kMccNd; ++k) v[k] = 0.0;
  for (const Neighbour& n : nb) {
    const double dx = px - n.x, dy = py - n.y;
    const double d2 = Mul(dx, dx) + Mul(dy, dy);
    if (d2 > c.neighbour2) continue;
    const double gs = mcc_internal::SpatialTerm(d2, c);
    for (int k = 0; k < kMccNd; ++k) v[k] = v[k] + Mul(gs, n.gd[k]);
  }
  return true;
}

}  // namespace

MccTemplate BuildMccTemplate(const std::vector<MinutiaPoint>& input, const MccParams& params) {
  const std::vector<MinutiaPoint> minutiae = mcc_internal::NormalizedMinutiae(input);
  const MccConstants c = mcc_internal::MakeMccConstants(params);
  MccTemplate out;
  out.num_minutiae = static_cast<int>(minutiae.size());
  std::vector<double> hx, hy;
  mcc_internal::ConvexHull(minutiae, &hx, &hy);
  for (int m = 0; m < static_cast<int>(minutiae.size()); ++m) {
    const std::vector<Neighbour> nb = Neighbours(minutiae, m, c);
    if (static_cast<int>(nb.size()) < c.min_neighbours) continue;
    const double theta = minutiae[m].theta;
    const double cs = std::cos(theta), sn = std::sin(theta);
    MccCylinder cyl;
    std::memset(cyl.bits, 0, sizeof(cyl.bits));
    std::memset(cyl.mask, 0, sizeof(cyl.mask));
    int valid_cells = 0;
    for (int j = 0; j < kMccNs; ++j) {
      for (int i = 0; i < kMccNs; ++i) {
        double v[kMccNd];
        if (!CellSums(minutiae[m], cs, sn, nb, hx, hy, i, j, c, v)) continue;
        ++valid_cells;
        const int bit = i + kMccNs * j;
        const uint64_t one = uint64_t{1} << (bit % 64);
        cyl.mask[bit / 64] |= one;
        for (int k = 0; k < kMccNd; ++k) {
          if (v[k] >= c.mu_psi) cyl.bits[k * kMccLayerWords + bit / 64] |= one;
        }
      }
    }
    if (valid_cells < c.min_valid_cells) continue;
    cyl.x = minutiae[m].x;
    cyl.y = minutiae[m].y;
    cyl.theta = minutiae[m].theta;
    cyl.minutia = m;
    out.cylinders.push_back(cyl);
  }
  return out;
}

double MccCellValue(const std::vector<MinutiaPoint>& input, int center, int i, int j, int k,
                    const MccParams& params) {
  const std::vector<MinutiaPoint> minutiae = mcc_internal::NormalizedMinutiae(input);
  const MccConstants c = mcc_internal::MakeMccConstants(params);
  std::vector<double> hx, hy;
  mcc_internal::ConvexHull(minutiae, &hx, &hy);
  const std::vector<Neighbour> nb = Neighbours(minutiae, center, c);
  const double theta = minutiae[center].theta;
  double v[kMccNd];
  if (!CellSums(minutiae[center], std::cos(theta), std::sin(theta), nb, hx, hy, i, j, c, v)) return -1.0;
  return v[k];
}

}  // namespace cpu
}  // namespace fingerprint
}  // namespace tessera

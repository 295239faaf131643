// CPU reference of the SENSE steps: sums over coils in double, in coil order.
#include <complex>

#include "common/parallel.h"
#include "kernels/reconstruction/mri/sense_geometry.h"
#include "kernels/reconstruction/mri/sense_unfold.h"

namespace tessera {
namespace recon {
namespace mri {
namespace cpu {
namespace {

FoldIndex IndexOf(const SenseShape& shape) {
  return {shape.nx, (shape.axis == 0 ? shape.nx : shape.ny) / shape.reduction, shape.axis};
}

}  // namespace

void FormSenseNormalEquations(const SenseShape& shape, const std::complex<float>* maps,
                              const std::complex<float>* aliased, std::complex<float>* normal,
                              std::complex<float>* rhs) {
  const int rr = shape.reduction;
  const int64_t batch = shape.aliased_pixels(), npix = shape.nx * shape.ny;
  const FoldIndex fold = IndexOf(shape);
  ParallelFor(batch, [&](int64_t begin, int64_t end, int) {
    std::complex<double> a[kMaxSenseReduction * kMaxSenseReduction], b[kMaxSenseReduction];
    std::complex<double> s[kMaxSenseReduction];
    for (int64_t p = begin; p < end; ++p) {
      for (int k = 0; k < rr * rr; ++k) a[k] = 0;
      for (int k = 0; k < rr; ++k) b[k] = 0;
      for (int c = 0; c < shape.coils; ++c) {
        for (int r = 0; r < rr; ++r) s[r] = maps[fold.Pixel(p, r) + npix * c];
        const std::complex<double> y = aliased[p + batch * c];
        for (int col = 0; col < rr; ++col) {
          for (int row = col; row < rr; ++row) a[row + rr * col] += std::conj(s[row]) * s[col];
          b[col] += std::conj(s[col]) * y;
        }
      }
      for (int col = 0; col < rr; ++col) {
        for (int row = col; row < rr; ++row) normal[p * rr * rr + row + rr * col] = std::complex<float>(a[row + rr * col]);
        rhs[p * rr + col] = std::complex<float>(b[col]);
      }
    }
  }, 1024);
}

void ScatterSenseSolution(const SenseShape& shape, const std::complex<float>* solution, std::complex<float>* image) {
  const int64_t batch = shape.aliased_pixels();
  const FoldIndex fold = IndexOf(shape);
  for (int64_t p = 0; p < batch; ++p) {
    for (int r = 0; r < shape.reduction; ++r) image[fold.Pixel(p, r)] = solution[p * shape.reduction + r];
  }
}

void SenseFold(const SenseShape& shape, const std::complex<float>* maps, const std::complex<float>* image,
               std::complex<float>* aliased) {
  const int64_t batch = shape.aliased_pixels(), npix = shape.nx * shape.ny;
  const FoldIndex fold = IndexOf(shape);
  for (int c = 0; c < shape.coils; ++c) {
    for (int64_t p = 0; p < batch; ++p) {
      std::complex<double> sum = 0;
      for (int r = 0; r < shape.reduction; ++r) {
        const int64_t q = fold.Pixel(p, r);
        sum += std::complex<double>(maps[q + npix * c]) * std::complex<double>(image[q]);
      }
      aliased[p + batch * c] = std::complex<float>(sum);
    }
  }
}

}  // namespace cpu
}  // namespace mri
}  // namespace recon
}  // namespace tessera

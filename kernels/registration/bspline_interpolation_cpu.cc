// CPU reference of bspline_interpolation.h: ITK's prefilter and evaluation.
#include <cmath>
#include <vector>

#include "common/parallel.h"
#include "common/status.h"
#include "kernels/registration/bspline_interpolation.h"

namespace tessera {
namespace registration {
namespace {

constexpr double kPole = -0.26794919243112270;  // sqrt(3) - 2
constexpr double kTolerance = 1e-10;             // ITK's m_Tolerance

// ITK's BSplineDecompositionImageFilter on one line (length n > 1), in place.
void DecomposeLine(double* c, int64_t n) {
  const double z = kPole;
  const double gain = (1.0 - z) * (1.0 - 1.0 / z);
  for (int64_t i = 0; i < n; ++i) c[i] *= gain;
  // Causal initialisation (mirror boundary).
  const int64_t horizon = static_cast<int64_t>(std::ceil(std::log(kTolerance) / std::log(std::fabs(z))));
  if (horizon < n) {
    double zn = z, sum = c[0];
    for (int64_t i = 1; i < horizon; ++i) {
      sum += zn * c[i];
      zn *= z;
    }
    c[0] = sum;
  } else {
    double zn = z;
    const double iz = 1.0 / z;
    double z2n = std::pow(z, static_cast<double>(n - 1));
    double sum = c[0] + z2n * c[n - 1];
    z2n *= z2n * iz;
    for (int64_t i = 1; i <= n - 2; ++i) {
      sum += (zn + z2n) * c[i];
      zn *= z;
      z2n *= iz;
    }
    c[0] = sum / (1.0 - zn * zn);
  }
  for (int64_t i = 1; i < n; ++i) c[i] += z * c[i - 1];
  // Anti-causal initialisation and pass.
  c[n - 1] = (z / (z * z - 1.0)) * (z * c[n - 2] + c[n - 1]);
  for (int64_t i = n - 2; i >= 0; --i) c[i] = z * (c[i + 1] - c[i]);
}

}  // namespace

absl::StatusOr<NDArray> BsplineCoefficients(const NDArray& image) {
  if (image.rank() != 3 || image.dtype() != DType::kFloat32 || image.memory_kind() == MemoryKind::kDevice) {
    return absl::InvalidArgumentError("B-spline coefficients need a float32 (nx, ny, nz) host image");
  }
  const int64_t n[3] = {image.dim(0), image.dim(1), image.dim(2)};
  const int64_t voxels = n[0] * n[1] * n[2];
  // Double while filtering (as ITK's double coefficient image), float out.
  std::vector<double> c(image.data<float>(), image.data<float>() + voxels);
  const int64_t stride[3] = {1, n[0], n[0] * n[1]};
  for (int axis = 0; axis < 3; ++axis) {
    const int64_t len = n[axis];
    if (len < 2) continue;
    const int64_t lines = voxels / len;
    const int a = axis == 0 ? 1 : 0, b = axis == 2 ? 1 : 2;  // the other two axes
    ParallelFor(lines, [&](int64_t begin, int64_t end, int) {
      std::vector<double> line(len);
      for (int64_t l = begin; l < end; ++l) {
        const int64_t ia = l % n[a], ib = l / n[a];
        const int64_t base = ia * stride[a] + ib * stride[b];
        for (int64_t i = 0; i < len; ++i) line[i] = c[base + i * stride[axis]];
        DecomposeLine(line.data(), len);
        for (int64_t i = 0; i < len; ++i) c[base + i * stride[axis]] = line[i];
      }
    });
  }
  TESSERA_ASSIGN_OR_RETURN(NDArray out, NDArray::Allocate(image.shape(), DType::kFloat32));
  for (int64_t i = 0; i < voxels; ++i) out.data<float>()[i] = static_cast<float>(c[i]);
  return out;
}

absl::Status BsplineSample(const Stream& stream, const BsplineSampleArgs& args, float* out) {
  if (args.coefficients == nullptr || args.positions == nullptr || out == nullptr || args.image_dims.size() <= 0) {
    return absl::InvalidArgumentError("BsplineSample: null pointer or empty image");
  }
  if (stream.backend() == Backend::kCpu) {
    cpu::BsplineSample(args, out);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::BsplineSample(stream, args, out);
#else
  return absl::FailedPreconditionError("CUDA stream in a build without CUDA");
#endif
}

namespace cpu {

double BsplineValue(const float* coefficients, Dims3 dims, double x, double y, double z) {
  const BsplineTaps tx = BsplineAxisTaps(x, dims.nx), ty = BsplineAxisTaps(y, dims.ny), tz = BsplineAxisTaps(z, dims.nz);
  double sum = 0;
  for (int c = 0; c < 4; ++c) {
    for (int b = 0; b < 4; ++b) {
      const double wzy = tz.weight[c] * ty.weight[b];
      const float* row = coefficients + dims.nx * (ty.index[b] + dims.ny * tz.index[c]);
      for (int a = 0; a < 4; ++a) sum += wzy * tx.weight[a] * row[tx.index[a]];
    }
  }
  return sum;
}

void BsplineSample(const BsplineSampleArgs& args, float* out) {
  const Dims3 d = args.image_dims;
  ParallelFor(args.count, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      const double x = args.positions[i], y = args.positions[args.count + i], z = args.positions[2 * args.count + i];
      out[i] = InsideBuffer(x, d.nx) && InsideBuffer(y, d.ny) && InsideBuffer(z, d.nz)
                   ? static_cast<float>(BsplineValue(args.coefficients, d, x, y, z))
                   : args.default_value;
    }
  });
}

}  // namespace cpu
}  // namespace registration
}  // namespace tessera

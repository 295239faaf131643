// CPU reference of the block average, backend dispatch, and the finer grid.
#include "kernels/reconstruction/grid_subdivision.h"

#include "absl/strings/str_cat.h"

namespace tessera {
namespace recon {
namespace {

absl::Status CheckShape(const BlockShape& s) {
  if (s.nx < 0 || s.ny < 0 || s.nz < 0 || s.fx < 1 || s.fy < 1 || s.fz < 1) {
    return absl::InvalidArgumentError(absl::StrCat("BlockAverage: bad shape ", s.nx, "x", s.ny, "x", s.nz,
                                                   " with factors ", s.fx, ",", s.fy, ",", s.fz));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CtGeometry> SubdividedGeometry(const CtGeometry& geometry, int factor) {
  if (factor < 1 || factor > kMaxVoxelSubdivision) {
    return absl::InvalidArgumentError(
        absl::StrCat("ct.voxel_subdivision must be in [1, ", kMaxVoxelSubdivision, "], got ", factor));
  }
  CtGeometry fine = geometry;
  fine.volume.nx *= factor;
  fine.volume.ny *= factor;
  if (!geometry.projection.is_2d) fine.volume.nz *= factor;
  if (absl::Status s = Validate(fine); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ct.voxel_subdivision ", factor, " turns vol_geom ", geometry.volume.nx, "x", geometry.volume.ny, "x",
        geometry.volume.nz, " into ", fine.volume.nx, "x", fine.volume.ny, "x", fine.volume.nz,
        " voxels, which the reconstruction refuses: ", s.message()));
  }
  return fine;
}

BlockShape SubdivisionBlocks(const CtGeometry& geometry, int factor) {
  BlockShape s;
  s.nx = geometry.volume.nx;
  s.ny = geometry.volume.ny;
  s.nz = geometry.volume.nz;
  s.fx = s.fy = factor;
  s.fz = geometry.projection.is_2d ? 1 : factor;
  return s;
}

absl::Status BlockAverage(const Stream& stream, const float* fine, const BlockShape& shape, float* out) {
  if (absl::Status s = CheckShape(shape); !s.ok()) return s;
  if (stream.backend() == Backend::kCuda) {
#if TESSERA_WITH_CUDA
    return cuda::BlockAverage(stream, fine, shape, out);
#else
    return absl::FailedPreconditionError(
        absl::StrCat("BlockAverage: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
  }
  const int64_t fnx = shape.nx * shape.fx, fny = shape.ny * shape.fy;
  const double count = static_cast<double>(shape.fx) * shape.fy * shape.fz;
  for (int64_t k = 0; k < shape.nz; ++k) {
    for (int64_t j = 0; j < shape.ny; ++j) {
      for (int64_t i = 0; i < shape.nx; ++i) {
        double sum = 0;
        for (int c = 0; c < shape.fz; ++c) {
          for (int b = 0; b < shape.fy; ++b) {
            const float* row = fine + ((k * shape.fz + c) * fny + j * shape.fy + b) * fnx + i * shape.fx;
            for (int a = 0; a < shape.fx; ++a) sum += row[a];
          }
        }
        out[(k * shape.ny + j) * shape.nx + i] = static_cast<float>(sum / count);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace recon
}  // namespace tessera

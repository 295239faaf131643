#include "services/reconstruction/formats/ultrasound_image.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/nifti_io.h"
#include "common/status.h"
#include "common/volume.h"
#include "kernels/reconstruction/ultrasound/bmode.h"

namespace tessera::recon::formats {
namespace {

absl::Status Check(const std::vector<std::complex<float>>& image, const ultrasound::ImageGrid& grid,
                   double dynamic_range_db, bool range_required) {
  TESSERA_RETURN_IF_ERROR(ultrasound::ValidateImageGrid(grid));
  if (static_cast<int64_t>(image.size()) != grid.size()) {
    return absl::InvalidArgumentError(absl::StrCat("b-mode image: ", image.size(), " pixels for a ", grid.nx, " x ",
                                                   grid.nz, " grid"));
  }
  if (!std::isfinite(dynamic_range_db) || dynamic_range_db < 0 || (range_required && dynamic_range_db == 0)) {
    return absl::InvalidArgumentError(absl::StrCat("b-mode image: dynamic_range_db = ", dynamic_range_db,
                                                   range_required ? " (must be > 0)" : " (must be >= 0)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteBModeNifti(const std::vector<std::complex<float>>& image, const ultrasound::ImageGrid& grid,
                             double dynamic_range_db, const std::string& path) {
  TESSERA_RETURN_IF_ERROR(Check(image, grid, dynamic_range_db, /*range_required=*/false));
  TESSERA_ASSIGN_OR_RETURN(NDArray data, NDArray::Allocate({grid.nx, grid.nz, 1}, DType::kFloat32));
  float* out = data.data<float>();
  if (dynamic_range_db > 0) {
    const std::vector<float> db = ultrasound::LogCompress(image, dynamic_range_db);
    std::memcpy(out, db.data(), db.size() * sizeof(float));
  } else {
    for (size_t i = 0; i < image.size(); ++i) out[i] = std::abs(image[i]);
  }
  Volume volume;
  volume.data = data;
  volume.geometry.spacing = {grid.dx * 1e3, grid.dz * 1e3, 1.0};
  volume.geometry.origin = {grid.x0 * 1e3, 0.0, -grid.z0 * 1e3};
  // Columns: i -> +x (R), j -> -z (inferior, depth), k -> +y (A).
  volume.geometry.direction = {1, 0, 0, 0, 0, 1, 0, -1, 0};
  volume.description = dynamic_range_db > 0 ? absl::StrCat("tessera b-mode dB, range ", dynamic_range_db)
                                            : "tessera b-mode envelope";
  return WriteNifti(volume, path);
}

absl::StatusOr<Image8> RenderBMode(const std::vector<std::complex<float>>& image, const ultrasound::ImageGrid& grid,
                                   double dynamic_range_db) {
  TESSERA_RETURN_IF_ERROR(Check(image, grid, dynamic_range_db, /*range_required=*/true));
  const std::vector<float> db = ultrasound::LogCompress(image, dynamic_range_db);
  Image8 png = Image8::Make(grid.nx, grid.nz, 1);
  for (int iz = 0; iz < grid.nz; ++iz) {
    for (int ix = 0; ix < grid.nx; ++ix) {
      const double v = 255.0 * (1.0 + db[ix + static_cast<size_t>(grid.nx) * iz] / dynamic_range_db);
      png.at(ix, iz) = static_cast<uint8_t>(std::lround(std::clamp(v, 0.0, 255.0)));
    }
  }
  return png;
}

absl::Status WriteBModePng(const std::vector<std::complex<float>>& image, const ultrasound::ImageGrid& grid,
                           double dynamic_range_db, const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(Image8 png, RenderBMode(image, grid, dynamic_range_db));
  return WritePng(png, path);
}

}  // namespace tessera::recon::formats

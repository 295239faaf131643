#include "services/reconstruction/pet_corrections.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "services/reconstruction/formats/recon_nifti.h"

namespace tessera::reconstruction {
namespace {

// A correction sinogram as float32 (cols, rows, views), checked by the reader
// for shape, finiteness and (additive terms) sign.
absl::StatusOr<NDArray> ReadCorrection(const std::string& path, const recon::ProjectionGeometry& projection,
                                       const char* field, const char* what, bool counts) {
  recon::formats::SinogramOptions options;
  options.tof_bins = 0;  // the files have no TOF axis
  options.counts = counts;
  options.what = what;
  absl::StatusOr<NDArray> data = recon::formats::ReadSinogram(path, projection, options);
  if (!data.ok()) return Annotate(data.status(), field);
  return data;
}

std::string BinText(const recon::ProjectionGeometry& p, int64_t index) {
  const int64_t col = index % p.det_cols, row = (index / p.det_cols) % p.det_rows;
  const int64_t view = index / (p.det_cols * p.det_rows);
  std::string out = absl::StrCat("bin ", index, " (col ", col);
  if (!p.is_2d || p.det_rows != 1) absl::StrAppend(&out, ", row ", row);
  absl::StrAppend(&out, ", projection ", view, ")");
  return out;
}

}  // namespace

absl::StatusOr<PetCorrections> ReadPetCorrections(const PetSpec& spec, const recon::pet::PetGeometry& geometry) {
  const recon::ProjectionGeometry& projection = geometry.ct.projection;
  const int64_t lors = geometry.num_lors();
  PetCorrections out;
  if (!spec.normalization_path.empty()) {
    TESSERA_ASSIGN_OR_RETURN(NDArray n, ReadCorrection(spec.normalization_path, projection, "pet.normalization",
                                                       "normalization", false));
    const float* v = n.data<float>();
    for (int64_t i = 0; i < lors; ++i) {
      if (!(v[i] > 0)) {
        return absl::InvalidArgumentError(absl::StrCat("pet.normalization: ", spec.normalization_path, ": value ",
                                                       v[i], " at ", BinText(projection, i),
                                                       "; efficiencies must be > 0 (1 = ideal)"));
      }
    }
    out.efficiency.assign(v, v + lors);
  }
  std::vector<float> additive;
  for (const auto& [path, field, what] : {std::make_tuple(&spec.randoms_path, "pet.randoms", "randoms"),
                                          std::make_tuple(&spec.scatter_path, "pet.scatter", "scatter")}) {
    if (path->empty()) continue;
    TESSERA_ASSIGN_OR_RETURN(NDArray term, ReadCorrection(*path, projection, field, what, true));
    if (additive.empty()) additive.assign(lors, 0.0f);
    const float* v = term.data<float>();
    for (int64_t i = 0; i < lors; ++i) additive[i] += v[i];
  }
  if (additive.empty()) return out;
  // Spread evenly over the TOF bins: element (c, r, k, p) of the TOF layout.
  const int64_t bins = geometry.tof.num_bins, det = geometry.cols() * geometry.rows();
  TESSERA_ASSIGN_OR_RETURN(out.background, NDArray::Allocate({geometry.sinogram_size()}, DType::kFloat32));
  float* background = out.background.data<float>();
  const float share = 1.0f / static_cast<float>(bins);
  for (int64_t view = 0; view < geometry.num_views(); ++view) {
    for (int64_t k = 0; k < bins; ++k) {
      for (int64_t l = 0; l < det; ++l) {
        background[l + det * (k + bins * view)] = additive[l + det * view] * share;
      }
    }
  }
  return out;
}

}  // namespace tessera::reconstruction

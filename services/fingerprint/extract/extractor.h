// Minutiae from a fingerprint image (CPU reference): normalize, estimate the
// ridge field (ridge_field.h), enhance with oriented Gabor filters
// (gabor_enhance.h), binarize, thin (skeleton.h), find ridge endings and
// bifurcations by crossing number, and drop the false ones a skeleton of a
// real print always has: near the print's border, spurs and short ridges,
// broken ridges, bridges, holes and clusters. Each minutia gets a quality
// from the ridge clarity around it.
//
// The image must be at 500 ppi (image_decode.h ResampleTo500Ppi): block
// sizes and wavelengths are in pixels at that resolution. Deterministic.
#ifndef TESSERA_SERVICES_FINGERPRINT_EXTRACT_EXTRACTOR_H_
#define TESSERA_SERVICES_FINGERPRINT_EXTRACT_EXTRACTOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "services/fingerprint/extract/float_image.h"
#include "services/fingerprint/extract/gabor_enhance.h"
#include "services/fingerprint/extract/ridge_field.h"
#include "services/fingerprint/formats/template.h"
#include "services/fingerprint/image/gray_image.h"

namespace tessera {
namespace fingerprint {

struct ExtractOptions {
  RidgeFieldOptions field;
  GaborOptions gabor;
  int border_margin = 12;     // pixels: minutiae nearer the print's edge are dropped
  int trace_steps = 12;       // pixels walked to measure a minutia's direction
  float spur_length = 1.3f;   // wavelengths: shorter ridge pieces between minutiae are false
  float break_distance = 1.6f;  // wavelengths: two endings facing each other this close are a break
  // wavelengths: ... and no further than this to the side of each other's
  // ridge line (farther apart sideways they end two neighbouring ridges);
  // 0 = no limit.
  float break_offset = 0.5f;
  // wavelengths: any two minutiae this close are dropped as one defect. 0
  // (off): bridges, holes and spurs already fail the short-branch test, and
  // the distance alone also dropped real pairs on neighbouring ridges.
  float bridge_distance = 0.0f;
  float cluster_radius = 1.5f;  // wavelengths
  int max_minutiae = 80;      // best by quality
  int min_quality = 10;       // 0-100
};

struct Extraction {
  Template view;           // width/height of the image, 197 px/cm, minutiae
  RidgeField field;
  FloatImage enhanced;     // the Gabor response
  std::vector<uint8_t> skeleton;
};

// INVALID_ARGUMENT for an image smaller than 32 x 32; an image with no print
// gives a template with no minutiae (the caller decides what that means).
absl::StatusOr<Extraction> ExtractMinutiae(const GrayImage& image, const ExtractOptions& options = {});

// The checks ExtractMinutiae makes of its image (INVALID_ARGUMENT as above).
absl::Status CheckExtractable(const GrayImage& image);

// The sparse part of ExtractMinutiae, shared by the CPU path and the batched
// CUDA one (extract_cuda.h): from `extraction`'s field, enhanced image (its
// width and height are the image's) and skeleton, fills extraction.view with
// the minutiae (candidates by crossing number, the false ones dropped).
void MinutiaeFromSkeleton(const ExtractOptions& options, Extraction& extraction);

// Zero mean, unit variance (a constant image stays 0).
FloatImage NormalizeImage(const GrayImage& image);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_EXTRACT_EXTRACTOR_H_

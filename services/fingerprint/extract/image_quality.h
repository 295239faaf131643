// A 0-100 quality score of a fingerprint image, from what the extraction
// already measured (NFIQ 2 uses features of the same kinds):
//   area       foreground area in mm^2 (a plain impression has 150-300);
//   certainty  mean orientation coherence over the foreground (clean,
//              parallel ridges near 1; smudges and scars low);
//   clarity    mean ridge power (how clearly one ridge period stands out
//              across the ridges, ridge_field.h), scaled to 0..1;
//   minutiae   the count of reliable minutiae (quality >= 40), up to 30.
// score = 100 * sqrt(area') * (0.35 certainty' + 0.4 clarity' + 0.25 minutiae'),
// each term clamped to 0..1 (area' = area / 120 mm^2, certainty' from 0.3..0.8,
// clarity' = clarity / 0.35 , minutiae' = count / 30). What it predicts is
// measured, not assumed: bench/fingerprint_extract_eval reports the error
// against the share of the lowest-quality images rejected.
#ifndef TESSERA_SERVICES_FINGERPRINT_EXTRACT_IMAGE_QUALITY_H_
#define TESSERA_SERVICES_FINGERPRINT_EXTRACT_IMAGE_QUALITY_H_

#include "services/fingerprint/extract/extractor.h"

namespace tessera {
namespace fingerprint {

struct ImageQuality {
  int score = 0;  // 0-100
  double area_mm2 = 0;
  double certainty = 0;
  double clarity = 0;
  int reliable_minutiae = 0;
};

ImageQuality AssessImageQuality(const Extraction& extraction);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_EXTRACT_IMAGE_QUALITY_H_

// A match chart for examiners: the probe and the candidate side by side
// (their images, or blank canvases sized to the minutiae), every minutia
// marked as the extraction overlay marks it (minutiae_overlay.h: red ridge
// endings, green bifurcations, a tail along the direction), the paired
// minutiae ringed and joined by a line in the pair's own colour with the
// pair's number beside both ends, and a caption strip with the score, the
// pair count and the residual of the pairs' rigid alignment.
//
// It draws what it is given: the pairs come from the matcher
// (services/fingerprint/search/match_explain.h ExplainMatch; the extract
// layer sits above search and does not call it).
#ifndef TESSERA_SERVICES_FINGERPRINT_EXTRACT_MATCH_CHART_H_
#define TESSERA_SERVICES_FINGERPRINT_EXTRACT_MATCH_CHART_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/png_io.h"
#include "services/fingerprint/formats/template.h"

namespace tessera {
namespace fingerprint {

// One side of the chart.
struct ChartPrint {
  std::string label;  // drawn above the print ("PROBE 101_1.TIF"; 5 x 7 font, upper case)
  // The print, gray (1 channel), in the minutiae's pixel frame (e.g. the
  // enhanced image of the extraction: minutiae_overlay.h EnhancedImageGray).
  // Empty (width 0): a blank canvas reaching 16 px past the farthest minutia.
  Image8 image;
  std::vector<Minutia> minutiae;  // pixels of `image`, ISO angles
};

// Pair k (numbered k + 1 on the chart): indices into the two minutiae lists.
struct ChartPair {
  int probe = 0;
  int candidate = 0;
};

struct MatchChart {
  ChartPrint probe;
  ChartPrint candidate;
  std::vector<ChartPair> pairs;
  // The caption. rms_residual and rotation are shown only when aligned.
  float score = 0;
  bool aligned = false;
  double rms_residual = 0;  // pixels
  double rotation = 0;      // radians (shown in degrees)
};

struct MatchChartOptions {
  int scale = 1;  // image pixels -> chart pixels, 1-4
};

// RGB. INVALID_ARGUMENT for a scale outside 1-4, an image that is not gray
// or whose pixel buffer does not match its size, a pair index outside its
// minutiae list, and a chart over 64 Mpixel.
absl::StatusOr<Image8> DrawMatchChart(const MatchChart& chart, const MatchChartOptions& options = {});

// DrawMatchChart encoded as PNG bytes (common/png_io.h EncodePngBytes).
absl::StatusOr<std::string> MatchChartPng(const MatchChart& chart, const MatchChartOptions& options = {});

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_EXTRACT_MATCH_CHART_H_

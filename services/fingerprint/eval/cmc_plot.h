// Cumulative match characteristic (CMC) curves of identification searches
// and their rendering as a PNG chart (common/png_io): white background, axes,
// a light grid (every 10 % of the hit rate; ranks 1, 10, 20, ...), tick
// marks, one coloured polyline per curve and a legend of colour swatches in
// curve order (there is no text: the caller reports the labels).
#ifndef TESSERA_SERVICES_FINGERPRINT_EVAL_CMC_PLOT_H_
#define TESSERA_SERVICES_FINGERPRINT_EVAL_CMC_PLOT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/png_io.h"

namespace tessera {
namespace fingerprint {

// rates[r - 1] = share of probes whose rank is <= r, for r = 1..max_rank.
// A rank <= 0 means "not found within the searched ranks".
std::vector<double> ComputeCmc(const std::vector<int>& ranks, int max_rank);

struct CmcCurve {
  std::string label;
  std::vector<double> rates;  // as ComputeCmc, each in [0, 1]
};

struct CmcPlotOptions {
  int width = 640;
  int height = 480;
  int max_rank = 100;  // x axis: ranks 1..max_rank
  double y_min = 0;    // y axis: hit rates y_min..1 (zoom for accurate matchers)
};

// The colour of curve i (RGB), so reports can name them.
void CmcCurveColor(int i, uint8_t rgb[3]);
const char* CmcCurveColorName(int i);

// INVALID_ARGUMENT for a chart under 120 x 100 pixels, max_rank < 2, y_min
// outside [0, 1), no curves, or rates outside [0, 1] / not finite. Parts of
// curves below y_min are drawn on the bottom axis.
absl::StatusOr<Image8> RenderCmcPlot(const std::vector<CmcCurve>& curves, const CmcPlotOptions& options = {});
absl::Status WriteCmcPlot(const std::vector<CmcCurve>& curves, const std::string& path,
                          const CmcPlotOptions& options = {});

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_EVAL_CMC_PLOT_H_

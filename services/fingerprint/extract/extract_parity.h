// How far two extractions of one image (the CUDA path's and the CPU
// reference's) are apart, stage by stage, and the tolerances the CUDA path
// is held to (extract_cuda_test on synthetic prints, the FVC2002 summary of
// bench/fingerprint_extract_gpu_bench).
//
// Why these tolerances: the CUDA kernels repeat the reference's float
// arithmetic exactly (extract_cuda.h) except atan2/cos/sin of field angles,
// within an ulp of glibc's. So coherence, contrast and the foreground are
// equal; orientations differ by an ulp or so; a wavelength or a Gabor kernel
// choice can flip where the reference sits on a tie or a rounding boundary,
// which changes the response of the pixels around it and, thinning being
// discrete, a few skeleton pixels there - and then a minutia may appear,
// vanish or move by a pixel.
#ifndef TESSERA_SERVICES_FINGERPRINT_EXTRACT_EXTRACT_PARITY_H_
#define TESSERA_SERVICES_FINGERPRINT_EXTRACT_EXTRACT_PARITY_H_

#include <cstdint>
#include <string>

#include "services/fingerprint/extract/extractor.h"

namespace tessera {
namespace fingerprint {

struct ExtractParityTolerances {
  double orientation_rad = 1e-5;          // max |diff| of block orientations, mod pi
  double block_value = 1e-5;              // max |diff| of coherence and contrast (relative to 1 + |value|)
  int64_t foreground_blocks = 0;          // blocks in one mask and not the other
  double wavelength_block_share = 0.01;   // blocks whose wavelength differs by > 1e-4
  double enhanced_abs = 1e-3;             // a pixel of the Gabor response "differs" beyond this
  double enhanced_pixel_share = 0.002;    // share of pixels that may differ
  double skeleton_share = 0.01;           // differing pixels / skeleton pixels (either)
  double minutia_px = 3;                  // a minutia matches one within this distance
  double minutia_deg = 10;                // and this angle
  double unmatched_share = 0.05;          // unmatched minutiae (either side) / CPU count, plus one
};

struct ExtractParity {
  int64_t blocks = 0;
  double orientation_max = 0;
  double coherence_max = 0;
  double contrast_max = 0;
  int64_t foreground_diff = 0;
  int64_t wavelength_diff = 0;  // blocks
  double wavelength_max = 0;
  double ridge_power_max = 0;
  int64_t pixels = 0;
  double enhanced_max = 0;
  int64_t enhanced_diff = 0;    // pixels beyond enhanced_abs
  int64_t skeleton_pixels = 0;  // set in either
  int64_t skeleton_diff = 0;
  int cpu_minutiae = 0;
  int gpu_minutiae = 0;
  int matched = 0;              // greedy, nearest first, within the tolerances

  // Sums the counts, maxes the maxima (for a whole data set).
  void Add(const ExtractParity& other);
  std::string Describe() const;
};

// `gpu` and `cpu` of the same image; `gpu.enhanced` may have no values
// (then the response is not compared).
ExtractParity CompareExtractions(const Extraction& gpu, const Extraction& cpu,
                                 const ExtractParityTolerances& tolerances = {});

// Empty when within the tolerances, else what is not.
std::string ParityViolations(const ExtractParity& parity, const ExtractParityTolerances& tolerances = {});

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_EXTRACT_EXTRACT_PARITY_H_

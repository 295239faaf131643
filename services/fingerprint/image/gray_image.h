// An 8-bit gray fingerprint image as every decoder (image_decode.h) returns
// it and the minutiae extractor (services/fingerprint/extract/) reads it.
#ifndef TESSERA_SERVICES_FINGERPRINT_IMAGE_GRAY_IMAGE_H_
#define TESSERA_SERVICES_FINGERPRINT_IMAGE_GRAY_IMAGE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera {
namespace fingerprint {

struct GrayImage {
  int width = 0;
  int height = 0;
  // Pixels per inch; 0 when neither the file nor the request says.
  double ppi = 0;
  // Row-major, top row first; 0 = black (ridges are dark on a plain
  // impression). width * height bytes.
  std::vector<uint8_t> pixels;

  uint8_t at(int x, int y) const { return pixels[static_cast<size_t>(y) * width + x]; }
  uint8_t& at(int x, int y) { return pixels[static_cast<size_t>(y) * width + x]; }
};

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_IMAGE_GRAY_IMAGE_H_

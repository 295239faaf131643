// One-pixel-wide ridge skeletons (Zhang-Suen thinning, then the staircase
// pixels it leaves removed) and walking along them, for minutiae detection.
#ifndef TESSERA_SERVICES_FINGERPRINT_EXTRACT_SKELETON_H_
#define TESSERA_SERVICES_FINGERPRINT_EXTRACT_SKELETON_H_

#include <cstdint>
#include <vector>

namespace tessera {
namespace fingerprint {

// Thins `binary` (width x height, 1 = ridge) in place to 8-connected
// one-pixel-wide lines. Pixels on the image border are cleared first.
void Thin(std::vector<uint8_t>& binary, int width, int height);

// The rules Thin applies to a pixel given its 8 neighbours as ring bits
// (bit i set: neighbour i of N, NE, E, SE, S, SW, W, NW is set): whether
// Zhang-Suen sub-iteration `pass` (0 or 1) deletes it, and whether the
// staircase sweep (in raster order, after thinning) removes it. The CUDA
// path (extract_cuda.h) tabulates them.
bool ZhangSuenDeletes(int pass, int ring_bits);
bool StaircaseRedundant(int ring_bits);

// The crossing number of skeleton pixel (x, y) (not on the border): half the
// number of 0/1 changes around its 8 neighbours. 1 = ridge ending, 2 = a
// ridge passing, 3 = bifurcation.
int CrossingNumber(const std::vector<uint8_t>& skeleton, int width, int x, int y);

struct Point {
  int x = 0;
  int y = 0;
};

struct Trace {
  std::vector<Point> path;  // the pixels walked, the start excluded
  bool hit_minutia = false; // stopped at a pixel whose crossing number is not 2
  bool dead_end = false;    // ran out of skeleton
};

// Walks the skeleton from `start` through its neighbour `first` for at most
// `max_steps` pixels, never stepping back.
Trace Walk(const std::vector<uint8_t>& skeleton, int width, int height, Point start, Point first, int max_steps);

// One pixel per branch leaving skeleton pixel (x, y) (not on the border):
// per run of set pixels around it, a 4-neighbour when the run has one.
std::vector<Point> BranchStarts(const std::vector<uint8_t>& skeleton, int width, int x, int y);

// The skeleton neighbours of (x, y), in ring order.
std::vector<Point> Neighbours(const std::vector<uint8_t>& skeleton, int width, int height, int x, int y);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_EXTRACT_SKELETON_H_

#include "services/fingerprint/image/wsq_subbands.h"

#include <algorithm>

namespace tessera {
namespace fingerprint {
namespace wsq_internal {
namespace {

enum Quadrant { kTopLeft = 0, kTopRight = 1, kBottomLeft = 2, kBottomRight = 3 };

// Splits one axis of length n: returns the length of the first part.
int FirstPart(int n, bool inverted) { return inverted ? n / 2 : (n + 1) / 2; }

std::array<Rect, 4> Quadrants(const SynthesisStep& s) {
  const Rect& r = s.rect;
  const int left = FirstPart(r.width, s.invert_x);
  const int top = FirstPart(r.height, s.invert_y);
  const int right = r.width - left;
  const int bottom = r.height - top;
  return {Rect{r.x, r.y, left, top}, Rect{r.x + left, r.y, right, top}, Rect{r.x, r.y + top, left, bottom},
          Rect{r.x + left, r.y + top, right, bottom}};
}

// Builds the steps top-down (a parent before its quadrants); the layout
// reverses them at the end so that synthesis runs bottom-up.
class Builder {
 public:
  explicit Builder(SubbandLayout& layout) : layout_(layout) {}

  // A step over `rect`, placed as quadrant `q` of its parent (which decides
  // its spectral inversion); returns its four quadrants.
  std::array<Rect, 4> Step(const Rect& rect, Quadrant q) {
    SynthesisStep s{rect, q == kTopRight || q == kBottomRight, q == kBottomLeft || q == kBottomRight};
    steps_.push_back(s);
    return Quadrants(s);
  }
  // A step whose four quadrants are subbands first..first+3.
  void FourSubbands(const Rect& rect, Quadrant q, int first) {
    const std::array<Rect, 4> quads = Step(rect, q);
    for (int i = 0; i < 4; ++i) layout_.subbands[first + i] = quads[i];
  }
  // Two levels: each quadrant is split into four subbands, 16 in all.
  void SixteenSubbands(const Rect& rect, Quadrant q, int first) {
    const std::array<Rect, 4> quads = Step(rect, q);
    for (int i = 0; i < 4; ++i) FourSubbands(quads[i], static_cast<Quadrant>(i), first + 4 * i);
  }
  void Finish() { layout_.steps.assign(steps_.rbegin(), steps_.rend()); }

 private:
  SubbandLayout& layout_;
  std::vector<SynthesisStep> steps_;
};

}  // namespace

SubbandLayout BuildSubbandLayout(int width, int height) {
  SubbandLayout layout;
  Builder b(layout);
  // Level 1 over the whole image: its diagonal quarter holds the untransmitted
  // subbands 60..63; the two other detail quarters are split once more.
  const std::array<Rect, 4> image = b.Step(Rect{0, 0, width, height}, kTopLeft);
  {
    // The low quarter: its top-left quarter is split twice more, with the
    // four coarsest subbands (0..3) at the very top-left.
    const std::array<Rect, 4> low = b.Step(image[kTopLeft], kTopLeft);
    const std::array<Rect, 4> lowest = b.Step(low[kTopLeft], kTopLeft);
    const std::array<Rect, 4> coarse = b.Step(lowest[kTopLeft], kTopLeft);
    b.FourSubbands(coarse[kTopLeft], kTopLeft, 0);
    layout.subbands[4] = coarse[kTopRight];
    layout.subbands[5] = coarse[kBottomLeft];
    layout.subbands[6] = coarse[kBottomRight];
    b.FourSubbands(lowest[kTopRight], kTopRight, 7);
    b.FourSubbands(lowest[kBottomLeft], kBottomLeft, 11);
    b.FourSubbands(lowest[kBottomRight], kBottomRight, 15);
    b.SixteenSubbands(low[kTopRight], kTopRight, 19);
    b.SixteenSubbands(low[kBottomLeft], kBottomLeft, 35);
    layout.subbands[51] = low[kBottomRight];
  }
  b.FourSubbands(image[kTopRight], kTopRight, 52);
  b.FourSubbands(image[kBottomLeft], kBottomLeft, 56);
  // 60..63: where the diagonal quarter's subbands would be (never coded).
  const std::array<Rect, 4> diagonal = Quadrants(SynthesisStep{image[kBottomRight], true, true});
  for (int i = 0; i < 4; ++i) layout.subbands[kCodedSubbands + i] = diagonal[i];
  b.Finish();
  return layout;
}

}  // namespace wsq_internal
}  // namespace fingerprint
}  // namespace tessera

#include "common/image_preview.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/nifti_io.h"
#include "common/png_io.h"

namespace tessera {
namespace {

std::string OutPath(const std::string& name) {
  const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  if (dir == nullptr) dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

// value(i, j, k) = i + 10 j + 100 k: every voxel tells where it is.
NDArray CoordinateArray(int64_t nx, int64_t ny, int64_t nz) {
  NDArray a = *NDArray::Allocate({nx, ny, nz}, DType::kFloat32);
  float* p = a.data<float>();
  for (int64_t k = 0; k < nz; ++k)
    for (int64_t j = 0; j < ny; ++j)
      for (int64_t i = 0; i < nx; ++i) p[i + nx * (j + ny * k)] = static_cast<float>(i + 10 * j + 100 * k);
  return a;
}

SliceOptions Identity(int axis, int64_t index) {
  SliceOptions o;
  o.axis = axis;
  o.index = index;
  o.window = Window{0, 255};  // gray level = value
  return o;
}

TEST(ImagePreviewTest, AxialSliceHasAnteriorUp) {
  const NDArray a = CoordinateArray(4, 3, 2);
  absl::StatusOr<Image8> im = RenderSlice(a, Identity(2, 1));
  ASSERT_TRUE(im.ok()) << im.status();
  ASSERT_EQ(im->width, 4);
  ASSERT_EQ(im->height, 3);
  ASSERT_EQ(im->channels, 1);
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 4; ++x) EXPECT_EQ(im->at(x, y), x + 10 * (2 - y) + 100) << x << "," << y;
}

TEST(ImagePreviewTest, CoronalAndSagittalSlicesHaveSuperiorUp) {
  const NDArray a = CoordinateArray(4, 3, 2);
  absl::StatusOr<Image8> coronal = RenderSlice(a, Identity(1, 2));
  ASSERT_TRUE(coronal.ok()) << coronal.status();
  ASSERT_EQ(coronal->width, 4);
  ASSERT_EQ(coronal->height, 2);
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 4; ++x) EXPECT_EQ(coronal->at(x, y), x + 20 + 100 * (1 - y));

  absl::StatusOr<Image8> sagittal = RenderSlice(a, Identity(0, 3));
  ASSERT_TRUE(sagittal.ok()) << sagittal.status();
  ASSERT_EQ(sagittal->width, 3);
  ASSERT_EQ(sagittal->height, 2);
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 3; ++x) EXPECT_EQ(sagittal->at(x, y), 3 + 10 * x + 100 * (1 - y));
}

TEST(ImagePreviewTest, DefaultIsTheMiddleSlice) {
  const NDArray a = CoordinateArray(3, 3, 5);
  SliceOptions o;
  o.window = Window{0, 255};
  absl::StatusOr<Image8> im = RenderSlice(a, o);
  ASSERT_TRUE(im.ok()) << im.status();
  EXPECT_EQ(im->at(0, 2), 200);  // k = 2, j = 0, i = 0
}

TEST(ImagePreviewTest, PercentileWindowIsRobustAndMonotonic) {
  NDArray a = *NDArray::Allocate({50, 40, 3}, DType::kFloat32);
  std::mt19937 rng(1);
  float* p = a.data<float>();
  for (int64_t i = 0; i < a.num_elements(); ++i) p[i] = std::uniform_real_distribution<float>(10, 20)(rng);
  const int64_t mid = 50 * 40;  // slice k = 1
  p[mid + 7] = 1e9f;            // one outlier must not squash the rest
  p[mid + 8] = std::numeric_limits<float>::quiet_NaN();
  absl::StatusOr<Image8> im = RenderSlice(a);
  ASSERT_TRUE(im.ok()) << im.status();
  int zeros = 0, fulls = 0, mids = 0;
  for (uint8_t v : im->pixels) {
    zeros += v == 0;
    fulls += v == 255;
    mids += v > 50 && v < 205;
  }
  EXPECT_GT(zeros, 0);
  EXPECT_GT(fulls, 0);
  EXPECT_GT(mids, static_cast<int>(im->pixels.size()) / 2);  // the bulk spans the range
  // Monotonic: brighter voxel, brighter (or equal) pixel.
  const int64_t w = im->width, h = im->height;
  for (int64_t n = 0; n + 1 < w * h; ++n) {
    const int64_t x1 = n % w, y1 = n / w, x2 = (n + 1) % w, y2 = (n + 1) / w;
    const float v1 = p[mid + x1 + 50 * (h - 1 - y1)], v2 = p[mid + x2 + 50 * (h - 1 - y2)];
    if (std::isnan(v1) || std::isnan(v2)) continue;
    if (v1 < v2) {
      EXPECT_LE(im->at(x1, y1), im->at(x2, y2));
    } else if (v1 > v2) {
      EXPECT_GE(im->at(x1, y1), im->at(x2, y2));
    }
  }
  EXPECT_EQ(im->at(8, h - 1), 0);    // NaN
  EXPECT_EQ(im->at(7, h - 1), 255);  // outlier

  absl::StatusOr<Window> whole = ComputeWindow(a, 0, 100);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->high, 1e9f);
  EXPECT_GE(whole->low, 10.0);
}

TEST(ImagePreviewTest, ComponentsAndErrors) {
  NDArray a = *NDArray::Allocate({3, 3, 3, 2}, DType::kInt16);
  int16_t* p = a.data<int16_t>();
  for (int64_t i = 0; i < 27; ++i) p[i] = 10, p[27 + i] = 200;
  SliceOptions o;
  o.window = Window{0, 255};
  o.component = 1;
  absl::StatusOr<Image8> im = RenderSlice(a, o);
  ASSERT_TRUE(im.ok()) << im.status();
  for (uint8_t v : im->pixels) EXPECT_EQ(v, 200);
  o.component = 2;
  EXPECT_EQ(RenderSlice(a, o).status().code(), absl::StatusCode::kOutOfRange);
  o.component = 0;
  o.index = 3;
  EXPECT_EQ(RenderSlice(a, o).status().code(), absl::StatusCode::kOutOfRange);
  o.index = -1;
  o.axis = 3;
  EXPECT_EQ(RenderSlice(a, o).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RenderSlice(*NDArray::Allocate({4, 4}, DType::kUInt8)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RenderSlice(NDArray()).status().code(), absl::StatusCode::kInvalidArgument);
}

// The same anatomy stored in RAS order and in a permuted, flipped voxel order
// renders to the same anatomical slices.
TEST(ImagePreviewTest, VolumeSlicesFollowAnatomyNotVoxelOrder) {
  std::mt19937 rng(2);
  const int64_t nx = 6, ny = 5, nz = 4;
  Volume ras;
  ras.data = *NDArray::Allocate({nx, ny, nz}, DType::kFloat32);
  float* r = ras.data.data<float>();
  for (int64_t i = 0; i < ras.data.num_elements(); ++i) r[i] = std::uniform_real_distribution<float>(1, 255)(rng);

  // Voxel axes of `other`: index 0 runs anterior->posterior (world -y),
  // index 1 right->left (-x), index 2 superior->inferior (-z).
  Volume other;
  other.data = *NDArray::Allocate({ny, nx, nz}, DType::kFloat32);
  other.geometry.direction = {0, -1, 0,   //
                              -1, 0, 0,   //
                              0, 0, -1};
  float* o = other.data.data<float>();
  for (int64_t k = 0; k < nz; ++k)
    for (int64_t j = 0; j < ny; ++j)
      for (int64_t i = 0; i < nx; ++i) {
        const int64_t a = ny - 1 - j, b = nx - 1 - i, c = nz - 1 - k;
        o[a + ny * (b + nx * c)] = r[i + nx * (j + ny * k)];
      }
  EXPECT_EQ(other.geometry.AxisCodes(), "PLI");
  for (int plane = 0; plane < 3; ++plane) {
    SliceOptions opt;
    opt.axis = plane;
    opt.index = 1;  // a slice that is not the middle in either order...
    opt.window = Window{0, 255};
    absl::StatusOr<Image8> a = RenderSlice(ras, opt);
    const int64_t n = plane == 0 ? nx : plane == 1 ? ny : nz;
    opt.index = n - 1 - 1;  // ...so the flipped volume's index is mirrored
    absl::StatusOr<Image8> b = RenderSlice(other, opt);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->width, b->width) << plane;
    EXPECT_EQ(a->height, b->height) << plane;
    EXPECT_EQ(a->pixels, b->pixels) << "plane " << plane;
  }
}

TEST(ImagePreviewTest, TileMixesGrayAndRgb) {
  Image8 gray = Image8::Make(3, 2, 1, 100);
  Image8 rgb = Image8::Make(2, 4, 3, 0);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 2; ++x) rgb.at(x, y, 0) = 255, rgb.at(x, y, 2) = 7;
  absl::StatusOr<Image8> t = TileHorizontally({gray, rgb}, 1, 9);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->width, 3 + 1 + 2);
  EXPECT_EQ(t->height, 4);
  EXPECT_EQ(t->channels, 3);
  EXPECT_EQ(t->at(0, 0, 0), 9);    // gray is centred: rows 1..2
  EXPECT_EQ(t->at(0, 1, 0), 100);
  EXPECT_EQ(t->at(2, 2, 2), 100);
  EXPECT_EQ(t->at(0, 3, 1), 9);
  EXPECT_EQ(t->at(3, 1, 0), 9);    // the gap
  EXPECT_EQ(t->at(4, 0, 0), 255);
  EXPECT_EQ(t->at(5, 3, 2), 7);
  absl::StatusOr<Image8> g = TileHorizontally({gray, gray});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->channels, 1);
  EXPECT_EQ(g->width, 3 + 4 + 3);
  EXPECT_FALSE(TileHorizontally({}).ok());
  Image8 broken = gray;
  broken.pixels.pop_back();
  EXPECT_FALSE(TileHorizontally({broken}).ok());
}

TEST(ImagePreviewTest, Ch2PreviewPng) {
  absl::StatusOr<Volume> ch2 = ReadNifti("/usr/share/mricron/templates/ch2.nii.gz");
  ASSERT_TRUE(ch2.ok()) << ch2.status();
  std::vector<Image8> views;
  for (int plane : {0, 1, 2}) {
    SliceOptions o;
    o.axis = plane;
    absl::StatusOr<Image8> im = RenderSlice(*ch2, o);
    ASSERT_TRUE(im.ok()) << im.status();
    int black = 0, white = 0;
    for (uint8_t v : im->pixels) black += v == 0, white += v == 255;
    EXPECT_GT(black, 0);
    EXPECT_GT(white, 0);
    views.push_back(*im);
  }
  EXPECT_EQ(views[2].width, 181);   // axial: x across
  EXPECT_EQ(views[2].height, 217);  // y down the page
  // Axial slice through the middle of a head: the top and bottom rows (far
  // anterior/posterior) are background, the centre is tissue.
  const Image8& axial = views[2];
  EXPECT_EQ(axial.at(axial.width / 2, 0), 0);
  EXPECT_GT(axial.at(axial.width / 2, axial.height / 2), 0);
  absl::StatusOr<Image8> tiled = TileHorizontally(views);
  ASSERT_TRUE(tiled.ok());
  EXPECT_TRUE(WritePng(*tiled, OutPath("ch2_preview.png")).ok());
}

}  // namespace
}  // namespace tessera

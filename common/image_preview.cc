#include "common/image_preview.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

// ComputeWindow looks at no more than about this many elements.
constexpr int64_t kMaxWindowSamples = int64_t{1} << 22;

// The slice to take: across `slice_axis` at `slice_index`; columns follow
// `col_axis` (reversed when `col_reverse`), rows follow `row_axis` with the
// top row at its last index when `row_top_is_max`.
struct SlicePlan {
  int slice_axis = 2;
  int col_axis = 0;
  int row_axis = 1;
  bool col_reverse = false;
  bool row_top_is_max = true;
};

absl::Status CheckArray(const NDArray& array) {
  if (array.empty()) return absl::InvalidArgumentError("cannot render an empty array");
  if (array.memory_kind() == MemoryKind::kDevice) {
    return absl::FailedPreconditionError("cannot render a device array; copy it to the host first");
  }
  if (SizeOf(array.dtype()) == 0) return absl::InvalidArgumentError("array has an invalid dtype");
  return absl::OkStatus();
}

// Value at percentile p (0..100) of `values` (reordered), nearest rank.
double Percentile(std::vector<double>* values, double p) {
  p = std::min(100.0, std::max(0.0, p));
  const size_t k = static_cast<size_t>(std::llround(p / 100.0 * static_cast<double>(values->size() - 1)));
  std::nth_element(values->begin(), values->begin() + k, values->end());
  return (*values)[k];
}

Window WindowOf(std::vector<double> finite, double low_percentile, double high_percentile) {
  if (finite.empty()) return Window{0, 0};
  Window w;
  w.low = Percentile(&finite, low_percentile);
  w.high = Percentile(&finite, high_percentile);
  return w;
}

uint8_t ToGray(double v, const Window& w) {
  if (!std::isfinite(v)) return 0;
  if (w.high <= w.low) return v > w.low ? 255 : 0;
  if (v <= w.low) return 0;
  if (v >= w.high) return 255;
  return static_cast<uint8_t>(std::lround(255.0 * (v - w.low) / (w.high - w.low)));
}

absl::StatusOr<Image8> Render(const NDArray& array, const SlicePlan& plan, const SliceOptions& options) {
  const int64_t n[3] = {array.dim(0), array.dim(1), array.dim(2)};
  const int64_t components = array.rank() == 4 ? array.dim(3) : 1;
  if (options.component < 0 || options.component >= components) {
    return absl::OutOfRangeError(
        absl::StrCat("component ", options.component, " out of range for shape ", ShapeToString(array.shape())));
  }
  const int64_t slice = options.index < 0 ? n[plan.slice_axis] / 2 : options.index;
  if (slice >= n[plan.slice_axis]) {
    return absl::OutOfRangeError(absl::StrCat("slice ", slice, " out of range along axis ", plan.slice_axis,
                                              " of shape ", ShapeToString(array.shape())));
  }
  const int64_t width = n[plan.col_axis];
  const int64_t height = n[plan.row_axis];
  if (width > std::numeric_limits<int>::max() || height > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError("slice too large for an image");
  }
  const int64_t stride[3] = {1, n[0], n[0] * n[1]};
  const int64_t base = slice * stride[plan.slice_axis] + options.component * n[0] * n[1] * n[2];

  std::vector<double> values(static_cast<size_t>(width * height));
  VisitDType(array.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = array.data<T>();
    for (int64_t r = 0; r < height; ++r) {
      const int64_t ri = plan.row_top_is_max ? height - 1 - r : r;
      for (int64_t c = 0; c < width; ++c) {
        const int64_t ci = plan.col_reverse ? width - 1 - c : c;
        values[r * width + c] = static_cast<double>(src[base + ri * stride[plan.row_axis] + ci * stride[plan.col_axis]]);
      }
    }
  });

  Window window;
  if (options.window.has_value()) {
    window = *options.window;
  } else {
    std::vector<double> finite;
    finite.reserve(values.size());
    for (double v : values) {
      if (std::isfinite(v)) finite.push_back(v);
    }
    window = WindowOf(std::move(finite), options.low_percentile, options.high_percentile);
  }
  Image8 image = Image8::Make(static_cast<int>(width), static_cast<int>(height), 1);
  for (size_t i = 0; i < values.size(); ++i) image.pixels[i] = ToGray(values[i], window);
  return image;
}

}  // namespace

absl::StatusOr<Window> ComputeWindow(const NDArray& array, double low_percentile, double high_percentile) {
  absl::Status ok = CheckArray(array);
  if (!ok.ok()) return ok;
  const int64_t count = array.num_elements();
  const int64_t step = std::max<int64_t>(1, (count + kMaxWindowSamples - 1) / kMaxWindowSamples);
  std::vector<double> finite;
  finite.reserve(static_cast<size_t>(std::min(count, kMaxWindowSamples)));
  VisitDType(array.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = array.data<T>();
    for (int64_t i = 0; i < count; i += step) {
      const double v = static_cast<double>(src[i]);
      if (std::isfinite(v)) finite.push_back(v);
    }
  });
  return WindowOf(std::move(finite), low_percentile, high_percentile);
}

absl::StatusOr<Image8> RenderSlice(const NDArray& array, const SliceOptions& options) {
  absl::Status ok = CheckArray(array);
  if (!ok.ok()) return ok;
  if (array.rank() != 3 && array.rank() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("slices need a (nx, ny, nz) or (nx, ny, nz, nc) array, not ", ShapeToString(array.shape())));
  }
  if (options.axis < 0 || options.axis > 2) {
    return absl::InvalidArgumentError(absl::StrCat("slice axis must be 0, 1 or 2, not ", options.axis));
  }
  SlicePlan plan;
  plan.slice_axis = options.axis;
  plan.col_axis = options.axis == 0 ? 1 : 0;
  plan.row_axis = options.axis == 2 ? 1 : 2;
  return Render(array, plan, options);
}

absl::StatusOr<Image8> RenderSlice(const Volume& volume, const SliceOptions& options) {
  const NDArray& array = volume.data;
  absl::Status ok = CheckArray(array);
  if (!ok.ok()) return ok;
  if (array.rank() != 3 && array.rank() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("slices need a (nx, ny, nz) or (nx, ny, nz, nc) array, not ", ShapeToString(array.shape())));
  }
  if (options.axis < 0 || options.axis > 2) {
    return absl::InvalidArgumentError(absl::StrCat("plane must be 0, 1 or 2, not ", options.axis));
  }
  // For each world axis (x = R, y = A, z = S): the voxel axis nearest to it
  // and whether that voxel axis points toward + (R, A, S) or - (L, P, I).
  const auto& d = volume.geometry.direction;
  int voxel_axis_of[3] = {-1, -1, -1};
  bool positive[3] = {true, true, true};
  bool permutation = true;
  for (int c = 0; c < 3; ++c) {
    int best = 0;
    for (int r = 1; r < 3; ++r) {
      if (std::abs(d[r * 3 + c]) > std::abs(d[best * 3 + c])) best = r;
    }
    if (voxel_axis_of[best] != -1) permutation = false;
    voxel_axis_of[best] = c;
    positive[best] = d[best * 3 + c] >= 0;
  }
  if (!permutation) return RenderSlice(array, options);

  // Plane normal, then the world axes along the image's columns and rows.
  const int normal = options.axis;
  const int col_world = normal == 0 ? 1 : 0;  // sagittal: A to the right; else R to the right
  const int row_world = normal == 2 ? 1 : 2;  // axial: A up; else S up
  SlicePlan plan;
  plan.slice_axis = voxel_axis_of[normal];
  plan.col_axis = voxel_axis_of[col_world];
  plan.col_reverse = !positive[col_world];
  plan.row_axis = voxel_axis_of[row_world];
  plan.row_top_is_max = positive[row_world];
  return Render(array, plan, options);
}

absl::StatusOr<Image8> TileHorizontally(const std::vector<Image8>& images, int gap, uint8_t background) {
  if (images.empty()) return absl::InvalidArgumentError("no images to tile");
  if (gap < 0) return absl::InvalidArgumentError(absl::StrCat("gap must not be negative, not ", gap));
  int64_t width = 0;
  int height = 0;
  int channels = 1;
  for (const Image8& im : images) {
    if (im.width <= 0 || im.height <= 0 || (im.channels != 1 && im.channels != 3) ||
        im.pixels.size() != static_cast<size_t>(im.width) * im.height * im.channels) {
      return absl::InvalidArgumentError(absl::StrCat("malformed image ", im.width, "x", im.height, "x",
                                                     im.channels, " with ", im.pixels.size(), " samples"));
    }
    width += im.width;
    height = std::max(height, im.height);
    channels = std::max(channels, im.channels);
  }
  width += static_cast<int64_t>(gap) * (static_cast<int64_t>(images.size()) - 1);
  if (width > std::numeric_limits<int>::max() / 3) return absl::InvalidArgumentError("tiled image too wide");
  Image8 out = Image8::Make(static_cast<int>(width), height, channels, background);
  int x0 = 0;
  for (const Image8& im : images) {
    const int y0 = (height - im.height) / 2;
    for (int y = 0; y < im.height; ++y) {
      for (int x = 0; x < im.width; ++x) {
        for (int c = 0; c < channels; ++c) {
          out.at(x0 + x, y0 + y, c) = im.at(x, y, im.channels == 1 ? 0 : c);
        }
      }
    }
    x0 += im.width + gap;
  }
  return out;
}

absl::StatusOr<Image8> OrthogonalMidSlices(const Volume& volume) {
  SliceOptions options;
  absl::StatusOr<Window> window = ComputeWindow(volume.data);
  if (!window.ok()) return window.status();
  options.window = *window;
  std::vector<Image8> views;
  for (int axis : {0, 1, 2}) {
    options.axis = axis;
    absl::StatusOr<Image8> view = RenderSlice(volume, options);
    if (!view.ok()) return view.status();
    views.push_back(*std::move(view));
  }
  return TileHorizontally(views);
}

absl::StatusOr<Image8> ShrinkToFit(const Image8& image, int max_edge) {
  if (max_edge < 1) return absl::InvalidArgumentError(absl::StrCat("max_edge ", max_edge, " must be positive"));
  const int longer = std::max(image.width, image.height);
  if (longer <= max_edge) return image;
  const double scale = static_cast<double>(max_edge) / longer;
  const int width = std::max(1, static_cast<int>(std::lround(image.width * scale)));
  const int height = std::max(1, static_cast<int>(std::lround(image.height * scale)));
  Image8 out = Image8::Make(width, height, image.channels);
  // Each output pixel averages the source pixels its footprint covers.
  for (int y = 0; y < height; ++y) {
    const int y0 = static_cast<int>(static_cast<int64_t>(y) * image.height / height);
    const int y1 = std::max(y0 + 1, static_cast<int>(static_cast<int64_t>(y + 1) * image.height / height));
    for (int x = 0; x < width; ++x) {
      const int x0 = static_cast<int>(static_cast<int64_t>(x) * image.width / width);
      const int x1 = std::max(x0 + 1, static_cast<int>(static_cast<int64_t>(x + 1) * image.width / width));
      for (int c = 0; c < image.channels; ++c) {
        int64_t sum = 0;
        for (int sy = y0; sy < y1; ++sy) {
          for (int sx = x0; sx < x1; ++sx) sum += image.at(sx, sy, c);
        }
        const int64_t n = static_cast<int64_t>(y1 - y0) * (x1 - x0);
        out.at(x, y, c) = static_cast<uint8_t>((sum + n / 2) / n);
      }
    }
  }
  return out;
}

}  // namespace tessera

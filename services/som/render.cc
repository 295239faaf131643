#include "services/som/render.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tessera {
namespace som {
namespace {

// matplotlib's viridis at t = 0, 1/8, ..., 1 (R's viridis(9)).
constexpr uint8_t kViridis[9][3] = {
    {0x44, 0x01, 0x54}, {0x47, 0x2d, 0x7b}, {0x3b, 0x52, 0x8b}, {0x2c, 0x72, 0x8e}, {0x21, 0x90, 0x8c},
    {0x27, 0xad, 0x81}, {0x5d, 0xc8, 0x63}, {0xaa, 0xdc, 0x32}, {0xfd, 0xe7, 0x25},
};

// Node index of (x + dx, y + dy), or -1 off a planar map (or onto itself).
int64_t Neighbour(const GridShape& g, int64_t node, int dx, int dy) {
  int64_t x = node % g.width + dx, y = node / g.width + dy;
  if (g.topology == Topology::kToroidal) {
    x = (x + g.width) % g.width;
    y = (y + g.height) % g.height;
  } else if (x < 0 || x >= g.width || y < 0 || y >= g.height) {
    return -1;
  }
  const int64_t n = x + static_cast<int64_t>(g.width) * y;
  return n == node ? -1 : n;
}

}  // namespace

std::array<uint8_t, 3> Viridis(double t) {
  if (!(t > 0)) t = 0;  // also NaN
  if (t > 1) t = 1;
  const double s = t * 8;
  const int i = std::min(7, static_cast<int>(s));
  const double f = s - i;
  std::array<uint8_t, 3> rgb;
  for (int c = 0; c < 3; ++c) {
    rgb[c] = static_cast<uint8_t>(std::lround(kViridis[i][c] + (kViridis[i + 1][c] - kViridis[i][c]) * f));
  }
  return rgb;
}

std::vector<double> UMatrix(const SomModel& model) {
  const GridShape& g = model.grid;
  const int64_t m = g.nodes();
  std::vector<int64_t> right(m), down(m);
  for (int64_t i = 0; i < m; ++i) {
    right[i] = Neighbour(g, i, 1, 0);
    down[i] = Neighbour(g, i, 0, 1);
  }
  // Squared distances to the right and lower neighbours, one feature column
  // at a time (the codebook is feature-major).
  std::vector<double> d2_right(m, 0.0), d2_down(m, 0.0);
  for (int64_t v = 0; v < model.features; ++v) {
    for (int64_t i = 0; i < m; ++i) {
      const double w = model.Weight(v, i);
      if (right[i] >= 0) {
        const double d = w - model.Weight(v, right[i]);
        d2_right[i] += d * d;
      }
      if (down[i] >= 0) {
        const double d = w - model.Weight(v, down[i]);
        d2_down[i] += d * d;
      }
    }
  }
  std::vector<double> sum(m, 0.0), count(m, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    if (right[i] >= 0) {
      const double d = std::sqrt(d2_right[i]);
      sum[i] += d;
      count[i] += 1;
      sum[right[i]] += d;  // i is right[i]'s left neighbour
      count[right[i]] += 1;
    }
    if (down[i] >= 0) {
      const double d = std::sqrt(d2_down[i]);
      sum[i] += d;
      count[i] += 1;
      sum[down[i]] += d;
      count[down[i]] += 1;
    }
  }
  for (int64_t i = 0; i < m; ++i) sum[i] = count[i] > 0 ? sum[i] / count[i] : 0.0;
  return sum;
}

std::vector<double> ComponentPlane(const SomModel& model, int64_t feature) {
  std::vector<double> plane;
  if (feature < 0 || feature >= model.features) return plane;
  plane.resize(model.grid.nodes());
  for (int64_t i = 0; i < model.grid.nodes(); ++i) plane[i] = model.Weight(feature, i);
  return plane;
}

absl::StatusOr<Image8> RenderNodeValues(const std::vector<double>& values, const GridShape& grid, double low,
                                        const RenderOptions& options) {
  if (grid.width <= 0 || grid.height <= 0 || static_cast<int64_t>(values.size()) != grid.nodes()) {
    return absl::InvalidArgumentError(absl::StrCat("render: ", values.size(), " values for a ", grid.width, "x",
                                                   grid.height, " map"));
  }
  const int cp = options.cell_pixels;
  if (cp < 1 || cp > 256) return absl::InvalidArgumentError(absl::StrCat("render: cell_pixels ", cp, " not in 1..256"));
  if (static_cast<int64_t>(grid.width) * cp > 65536 || static_cast<int64_t>(grid.height) * cp > 65536) {
    return absl::InvalidArgumentError("render: the image would be wider or taller than 65536 pixels");
  }
  double high = low;
  for (double v : values) {
    if (v > high) high = v;
  }
  const double range = high - low;
  const int map_w = grid.width * cp, map_h = grid.height * cp;
  const int gap = std::max(1, cp / 2), bar = std::max(4, cp);
  const int width = options.colour_bar ? map_w + gap + bar : map_w;
  Image8 image = Image8::Make(width, map_h, 3, 255);
  for (int y = 0; y < grid.height; ++y) {
    for (int x = 0; x < grid.width; ++x) {
      const double v = values[x + static_cast<int64_t>(grid.width) * y];
      const auto rgb = Viridis(range > 0 ? (v - low) / range : 0.0);
      for (int py = y * cp; py < (y + 1) * cp; ++py) {
        for (int px = x * cp; px < (x + 1) * cp; ++px) {
          for (int c = 0; c < 3; ++c) image.at(px, py, c) = rgb[c];
        }
      }
    }
  }
  if (options.colour_bar) {
    for (int py = 0; py < map_h; ++py) {
      const auto rgb = Viridis(map_h > 1 ? 1.0 - static_cast<double>(py) / (map_h - 1) : 1.0);
      for (int px = map_w + gap; px < width; ++px) {
        for (int c = 0; c < 3; ++c) image.at(px, py, c) = rgb[c];
      }
    }
  }
  return image;
}

absl::StatusOr<Image8> RenderUMatrix(const Atlas& atlas, const RenderOptions& options) {
  const std::vector<double> u = UMatrix(atlas.model);
  const double low = u.empty() ? 0.0 : *std::min_element(u.begin(), u.end());
  return RenderNodeValues(u, atlas.model.grid, low, options);
}

absl::StatusOr<Image8> RenderHitMap(const Atlas& atlas, const RenderOptions& options) {
  const std::vector<int64_t> hits = HitCounts(atlas);
  std::vector<double> values(hits.size());
  for (size_t i = 0; i < hits.size(); ++i) values[i] = std::log1p(static_cast<double>(hits[i]));
  return RenderNodeValues(values, atlas.model.grid, 0.0, options);
}

absl::StatusOr<Image8> RenderComponentPlane(const Atlas& atlas, int64_t feature, const RenderOptions& options) {
  if (feature < 0 || feature >= atlas.model.features) {
    return absl::InvalidArgumentError(
        absl::StrCat("render: feature ", feature, " outside the map's ", atlas.model.features, " features"));
  }
  const std::vector<double> plane = ComponentPlane(atlas.model, feature);
  const double low = *std::min_element(plane.begin(), plane.end());
  return RenderNodeValues(plane, atlas.model.grid, low, options);
}

absl::StatusOr<int64_t> FindFeature(const Atlas& atlas, absl::string_view name) {
  const auto& names = atlas.feature_names;
  for (size_t v = 0; v < names.size(); ++v) {
    if (names[v] == name) return static_cast<int64_t>(v);
  }
  std::vector<int64_t> by_word;
  for (size_t v = 0; v < names.size(); ++v) {
    const absl::string_view n = names[v];
    const size_t end = n.find_first_of(" \t");
    if (end != absl::string_view::npos && n.substr(0, end) == name) by_word.push_back(static_cast<int64_t>(v));
  }
  if (by_word.size() == 1) return by_word[0];
  if (by_word.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("feature \"", name, "\" is ambiguous: ", by_word.size(), " features start with it"));
  }
  absl::string_view digits = name;
  if (!digits.empty() && digits[0] == 'f') digits.remove_prefix(1);
  int64_t index = -1;
  if (!digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) { return absl::ascii_isdigit(c); }) &&
      absl::SimpleAtoi(digits, &index) && index >= 0 && index < atlas.model.features) {
    return index;
  }
  return absl::NotFoundError(absl::StrCat("no feature named \"", name, "\" in the atlas (", atlas.model.features,
                                          " features; use a name from features.txt or an index)"));
}

}  // namespace som
}  // namespace tessera

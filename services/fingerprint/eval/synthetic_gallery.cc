#include "services/fingerprint/eval/synthetic_gallery.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status.h"

namespace tessera {
namespace fingerprint {
namespace {

constexpr double kTwoPi = 6.283185307179586;

// Stream seeds: distinct tags keep impression and identity streams apart.
constexpr uint64_t kImpressionTag = 0x1d8e4e27c47d124fULL;
constexpr uint64_t kIdentityTag = 0x7a3c5b9e1f2d4c6bULL;

uint64_t StreamSeed(uint64_t seed, uint64_t tag, uint64_t index) {
  SplitMix64 m(seed ^ tag);
  const uint64_t a = m.Next();
  SplitMix64 n(a ^ (index * 0x9E3779B97F4A7C15ULL));
  return n.Next();
}

double NormalizeRadians(double a) {
  a = std::fmod(a, kTwoPi);
  if (a < 0) a += kTwoPi;
  return a >= kTwoPi ? 0.0 : a;
}

struct Vec {
  double x, y;
};

// Direction of a minutia in pixel coordinates (y down, angle counterclockwise
// on the displayed image).
Vec Direction(double theta) { return {std::cos(theta), -std::sin(theta)}; }
double AngleOf(Vec v) { return std::atan2(-v.y, v.x); }

// A smooth displacement field: a sum of Gaussian bumps.
struct Field {
  std::vector<Vec> centre, amplitude;
  double sigma = 60;
  Vec Apply(Vec p) const {
    Vec q = p;
    const double k = -1.0 / (2 * sigma * sigma);
    for (size_t i = 0; i < centre.size(); ++i) {
      const double dx = p.x - centre[i].x, dy = p.y - centre[i].y;
      const double w = std::exp(k * (dx * dx + dy * dy));
      q.x += w * amplitude[i].x;
      q.y += w * amplitude[i].y;
    }
    return q;
  }
  // The minutia (p, theta) carried by the field: its direction follows the
  // field's local Jacobian (a one-pixel step along the direction).
  std::pair<Vec, double> Carry(Vec p, double theta) const {
    const Vec q = Apply(p);
    const Vec d = Direction(theta);
    const Vec r = Apply({p.x + d.x, p.y + d.y});
    return {q, AngleOf({r.x - q.x, r.y - q.y})};
  }
};

struct Box {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

Box BoundingBox(const std::vector<MinutiaPoint>& pts) {
  Box b;
  if (pts.empty()) return b;
  b.x0 = b.x1 = pts[0].x;
  b.y0 = b.y1 = pts[0].y;
  for (const MinutiaPoint& m : pts) {
    b.x0 = std::min<double>(b.x0, m.x);
    b.x1 = std::max<double>(b.x1, m.x);
    b.y0 = std::min<double>(b.y0, m.y);
    b.y1 = std::max<double>(b.y1, m.y);
  }
  return b;
}

Vec Centroid(const std::vector<MinutiaPoint>& pts) {
  Vec c{0, 0};
  for (const MinutiaPoint& m : pts) {
    c.x += m.x;
    c.y += m.y;
  }
  if (!pts.empty()) {
    c.x /= pts.size();
    c.y /= pts.size();
  }
  return c;
}

Field RandomField(const Box& box, int bumps, double amplitude, double sigma, SplitMix64& rng) {
  Field f;
  f.sigma = sigma;
  for (int k = 0; k < bumps; ++k) {
    f.centre.push_back({rng.Uniform(box.x0 - sigma / 2, box.x1 + sigma / 2 + 1e-9),
                        rng.Uniform(box.y0 - sigma / 2, box.y1 + sigma / 2 + 1e-9)});
    const double a = rng.Uniform(0, kTwoPi), r = rng.Uniform(0, amplitude);
    f.amplitude.push_back({r * std::cos(a), r * std::sin(a)});
  }
  return f;
}

// Rotation counterclockwise on screen by `a` about c, in y-down pixels.
Vec Rotate(Vec p, Vec c, double a) {
  const double cs = std::cos(a), sn = std::sin(a);
  const double dx = p.x - c.x, dy = p.y - c.y;
  return {c.x + cs * dx + sn * dy, c.y - sn * dx + cs * dy};
}

MinutiaPoint Finish(Vec p, double theta) {
  MinutiaPoint m;
  m.x = static_cast<float>(std::max(0.0, std::round(p.x)));
  m.y = static_cast<float>(std::max(0.0, std::round(p.y)));
  m.theta = static_cast<float>(NormalizeRadians(theta));
  if (m.theta >= static_cast<float>(kTwoPi)) m.theta = 0.0f;
  return m;
}

}  // namespace

uint64_t SplitMix64::Next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

double SplitMix64::Uniform() { return (Next() >> 11) * (1.0 / 9007199254740992.0); }
double SplitMix64::Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
int SplitMix64::UniformInt(int lo, int hi) {
  if (hi <= lo) return lo;
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;
  return lo + static_cast<int>(Next() % span);
}

std::vector<MinutiaPoint> PerturbImpression(const std::vector<MinutiaPoint>& points, const ImpressionParams& p,
                                            SplitMix64& rng) {
  const Box box = BoundingBox(points);
  const Vec c = Centroid(points);
  const double rot = rng.Uniform(-p.max_rotation, p.max_rotation);
  const Vec shift{rng.Uniform(-p.max_shift, p.max_shift), rng.Uniform(-p.max_shift, p.max_shift)};
  const Field field = RandomField(box, p.bumps, p.bump_amplitude, p.bump_sigma, rng);
  std::vector<MinutiaPoint> out;
  out.reserve(points.size() + p.max_spurious);
  for (const MinutiaPoint& m : points) {
    // Every draw happens whether or not the minutia is kept, so one
    // minutia's fate does not shift the others' random numbers.
    const bool drop = rng.Uniform() < p.drop_probability;
    const double jx = rng.Uniform(-p.jitter, p.jitter), jy = rng.Uniform(-p.jitter, p.jitter);
    const double ja = rng.Uniform(-p.angle_jitter, p.angle_jitter);
    if (drop) continue;
    auto [q, theta] = field.Carry({m.x, m.y}, m.theta);
    q = Rotate(q, c, rot);
    out.push_back(Finish({q.x + shift.x + jx, q.y + shift.y + jy}, theta + rot + ja));
  }
  // Spurious minutiae inside the moved bounding box.
  const int spurious = rng.UniformInt(0, std::max(0, p.max_spurious));
  for (int k = 0; k < spurious; ++k) {
    Vec q{rng.Uniform(box.x0, box.x1 + 1e-9), rng.Uniform(box.y0, box.y1 + 1e-9)};
    q = Rotate(q, c, rot);
    out.push_back(Finish({q.x + shift.x, q.y + shift.y}, rng.Uniform(0, kTwoPi)));
  }
  if (out.size() > static_cast<size_t>(kMccMaxMinutiae)) out.resize(kMccMaxMinutiae);
  return out;
}

absl::StatusOr<SyntheticGallery> SyntheticGallery::Create(std::vector<BaseTemplate> bases,
                                                          const SyntheticGalleryOptions& options) {
  if (bases.empty()) return absl::InvalidArgumentError("synthetic gallery: no base templates");
  for (size_t b = 0; b < bases.size(); ++b) {
    if (bases[b].points.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("synthetic gallery: base ", b, " has no minutiae"));
    }
    for (const MinutiaPoint& m : bases[b].points) {
      if (!std::isfinite(m.x) || !std::isfinite(m.y) || !std::isfinite(m.theta) || std::fabs(m.x) > 1e5f ||
          std::fabs(m.y) > 1e5f) {
        return absl::InvalidArgumentError(absl::StrCat("synthetic gallery: base ", b, " has a bad minutia"));
      }
    }
  }
  const ImpressionParams& ip = options.impression;
  const double reals[] = {ip.max_rotation, ip.max_shift,        ip.bump_amplitude,          ip.bump_sigma,
                          ip.jitter,       ip.angle_jitter,     ip.drop_probability,        options.identity_bump_amplitude,
                          options.identity_angle_noise};
  for (double v : reals) {
    if (!std::isfinite(v) || v < 0) {
      return absl::InvalidArgumentError("synthetic gallery: distortion parameters must be finite and >= 0");
    }
  }
  if (ip.bump_sigma <= 0) return absl::InvalidArgumentError("synthetic gallery: bump_sigma must be > 0");
  if (ip.drop_probability > 1) return absl::InvalidArgumentError("synthetic gallery: drop_probability above 1");
  if (ip.bumps < 0 || ip.max_spurious < 0 || options.identity_bumps < 0) {
    return absl::InvalidArgumentError("synthetic gallery: negative counts");
  }
  if (options.size < 0) return absl::InvalidArgumentError("synthetic gallery: negative size");
  if (options.impressions_per_identity < 1) {
    return absl::InvalidArgumentError("synthetic gallery: impressions_per_identity must be >= 1");
  }
  if (options.mated_templates > options.size) {
    return absl::InvalidArgumentError(absl::StrCat("synthetic gallery: mated_templates ", options.mated_templates,
                                                   " exceeds size ", options.size));
  }
  SyntheticGallery g;
  g.bases_ = std::move(bases);
  g.options_ = options;
  g.mated_ = options.mated_templates >= 0
                 ? options.mated_templates
                 : std::min<int64_t>(options.size, static_cast<int64_t>(g.bases_.size()));
  return g;
}

int64_t SyntheticGallery::Identity(int64_t i) const {
  if (i < mated_) return bases_[i % bases_.size()].identity;
  return kSyntheticIdentityBase + (i - mated_) / options_.impressions_per_identity;
}

std::vector<MinutiaPoint> SyntheticGallery::SyntheticIdentity(int64_t s) const {
  SplitMix64 rng(StreamSeed(options_.seed, kIdentityTag, static_cast<uint64_t>(s)));
  const int nb = static_cast<int>(bases_.size());
  const int a = rng.UniformInt(0, nb - 1);
  int b = rng.UniformInt(0, nb - 1);
  for (int tries = 0; tries < nb && nb > 1 && (b == a || bases_[b].identity == bases_[a].identity); ++tries) {
    b = (b + 1) % nb;
  }
  const std::vector<MinutiaPoint>& pa = bases_[a].points;
  const std::vector<MinutiaPoint>& pb = bases_[b].points;
  const Vec ca = Centroid(pa), cb = Centroid(pb);
  const double phi = rng.Uniform(0, kTwoPi), psi = rng.Uniform(0, kTwoPi);
  const Vec n{std::cos(phi), std::sin(phi)};
  std::vector<std::pair<Vec, double>> master;
  for (const MinutiaPoint& m : pa) {
    if ((m.x - ca.x) * n.x + (m.y - ca.y) * n.y >= 0) master.push_back({{m.x, m.y}, m.theta});
  }
  for (const MinutiaPoint& m : pb) {
    const Vec r = Rotate({m.x, m.y}, cb, psi);
    const Vec q{r.x - cb.x + ca.x, r.y - cb.y + ca.y};
    if ((q.x - ca.x) * n.x + (q.y - ca.y) * n.y < 0) master.push_back({q, m.theta + psi});
  }
  // Mirror about the vertical line through ca: x -> 2 ca.x - x, theta -> pi - theta.
  for (auto& [p, theta] : master) {
    p.x = 2 * ca.x - p.x;
    theta = kTwoPi / 2 - theta;
  }
  std::vector<MinutiaPoint> tmp;
  for (const auto& [p, theta] : master) tmp.push_back({static_cast<float>(p.x), static_cast<float>(p.y), 0});
  const Field warp = RandomField(BoundingBox(tmp), options_.identity_bumps, options_.identity_bump_amplitude,
                                 options_.impression.bump_sigma, rng);
  std::vector<MinutiaPoint> out;
  out.reserve(master.size());
  // Shift so no coordinate is negative (the mirror can move points left of 0).
  double min_x = 0;
  for (const auto& [p, theta] : master) min_x = std::min(min_x, p.x);
  for (const auto& [p, theta] : master) {
    auto [q, t] = warp.Carry(p, theta);
    const double noise = rng.Uniform(-options_.identity_angle_noise, options_.identity_angle_noise);
    out.push_back(Finish({q.x - min_x + 20, q.y}, t + noise));
  }
  if (out.size() > static_cast<size_t>(kMccMaxMinutiae)) out.resize(kMccMaxMinutiae);
  return out;
}

std::vector<MinutiaPoint> SyntheticGallery::Minutiae(int64_t i) const {
  SplitMix64 rng(StreamSeed(options_.seed, kImpressionTag, static_cast<uint64_t>(i)));
  if (i < mated_) return PerturbImpression(bases_[i % bases_.size()].points, options_.impression, rng);
  const int64_t s = (i - mated_) / options_.impressions_per_identity;
  return PerturbImpression(SyntheticIdentity(s), options_.impression, rng);
}

absl::Status SyntheticGallery::AppendTo(const Stream& stream, int64_t begin, int64_t end, MccGallery* gallery,
                                        std::vector<int64_t>* identities, const MccParams& mcc) const {
  if (gallery == nullptr) return absl::InvalidArgumentError("synthetic gallery: no output gallery");
  if (begin < 0 || end > size() || begin > end) {
    return absl::InvalidArgumentError(
        absl::StrCat("synthetic gallery: range [", begin, ", ", end, ") outside [0, ", size(), ")"));
  }
  if (static_cast<int64_t>(gallery->num_templates()) + (end - begin) > (int64_t{1} << 31) - 2) {
    return absl::InvalidArgumentError("synthetic gallery: more than 2^31 templates");
  }
  const int64_t chunk = 16384;
  std::vector<std::vector<MinutiaPoint>> pts;
  std::vector<MccTemplate> built;
  for (int64_t c0 = begin; c0 < end; c0 += chunk) {
    const int64_t c1 = std::min(end, c0 + chunk);
    pts.assign(c1 - c0, {});
    ParallelFor(c1 - c0, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) pts[i] = Minutiae(c0 + i);
    });
    if (stream.backend() == Backend::kCpu) {
      for (const auto& p : pts) TESSERA_RETURN_IF_ERROR(ValidateMccInput(p, mcc));
      built.assign(pts.size(), {});
      ParallelForDynamic(static_cast<int64_t>(pts.size()), 64, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) built[i] = cpu::BuildMccTemplate(pts[i], mcc);
      });
    } else {
      TESSERA_ASSIGN_OR_RETURN(built, BuildMccTemplates(stream, pts, mcc));
    }
    for (const MccTemplate& t : built) gallery->Append(t, mcc);
    if (identities != nullptr) {
      for (int64_t i = c0; i < c1; ++i) identities->push_back(Identity(i));
    }
  }
  return absl::OkStatus();
}

}  // namespace fingerprint
}  // namespace tessera

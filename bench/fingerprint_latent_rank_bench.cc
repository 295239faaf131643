// Issue 33, "What must hold": the rank of a real latent's exemplar in a 1:N
// search, with the exemplar enrolled among every FVC2002 impression and a
// synthetic background of 10^5 templates.
//
//   fingerprint_latent_rank_bench [--transaction=FILE] [--probe-transaction=FILE]
//       [--probe-idc=N] [--mate-idc=M] [--cache=DIR] [--refresh-cache] [--fvc-templates]
//       [--synthetic=N[,N...]] [--seed=S] [--matchers=lssr,dmc,fusion,cascade]
//       [--cascade-candidates=C] [--device=auto|cpu|cuda] [--deadline-s=T] [--data=DIR]
//       [--overlays=DIR] [--extract.max_minutiae=N] [--extract.min_quality=Q]
//       [--extract.border_margin=PX] [--probe-roi=X0,Y0,X1,Y1]
//   (every flag also as "--name VALUE")
//
// Probe and mate: the fingers of ANSI/NIST-ITL transactions as the service
// makes them (transaction_templates.h: a Type-9 markup of an image's IDC
// replaces its extraction). The probe is IDC --probe-idc (1) of
// --probe-transaction (default: --transaction), the mate IDC --mate-idc (2) of
// --transaction (default: nist/ansi-nist-reference/type-13-14-latent-match.an2,
// the Type-13 latent and its Type-14 exemplar). Every finger of both files is
// listed (source, minutiae, quality, status) with the SHA-256 of each image,
// so a probe taken from another file can be checked to be the same image.
// The probe's and the mate's images are also extracted on their own (count,
// quality); when the probe is markup, its minutiae are compared with the
// extraction of the same image (how many the extractor found, how many it
// adds, and where). --overlays=DIR writes probe.png and mate.png: the
// extraction drawn on the enhanced image (minutiae_overlay.h), the probe's
// markup over it as blue crosses.
//
// Real background: every FVC2002 image under <data>/fvc2002/DB{1-4}_{A,B}/
// (*.tif), extracted with the service's path (image_template.h
// TemplateFromImage) at 500 ppi, DB2 at 569 ppi (the TIFFs carry no usable
// resolution; ../shared/data/fingerprint/SOURCES-images.txt), on all cores.
// --cache=DIR keeps the ISO 19794-2 records (DIR/DB<n>_<set>/<name>.iso) and
// reads them back on later runs: the cache is keyed by the image's name (and
// the --extract.* flags) only, so pass --refresh-cache (or delete DIR) after
// an extractor change.
// --fvc-templates enrols the shipped commercial templates (*.iso beside the
// images, a 300 x 400 frame) instead. --extract.NAME=VALUE changes an
// ExtractOptions field (extractor.h) for every extraction of the run, probe
// and mate included (their cache: DIR/NAME-VALUE/). --probe-roi extracts only
// that rectangle of the probe's image (pixels, x0,y0,x1,y1 exclusive): what an
// examiner's region of interest around the print would give, a diagnostic of
// how much the background costs the automatic extraction.
//
// Synthetic background (eval/synthetic_gallery.h): --synthetic templates, all
// impressions of synthetic identities (mated_templates 0): chimeras of two
// real bases, mirrored and warped, so none is a mate of anything. The bases
// are the FVC2002 templates enrolled above (same extractor and frame as the
// probe), never the probe or the mate. A list of sizes grows one gallery (a
// smaller size is a prefix of the next).
//
// Stages: first the FVC templates plus the mate alone, then each synthetic
// size. At every stage each matcher searches the probe once through the
// service's searcher (searcher.h CreateSearcher) with top_k = the whole
// gallery (so the mate's rank is exact), except "cascade", whose list is its
// shortlist of --cascade-candidates (the mate's rank is exact when it is in
// it, else a lower bound; the LSS-R rank is then the cascade's first stage).
// Ranks count ties against the mate (latent_rank.h). A search that runs past
// --deadline-s (default 300) is stopped and that matcher skips the larger
// stages. Times: wall of the Search call (descriptors of the probe + scoring
// + sorting the full list) and the process CPU time it took.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/types/span.h"
#include "bench/bench_util.h"
#include "bench/fingerprint_data.h"
#include "bench/latent_rank.h"
#include "bench/searcher_fill.h"
#include "common/device.h"
#include "common/parallel.h"
#include "common/png_io.h"
#include "common/sha256.h"
#include "common/status.h"
#include "kernels/fingerprint/mcc.h"
#include "services/fingerprint/eval/synthetic_gallery.h"
#include "services/fingerprint/extract/image_template.h"
#include "services/fingerprint/extract/minutiae_overlay.h"
#include "services/fingerprint/extract/transaction_templates.h"
#include "services/fingerprint/formats/ansi_nist.h"
#include "services/fingerprint/formats/ansi_nist_views.h"
#include "services/fingerprint/formats/template.h"
#include "services/fingerprint/formats/template_io.h"
#include "services/fingerprint/image/image_decode.h"
#include "services/fingerprint/search/fusion_score.h"
#include "services/fingerprint/search/search_control.h"
#include "services/fingerprint/search/searcher.h"

namespace tessera {
namespace fingerprint {
namespace {

namespace fs = std::filesystem;
using bench::NowSeconds;

constexpr char kMateId[] = "mate";
constexpr char kFvcPrefix[] = "fvc:";

// A rectangle of an image, pixels [x0, x1) x [y0, y1); empty: the whole image.
struct Roi {
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  bool empty() const { return x1 <= x0 || y1 <= y0; }
};

struct Config {
  std::string transaction;        // the mate's (and by default the probe's)
  std::string probe_transaction;  // empty: transaction
  int probe_idc = 1;
  int mate_idc = 2;
  std::string cache;
  bool refresh_cache = false;
  bool fvc_templates = false;
  std::vector<int64_t> synthetic = {100000};
  uint64_t seed = 20261206;
  std::vector<std::string> matchers = {"lssr", "dmc", "fusion", "cascade"};
  int cascade_candidates = kDefaultCascadeCandidates;
  std::string device = "auto";
  double deadline_s = 300;
  std::string data_dir;
  std::string overlays;  // directory for probe.png and mate.png
  Roi probe_roi;         // the probe image's part to extract (empty: all of it)
  // Extraction (probe, mate and FVC2002 images): the service's defaults
  // unless --extract.NAME=VALUE; `extract_tag` names the changed fields
  // ("" for none), and the cache keeps such runs in DIR/<tag>/.
  ExtractOptions extract;
  std::string extract_tag;
};

std::string Message(const absl::Status& s) { return std::string(s.message()); }

absl::StatusOr<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The matchers' view of a template record, as the service parses one
// (search_request.cc ParseProbeOrTemplate): view 0, pixels, radians.
absl::StatusOr<std::vector<MinutiaPoint>> PointsOfRecord(absl::Span<const uint8_t> record, int* quality = nullptr) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<Template> views, ParseTemplateRecord(record));
  if (views.empty()) return absl::InvalidArgumentError("record without a finger view");
  std::vector<MinutiaPoint> out;
  for (const Minutia& m : views[0].minutiae) {
    out.push_back({static_cast<float>(m.x), static_cast<float>(m.y), static_cast<float>(m.angle)});
  }
  if (quality != nullptr) *quality = views[0].finger_quality;
  if (out.empty()) return absl::InvalidArgumentError("template has no minutiae");
  TESSERA_RETURN_IF_ERROR(ValidateMccInput(out, MccParams{}));
  return out;
}

// ---- probe and mate -------------------------------------------------------

struct Finger {
  std::string file;
  TransactionFinger finger;
  std::vector<MinutiaPoint> points;
};

// A transaction as read: its images (views into `transaction`) and fingers.
struct LoadedTransaction {
  std::string path;
  std::string bytes;
  ansi_nist::Transaction transaction;
  std::vector<ansi_nist::ImageView> images;
  std::vector<std::string> image_sha256;  // of images[i].data
  std::vector<TransactionFinger> fingers;

  const ansi_nist::ImageView* ImageOf(int idc, std::string* sha256 = nullptr) const {
    for (size_t i = 0; i < images.size(); ++i) {
      if (images[i].idc != idc) continue;
      if (sha256 != nullptr) *sha256 = image_sha256[i];
      return &images[i];
    }
    return nullptr;
  }
};

// Reads `path` and lists every image, Type-9 record and finger.
absl::StatusOr<std::unique_ptr<LoadedTransaction>> ReadTransaction(const std::string& path) {
  auto out = std::make_unique<LoadedTransaction>();
  out->path = path;
  TESSERA_ASSIGN_OR_RETURN(out->bytes, ReadWhole(path));
  TESSERA_ASSIGN_OR_RETURN(out->transaction, ansi_nist::ParseTransaction(out->bytes));
  TESSERA_ASSIGN_OR_RETURN(out->images, ansi_nist::Images(out->transaction));
  TESSERA_ASSIGN_OR_RETURN(std::vector<ansi_nist::MinutiaeView> markups, ansi_nist::Minutiae(out->transaction));
  std::printf("%s:\n", path.c_str());
  for (const ansi_nist::ImageView& v : out->images) {
    out->image_sha256.push_back(Sha256Hex(v.data.data(), v.data.size()));
    std::printf("  image  Type-%d IDC %d FGP %s IMP %d %dx%d %.2f ppi %s, %zu bytes, SHA-256 %s\n", v.record_type,
                v.idc, absl::StrJoin(v.positions, "/").c_str(), v.impression_type, v.width, v.height, v.ppi,
                std::string(ansi_nist::CompressionName(v.compression)).c_str(), v.data.size(),
                out->image_sha256.back().substr(0, 16).c_str());
  }
  for (const ansi_nist::MinutiaeView& m : markups) {
    std::printf("  Type-9 IDC %d IMP %d FMT %s: %zu legacy minutiae%s%s\n", m.idc, m.impression_type,
                m.format.c_str(), m.legacy.size(), m.has_efs ? absl::StrCat(", ", m.efs.size(), " EFS minutiae").c_str() : "",
                m.has_roi ? " (EFS ROI)" : "");
  }
  TESSERA_ASSIGN_OR_RETURN(out->fingers, TemplatesFromTransaction(out->bytes));
  for (const TransactionFinger& f : out->fingers) {
    std::printf("  finger Type-%d IDC %d FGP %d IMP %d: %s, %s\n", f.record_type, f.idc, f.position,
                f.impression_type, f.source.c_str(),
                f.status.ok() ? absl::StrCat(f.minutiae, " minutiae, quality ", f.quality).c_str()
                              : f.status.ToString().c_str());
  }
  return out;
}

// An image record extracted as TransactionFinger extracts it (its record's
// resolution; raw images by their declared size), or only its `roi`
// (clamped to the image; minutiae then in the rectangle's pixels).
absl::StatusOr<ImageTemplate> ExtractImage(const ansi_nist::ImageView& v, const ExtractOptions& options,
                                           const Roi& roi = {}) {
  ImageInput in;
  in.decode.ppi = v.ppi;
  if (v.compression == ansi_nist::Compression::kNone) {
    in.decode.format = ImageFormat::kRaw;
    in.decode.raw_width = v.width;
    in.decode.raw_height = v.height;
  }
  if (roi.empty()) return TemplateFromImage(v.data, in, TemplateFormat::kIso19794, options);
  TESSERA_ASSIGN_OR_RETURN(GrayImage image, DecodeGrayImage(v.data, in.decode));
  const int x0 = std::clamp(roi.x0, 0, image.width), x1 = std::clamp(roi.x1, 0, image.width);
  const int y0 = std::clamp(roi.y0, 0, image.height), y1 = std::clamp(roi.y1, 0, image.height);
  if (x1 <= x0 || y1 <= y0) return absl::InvalidArgumentError("the ROI lies outside the image");
  std::string crop;
  for (int y = y0; y < y1; ++y) crop.append(reinterpret_cast<const char*>(&image.pixels[static_cast<size_t>(y) * image.width + x0]), x1 - x0);
  ImageInput cropped;
  cropped.decode.format = ImageFormat::kRaw;
  cropped.decode.raw_width = x1 - x0;
  cropped.decode.raw_height = y1 - y0;
  cropped.decode.ppi = image.ppi;
  return TemplateFromImage(crop, cropped, TemplateFormat::kIso19794, options);
}

std::vector<MinutiaPoint> Shifted(std::vector<MinutiaPoint> points, float dx, float dy) {
  for (MinutiaPoint& m : points) m.x += dx, m.y += dy;
  return points;
}

absl::StatusOr<Finger> PickFinger(const LoadedTransaction& t, int idc) {
  for (const TransactionFinger& f : t.fingers) {
    if (f.idc != idc) continue;
    if (!f.status.ok()) return Annotate(f.status, absl::StrCat(t.path, " IDC ", idc));
    Finger out{t.path, f, {}};
    TESSERA_ASSIGN_OR_RETURN(out.points, PointsOfRecord(f.record));
    return out;
  }
  return absl::NotFoundError(absl::StrCat(t.path, ": no finger with IDC ", idc));
}

// Markup against the extraction of the same image (same pixel frame): the
// markup minutiae with an extracted one within kNear pixels (one-to-one,
// nearest pairs first), how many of those also agree in direction, and how
// many extracted minutiae lie away from everything the examiner marked.
void CompareMarkupWithExtraction(const std::vector<MinutiaPoint>& markup, const std::vector<MinutiaPoint>& extracted) {
  constexpr double kNear = 12;        // pixels at 500 ppi: 0.6 mm, about a ridge period and a half
  constexpr double kAngle = 30;       // degrees
  constexpr double kRegionMargin = 25;  // pixels around the markup's bounding box
  constexpr double kPi = 3.14159265358979323846;
  struct Pair {
    double d;
    int m, e;
  };
  std::vector<Pair> pairs;
  for (size_t i = 0; i < markup.size(); ++i) {
    for (size_t j = 0; j < extracted.size(); ++j) {
      const double d = std::hypot(markup[i].x - extracted[j].x, markup[i].y - extracted[j].y);
      if (d <= kNear) pairs.push_back({d, static_cast<int>(i), static_cast<int>(j)});
    }
  }
  std::sort(pairs.begin(), pairs.end(), [](const Pair& a, const Pair& b) { return a.d < b.d; });
  std::vector<char> m_used(markup.size(), 0), e_used(extracted.size(), 0);
  int paired = 0, agree = 0;
  std::vector<double> angle_errors;
  for (const Pair& p : pairs) {
    if (m_used[p.m] || e_used[p.e]) continue;
    m_used[p.m] = e_used[p.e] = 1;
    ++paired;
    double a = std::fmod(std::fabs(markup[p.m].theta - extracted[p.e].theta), 2 * kPi);
    if (a > kPi) a = 2 * kPi - a;
    angle_errors.push_back(a * 180 / kPi);
    agree += a * 180 / kPi <= kAngle;
  }
  float x0 = 1e9f, y0 = 1e9f, x1 = -1e9f, y1 = -1e9f;
  for (const MinutiaPoint& m : markup) x0 = std::min(x0, m.x), y0 = std::min(y0, m.y), x1 = std::max(x1, m.x), y1 = std::max(y1, m.y);
  int outside = 0;
  for (const MinutiaPoint& e : extracted) {
    outside += e.x < x0 - kRegionMargin || e.x > x1 + kRegionMargin || e.y < y0 - kRegionMargin ||
               e.y > y1 + kRegionMargin;
  }
  std::sort(angle_errors.begin(), angle_errors.end());
  std::printf("markup vs extraction of the same image: %zu marked, %zu extracted; %d marked minutiae have an extracted "
              "one within %.0f px (%d of them within %.0f deg; median angle error %.0f deg); %zu extracted minutiae "
              "pair with no marked one, %d of them outside the marked region (its bounding box %.0f-%.0f x "
              "%.0f-%.0f px + %.0f px)\n",
              markup.size(), extracted.size(), paired, kNear, agree, kAngle,
              angle_errors.empty() ? 0.0 : angle_errors[angle_errors.size() / 2], extracted.size() - paired, outside,
              x0, x1, y0, y1, kRegionMargin);
}

// `points` drawn on `img` (scale as the overlay's): blue crosses with a tail
// along the direction (ISO: counter-clockwise from +x, y down the image).
void DrawPoints(const std::vector<MinutiaPoint>& points, int scale, Image8* img) {
  const auto put = [&](double fx, double fy) {
    const int x = static_cast<int>(std::lround(fx * scale)), y = static_cast<int>(std::lround(fy * scale));
    if (x < 0 || y < 0 || x >= img->width || y >= img->height) return;
    img->at(x, y, 0) = 0, img->at(x, y, 1) = 80, img->at(x, y, 2) = 255;
  };
  for (const MinutiaPoint& m : points) {
    for (double t = -4; t <= 4; t += 0.25) put(m.x + t, m.y), put(m.x, m.y + t);
    for (double t = 4; t < 14; t += 0.25) put(m.x + t * std::cos(m.theta), m.y - t * std::sin(m.theta));
  }
}

// ---- FVC2002 --------------------------------------------------------------

struct FvcTemplate {
  std::string name;  // "DB1_B/101_1"
  int db = 0;
  int finger = 0;
  std::vector<uint8_t> record;
  std::vector<MinutiaPoint> points;
  int quality = 0;
};

// DB2 is the FX2000 at 569 ppi; the others 500 (DB4 synthetic, ~500).
double FvcPpi(int db) { return db == 2 ? 569 : 500; }

struct FvcLoad {
  std::vector<FvcTemplate> templates;
  int images = 0;
  int extracted = 0;  // this run (the rest from the cache)
  int failed = 0;
  double extract_seconds = 0;  // wall, all cores
};

absl::StatusOr<FvcLoad> LoadFvc(const Config& cfg, const std::string& data_dir) {
  struct Item {
    std::string dir_name, stem;  // "DB1_B", "101_1"
    int db, finger;
    std::string source;  // .tif or .iso
  };
  std::vector<Item> items;
  for (int db = 1; db <= 4; ++db) {
    for (const char* set : {"A", "B"}) {
      const std::string dir_name = absl::StrCat("DB", db, "_", set);
      const fs::path dir = fs::path(data_dir) / "fvc2002" / dir_name;
      std::error_code ec;
      if (!fs::is_directory(dir, ec)) continue;
      for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
        const std::string ext = cfg.fvc_templates ? ".iso" : ".tif";
        if (e.path().extension() != ext) continue;
        Item it{dir_name, e.path().stem().string(), db, 0, e.path().string()};
        std::vector<std::string> parts = absl::StrSplit(it.stem, '_');
        if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &it.finger)) continue;
        items.push_back(std::move(it));
      }
    }
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return std::tie(a.dir_name, a.finger, a.stem) < std::tie(b.dir_name, b.finger, b.stem);
  });
  if (items.empty()) return absl::NotFoundError(absl::StrCat("no FVC2002 images under ", data_dir, "/fvc2002"));
  FvcLoad load;
  load.images = static_cast<int>(items.size());
  std::vector<absl::StatusOr<FvcTemplate>> out(items.size(), absl::UnknownError("not loaded"));
  std::vector<char> fresh(items.size(), 0);
  const double t0 = NowSeconds();
  ParallelForDynamic(static_cast<int64_t>(items.size()), 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      const Item& it = items[i];
      FvcTemplate t;
      t.name = absl::StrCat(it.dir_name, "/", it.stem);
      t.db = it.db;
      t.finger = it.finger;
      const std::string cached =
          cfg.cache.empty() ? "" : (fs::path(cfg.cache) / cfg.extract_tag / it.dir_name / (it.stem + ".iso")).string();
      std::string bytes;
      if (cfg.fvc_templates) {
        auto b = ReadWhole(it.source);
        if (!b.ok()) {
          out[i] = b.status();
          continue;
        }
        bytes = *std::move(b);
      } else if (!cached.empty() && !cfg.refresh_cache && fs::exists(cached)) {
        auto b = ReadWhole(cached);
        if (!b.ok()) {
          out[i] = b.status();
          continue;
        }
        bytes = *std::move(b);
      } else {
        auto image = ReadWhole(it.source);
        if (!image.ok()) {
          out[i] = image.status();
          continue;
        }
        ImageInput input;
        input.decode.ppi = FvcPpi(it.db);
        absl::StatusOr<ImageTemplate> made = TemplateFromImage(*image, input, TemplateFormat::kIso19794, cfg.extract);
        if (!made.ok()) {
          out[i] = Annotate(made.status(), it.source);
          continue;
        }
        bytes.assign(made->record.begin(), made->record.end());
        fresh[i] = 1;
        if (!cached.empty()) {
          std::error_code ec;
          fs::create_directories(fs::path(cached).parent_path(), ec);
          std::ofstream f(cached, std::ios::binary | std::ios::trunc);
          f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
          if (!f) {
            out[i] = absl::InternalError(absl::StrCat("cannot write ", cached));
            continue;
          }
        }
      }
      t.record.assign(bytes.begin(), bytes.end());
      auto points = PointsOfRecord(t.record, &t.quality);
      if (!points.ok()) {
        out[i] = Annotate(points.status(), it.source);
        continue;
      }
      t.points = *std::move(points);
      out[i] = std::move(t);
    }
  });
  load.extract_seconds = NowSeconds() - t0;
  for (size_t i = 0; i < out.size(); ++i) {
    load.extracted += fresh[i];
    if (!out[i].ok()) {
      ++load.failed;
      std::printf("  FVC2002 %s: %s\n", items[i].source.c_str(), out[i].status().ToString().c_str());
      continue;
    }
    load.templates.push_back(*std::move(out[i]));
  }
  return load;
}

// ---- searching ------------------------------------------------------------

bool IsMate(const std::string& id) { return id == kMateId; }
bool IsReal(const std::string& id) { return id == kMateId || absl::StartsWith(id, kFvcPrefix); }

struct Row {
  std::string matcher;
  int64_t gallery = 0;
  int64_t synthetic = 0;
  bool ran = false;
  std::string error;  // when it did not
  MateRank all;
  MateRank real;        // within the FVC part (+ the mate), from the same scores
  MateRank lssr_stage;  // cascade: the LSS-R first stage's rank of the mate
  double wall_s = 0;
  double cpu_s = 0;
  SearchStats stats;
};

std::string RankText(const MateRank& r) {
  if (!r.found) return absl::StrCat("> ", r.rank - 1);
  return r.ties > 0 ? absl::StrCat(r.rank, " (", r.ties, " tied)") : absl::StrCat(r.rank);
}

std::string ScoreText(float s) { return std::isnan(s) ? "-" : absl::StrFormat("%.4f", s); }

std::string NonMateText(const MateRank& r) {
  if (r.best_nonmate_id.empty()) return "-";
  return absl::StrCat(ScoreText(r.best_nonmate), " (", r.best_nonmate_id, ")");
}

Row SearchOnce(GallerySearcher& searcher, const Config& cfg, const std::string& matcher,
               const std::vector<MinutiaPoint>& probe, int64_t synthetic) {
  Row row;
  row.matcher = matcher;
  row.gallery = searcher.size();
  row.synthetic = synthetic;
  SearchControl control;
  control.check = CancelFlagCheck(nullptr, absl::Now() + absl::Seconds(cfg.deadline_s));
  SearchOptions o;
  o.matcher = matcher;
  o.control = &control;
  const bool cascade = matcher == "cascade";
  o.top_k = cascade ? cfg.cascade_candidates : static_cast<int>(searcher.size());
  o.cascade_candidates = cascade ? cfg.cascade_candidates : 0;
  const double c0 = bench::ProcessCpuSeconds();
  const double t0 = NowSeconds();
  auto r = searcher.Search({probe}, o, &row.stats);
  row.wall_s = NowSeconds() - t0;
  row.cpu_s = bench::ProcessCpuSeconds() - c0;
  if (!r.ok()) {
    row.error = r.status().ToString();
    return row;
  }
  row.ran = true;
  row.all = RankOfMate((*r)[0], IsMate);
  row.real = RankOfMate((*r)[0], IsMate, IsReal);
  return row;
}

// Appends synthetic templates [from, to) (ids: their index) in blocks.
bool Grow(const SyntheticGallery& synthetic, const Stream& stream, int64_t from, int64_t to,
          GallerySearcher* searcher) {
  constexpr int64_t kBlock = 65536;
  for (int64_t b = from; b < to; b += kBlock) {
    const int64_t e = std::min(to, b + kBlock);
    MccGallery block;
    if (absl::Status s = synthetic.AppendTo(stream, b, e, &block, nullptr); !s.ok()) {
      std::fprintf(stderr, "synthetic gallery: %s\n", Message(s).c_str());
      return false;
    }
    if (b == from) searcher->Reserve(to - from, static_cast<int64_t>(block.num_cylinders()) * (to - from) / (e - b));
    if (!AppendToSearcher(block, 0, e - b, searcher, /*first_id=*/b, /*reserve=*/false)) return false;
  }
  return true;
}

void PrintStage(const std::vector<Row>& rows) {
  std::printf("\n| matcher | gallery | rank of the mate | rank in the FVC part | mate score | best non-mate "
              "| best real non-mate | search wall s | CPU s |\n|---|---:|---:|---:|---:|---|---|---:|---:|\n");
  for (const Row& r : rows) {
    if (!r.ran) {
      std::printf("| %s | %lld | %s | | | | | %.1f | %.1f |\n", r.matcher.c_str(), static_cast<long long>(r.gallery),
                  r.error.c_str(), r.wall_s, r.cpu_s);
      continue;
    }
    std::string rank = RankText(r.all);
    if (r.matcher == "cascade" && !r.all.found) {
      absl::StrAppend(&rank, " (not shortlisted)");
    }
    std::printf("| %s | %lld | %s of %lld | %s | %s | %s | %s | %.2f | %.2f |\n", r.matcher.c_str(),
                static_cast<long long>(r.gallery), rank.c_str(), static_cast<long long>(r.gallery),
                r.matcher == "cascade" ? "(stage 0)" : RankText(r.real).c_str(), ScoreText(r.all.mate_score).c_str(),
                NonMateText(r.all).c_str(), NonMateText(r.real).c_str(), r.wall_s, r.cpu_s);
  }
  std::fflush(stdout);
}

int Run(const Config& cfg0) {
  Config cfg = cfg0;
  const std::string data_dir = FingerprintDataDirOrExit(cfg.data_dir);
  if (cfg.transaction.empty()) {
    cfg.transaction = data_dir + "/nist/ansi-nist-reference/type-13-14-latent-match.an2";
  }
  if (cfg.probe_transaction.empty()) cfg.probe_transaction = cfg.transaction;
  const bool gpu = cfg.device == "cuda" || (cfg.device == "auto" && DeviceRegistry::Get().cuda_available());
  std::printf("fingerprint_latent_rank_bench: %s; %d CPU threads; searcher device %s; data %s\n",
              DeviceRegistry::Get().Describe().c_str(), CpuThreads(), cfg.device.c_str(), data_dir.c_str());

  // Probe and mate.
  const double p0 = NowSeconds();
  auto mate_t = ReadTransaction(cfg.transaction);
  if (!mate_t.ok()) {
    std::fprintf(stderr, "%s\n", mate_t.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<LoadedTransaction>> probe_own;
  if (cfg.probe_transaction != cfg.transaction) {
    probe_own = ReadTransaction(cfg.probe_transaction);
    if (!probe_own.ok()) {
      std::fprintf(stderr, "%s\n", probe_own.status().ToString().c_str());
      return 1;
    }
  }
  const LoadedTransaction& mate_tx = **mate_t;
  const LoadedTransaction& probe_tx = cfg.probe_transaction != cfg.transaction ? **probe_own : mate_tx;
  auto probe = PickFinger(probe_tx, cfg.probe_idc);
  auto mate = PickFinger(mate_tx, cfg.mate_idc);
  for (const absl::Status& s : {probe.status(), mate.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  if (!cfg.extract_tag.empty() || !cfg.probe_roi.empty()) {
    // TemplatesFromTransaction extracts with the defaults and the whole
    // image: redo the extracted fingers with --extract.* and --probe-roi.
    for (auto [f, tx, idc] : {std::tuple<Finger*, const LoadedTransaction*, int>{&*probe, &probe_tx, cfg.probe_idc},
                              {&*mate, &mate_tx, cfg.mate_idc}}) {
      const ansi_nist::ImageView* v = tx->ImageOf(idc);
      if (f->finger.source != "extracted" || v == nullptr) continue;
      absl::StatusOr<ImageTemplate> t = ExtractImage(*v, cfg.extract, f == &*probe ? cfg.probe_roi : Roi());
      absl::StatusOr<std::vector<MinutiaPoint>> points =
          t.ok() ? PointsOfRecord(t->record) : absl::StatusOr<std::vector<MinutiaPoint>>(t.status());
      if (!points.ok()) {
        std::fprintf(stderr, "%s IDC %d with %s: %s\n", tx->path.c_str(), idc, cfg.extract_tag.c_str(),
                     points.status().ToString().c_str());
        return 1;
      }
      f->finger.record = t->record;
      f->finger.minutiae = static_cast<int>(points->size());
      f->finger.quality = t->quality.score;
      f->points = *std::move(points);
    }
    std::printf("extraction options changed: %s%s (probe and mate re-extracted)\n",
                cfg.extract_tag.empty() ? "defaults" : cfg.extract_tag.c_str(),
                cfg.probe_roi.empty() ? ""
                                      : absl::StrFormat("; probe image cropped to x %d-%d, y %d-%d", cfg.probe_roi.x0,
                                                        cfg.probe_roi.x1, cfg.probe_roi.y0, cfg.probe_roi.y1)
                                            .c_str());
  }
  std::printf("transactions read and extracted in %.1f s\n", NowSeconds() - p0);
  const auto describe = [](const char* what, const Finger& f) {
    std::printf("%s: %s IDC %d (Type-%d, FGP %d, IMP %d): %s, %zu minutiae, quality %s\n", what, f.file.c_str(),
                f.finger.idc, f.finger.record_type, f.finger.position, f.finger.impression_type,
                f.finger.source.c_str(), f.points.size(),
                f.finger.quality < 0 ? "- (markup)" : absl::StrCat(f.finger.quality).c_str());
  };
  describe("probe", *probe);
  describe("mate ", *mate);
  {
    std::string probe_sha;
    const ansi_nist::ImageView* probe_image = probe_tx.ImageOf(cfg.probe_idc, &probe_sha);
    const ansi_nist::ImageView* mate_image = mate_tx.ImageOf(cfg.mate_idc);
    if (probe_image != nullptr) {
      for (size_t i = 0; i < mate_tx.images.size(); ++i) {
        if (&probe_tx != &mate_tx && mate_tx.image_sha256[i] == probe_sha) {
          std::printf("the probe's image (%s IDC %d) is byte for byte the image of %s IDC %d\n",
                      cfg.probe_transaction.c_str(), cfg.probe_idc, cfg.transaction.c_str(), mate_tx.images[i].idc);
        }
      }
    }
    const auto overlay = [&](const ansi_nist::ImageView* v, const char* name, const std::vector<MinutiaPoint>* markup,
                             const Roi& roi) {
      if (v == nullptr) return;
      absl::StatusOr<ImageTemplate> t = ExtractImage(*v, cfg.extract, roi);
      if (!t.ok()) {
        std::printf("%s image: %s\n", name, t.status().ToString().c_str());
        return;
      }
      std::printf("%s image extracted: %zu minutiae, quality %d\n", name, t->extraction.view.minutiae.size(),
                  t->quality.score);
      if (markup != nullptr) {
        auto points = PointsOfRecord(t->record);
        if (points.ok()) CompareMarkupWithExtraction(*markup, Shifted(*points, roi.x0, roi.y0));
      }
      if (cfg.overlays.empty()) return;
      constexpr int kScale = 1;
      Image8 img = DrawMinutiaeOverlay(t->extraction, kScale);
      if (markup != nullptr) DrawPoints(Shifted(*markup, -roi.x0, -roi.y0), kScale, &img);
      std::error_code ec;
      fs::create_directories(cfg.overlays, ec);
      const std::string path = (fs::path(cfg.overlays) / (std::string(name) + ".png")).string();
      const absl::Status w = WritePng(img, path);
      std::printf("%s overlay: %s\n", name, w.ok() ? path.c_str() : w.ToString().c_str());
    };
    // The probe's image: with its markup drawn over the extraction when the probe is markup.
    overlay(probe_image, "probe", probe->finger.source == "markup" ? &probe->points : nullptr, cfg.probe_roi);
    overlay(mate_image, "mate", nullptr, Roi());
  }

  // The real background.
  auto fvc = LoadFvc(cfg, data_dir);
  if (!fvc.ok()) {
    std::fprintf(stderr, "%s\n", fvc.status().ToString().c_str());
    return 1;
  }
  {
    double minutiae = 0, quality = 0;
    std::map<std::string, int> per_db;
    for (const FvcTemplate& t : fvc->templates) {
      minutiae += t.points.size();
      quality += t.quality;
      ++per_db[t.name.substr(0, t.name.find('/'))];
    }
    std::string dbs;
    for (const auto& [db, n] : per_db) absl::StrAppend(&dbs, dbs.empty() ? "" : ", ", db, " ", n);
    const double n = std::max<size_t>(1, fvc->templates.size());
    std::printf("FVC2002: %d %s (%s); %zu templates (%d failed): %d extracted now, %d from the cache %s, in %.1f s; "
                "mean %.1f minutiae, mean finger quality %.1f\n",
                fvc->images, cfg.fvc_templates ? "shipped templates" : "images", dbs.c_str(), fvc->templates.size(),
                fvc->failed, fvc->extracted,
                cfg.fvc_templates ? 0 : static_cast<int>(fvc->templates.size()) - fvc->extracted,
                cfg.cache.empty() ? "(none)" : cfg.cache.c_str(), fvc->extract_seconds, minutiae / n, quality / n);
  }

  // The searcher: FVC templates and the mate.
  SearcherOptions so;
  so.device = cfg.device;
  so.cascade_candidates = cfg.cascade_candidates;
  auto created = CreateSearcher(so);
  if (!created.ok()) {
    std::fprintf(stderr, "searcher: %s\n", Message(created.status()).c_str());
    return 1;
  }
  GallerySearcher& searcher = **created;
  {
    std::vector<std::shared_ptr<const StoredTemplate>> real;
    const auto stored = [](std::string id, const std::vector<uint8_t>& record, std::vector<MinutiaPoint> points) {
      auto t = std::make_shared<StoredTemplate>();
      t->id = std::move(id);
      t->format = TemplateFormat::kIso19794;
      t->bytes.assign(record.begin(), record.end());
      t->minutiae = std::move(points);
      return t;
    };
    for (const FvcTemplate& t : fvc->templates) real.push_back(stored(kFvcPrefix + t.name, t.record, t.points));
    real.push_back(stored(kMateId, mate->finger.record, mate->points));
    if (absl::Status s = searcher.Add(real); !s.ok()) {
      std::fprintf(stderr, "searcher: %s\n", Message(s).c_str());
      return 1;
    }
  }
  const int64_t real_count = searcher.size();

  // The synthetic background from the FVC templates (never the probe or the mate).
  std::vector<int64_t> sizes = cfg.synthetic;
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  std::vector<BaseTemplate> bases;
  for (const FvcTemplate& t : fvc->templates) bases.push_back({t.points, t.db * 1000 + t.finger});
  SyntheticGalleryOptions go;
  go.seed = cfg.seed;
  go.size = sizes.empty() ? 0 : sizes.back();
  go.mated_templates = 0;
  auto synthetic = SyntheticGallery::Create(bases, go);
  absl::StatusOr<Stream> build_stream = gpu ? Stream::Create(Backend::kCuda) : absl::StatusOr<Stream>(Stream::Cpu());
  for (const absl::Status& s : {synthetic.status(), build_stream.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", Message(s).c_str());
      return 1;
    }
  }
  if (go.size > 0) {
    double m = 0;
    const int64_t sample = std::min<int64_t>(go.size, 2000);
    for (int64_t i = 0; i < sample; ++i) m += synthetic->Minutiae(i * (go.size / sample)).size();
    std::printf("synthetic: seed %llu, up to %lld templates of synthetic identities (none mated), %zu real bases; "
                "mean %.1f minutiae (%lld sampled)\n",
                static_cast<unsigned long long>(cfg.seed), static_cast<long long>(go.size), bases.size(), m / sample,
                static_cast<long long>(sample));
  }

  std::vector<std::vector<Row>> stages;
  std::vector<std::string> active = cfg.matchers;
  sizes.erase(std::remove(sizes.begin(), sizes.end(), 0), sizes.end());
  sizes.insert(sizes.begin(), 0);
  int64_t have = 0;
  for (int64_t size : sizes) {
    if (size > have) {
      const double g0 = NowSeconds();
      if (!Grow(*synthetic, *build_stream, have, size, &searcher)) return 1;
      std::printf("\nsynthetic %lld -> %lld: generated + descriptors (%s) + appended in %.1f s\n",
                  static_cast<long long>(have), static_cast<long long>(size), gpu ? "GPU" : "CPU", NowSeconds() - g0);
      have = size;
    }
    std::printf("\n== stage: %lld FVC2002 + 1 mate + %lld synthetic = %lld templates; load average %.2f ==\n",
                static_cast<long long>(real_count - 1), static_cast<long long>(size),
                static_cast<long long>(searcher.size()), bench::LoadAverage());
    std::vector<Row> rows;
    std::vector<std::string> still;
    for (const std::string& m : active) {
      Row row = SearchOnce(searcher, cfg, m, probe->points, size);
      if (m == "cascade" && row.ran && !row.all.found) {
        // The cascade's first stage: where LSS-R put the mate.
        for (const Row& r : rows) {
          if (r.matcher == "lssr" && r.ran) row.lssr_stage = r.all;
        }
      }
      if (row.ran) still.push_back(m);
      else std::printf("%s at %lld templates: %s after %.1f s; not run at larger sizes\n", m.c_str(),
                       static_cast<long long>(row.gallery), row.error.c_str(), row.wall_s);
      std::fflush(stdout);
      rows.push_back(std::move(row));
    }
    PrintStage(rows);
    for (const Row& r : rows) {
      if (r.matcher == "cascade" && r.ran && !r.all.found && r.lssr_stage.found) {
        std::printf("cascade: the mate is outside the %d-candidate LSS-R shortlist (LSS-R rank %s)\n",
                    cfg.cascade_candidates, RankText(r.lssr_stage).c_str());
      }
    }
    stages.push_back(std::move(rows));
    active = still;
  }

  // Summary: per matcher, the FVC part alone (stage 0) and the largest stage it ran.
  std::printf("\n## Summary: probe %s IDC %d (%s, %zu minutiae), mate %s IDC %d (%zu minutiae)\n\n",
              fs::path(cfg.probe_transaction).filename().c_str(), cfg.probe_idc, probe->finger.source.c_str(),
              probe->points.size(), fs::path(cfg.transaction).filename().c_str(), cfg.mate_idc, mate->points.size());
  std::printf("| matcher | rank among FVC2002 + mate (N = %lld) | largest background run | rank among N | mate score | "
              "best non-mate (FVC part) | best non-mate (all) | s/search (wall) | CPU s/search |\n"
              "|---|---:|---:|---:|---:|---|---|---:|---:|\n",
              static_cast<long long>(real_count));
  for (const std::string& m : cfg.matchers) {
    const Row* first = nullptr;
    const Row* last = nullptr;
    for (const auto& rows : stages) {
      for (const Row& r : rows) {
        if (r.matcher != m || !r.ran) continue;
        if (first == nullptr) first = &r;
        last = &r;
      }
    }
    if (first == nullptr) {
      std::printf("| %s | not run | | | | | | | |\n", m.c_str());
      continue;
    }
    std::printf("| %s | %s | %lld synthetic | **%s of %lld** | %s | %s | %s | %.2f | %.2f |\n", m.c_str(),
                RankText(first->all).c_str(), static_cast<long long>(last->synthetic), RankText(last->all).c_str(),
                static_cast<long long>(last->gallery), ScoreText(last->all.mate_score).c_str(),
                NonMateText(first->all).c_str(), NonMateText(last->all).c_str(), last->wall_s, last->cpu_s);
  }
  return 0;
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera

int main(int argc, char** argv) {
  using namespace tessera::fingerprint;
  Config cfg;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    // "--name=value" or "--name value".
    auto value = [&](const char* name) { return tessera::bench::FlagValueOrNext(argc, argv, &i, name); };
    int64_t n = 0;
    bool ok = true;
    if (const char* v = value("--transaction")) {
      cfg.transaction = v;
    } else if (const char* v = value("--probe-transaction")) {
      cfg.probe_transaction = v;
    } else if (const char* v = value("--probe-idc")) {
      ok = absl::SimpleAtoi(v, &n) && n >= 0 && n <= 255;
      cfg.probe_idc = static_cast<int>(n);
    } else if (const char* v = value("--mate-idc")) {
      ok = absl::SimpleAtoi(v, &n) && n >= 0 && n <= 255;
      cfg.mate_idc = static_cast<int>(n);
    } else if (const char* v = value("--cache")) {
      cfg.cache = v;
    } else if (std::strcmp(a, "--refresh-cache") == 0) {
      cfg.refresh_cache = true;
    } else if (std::strcmp(a, "--fvc-templates") == 0) {
      cfg.fvc_templates = true;
    } else if (const char* v = value("--synthetic")) {
      ok = tessera::bench::ParseIntList(v, 0, (int64_t{1} << 31) - 2, &cfg.synthetic);
    } else if (const char* v = value("--seed")) {
      ok = absl::SimpleAtoi(v, &cfg.seed);
    } else if (const char* v = value("--matchers")) {
      cfg.matchers = absl::StrSplit(v, ',', absl::SkipEmpty());
      for (const std::string& m : cfg.matchers) {
        const std::vector<std::string> known = SearcherMatchers();
        ok = ok && std::find(known.begin(), known.end(), m) != known.end();
      }
      ok = ok && !cfg.matchers.empty();
    } else if (const char* v = value("--cascade-candidates")) {
      ok = absl::SimpleAtoi(v, &n) && n >= 1 && n <= kMaxCascadeCandidates;
      cfg.cascade_candidates = static_cast<int>(n);
    } else if (const char* v = value("--device")) {
      cfg.device = v;
      ok = cfg.device == "auto" || cfg.device == "cpu" || cfg.device == "cuda";
    } else if (const char* v = value("--deadline-s")) {
      ok = absl::SimpleAtod(v, &cfg.deadline_s) && cfg.deadline_s > 0;
    } else if (const char* v = value("--data")) {
      cfg.data_dir = v;
    } else if (const char* v = value("--overlays")) {
      cfg.overlays = v;
    } else if (const char* v = value("--probe-roi")) {
      std::vector<int64_t> r;
      ok = tessera::bench::ParseIntList(v, 0, kMaxCoordinate, &r) && r.size() == 4 && r[0] < r[2] && r[1] < r[3];
      if (ok) cfg.probe_roi = {static_cast<int>(r[0]), static_cast<int>(r[1]), static_cast<int>(r[2]), static_cast<int>(r[3])};
    } else if (std::strncmp(a, "--extract.", 10) == 0 && std::strchr(a, '=') != nullptr) {
      const std::string name(a + 10, std::strchr(a, '=') - (a + 10));
      ok = absl::SimpleAtoi(std::strchr(a, '=') + 1, &n);
      if (name == "max_minutiae") {
        ok = ok && n >= 1 && n <= kMccMaxMinutiae;
        cfg.extract.max_minutiae = static_cast<int>(n);
      } else if (name == "min_quality") {
        ok = ok && n >= 0 && n <= 100;
        cfg.extract.min_quality = static_cast<int>(n);
      } else if (name == "border_margin") {
        ok = ok && n >= 0 && n <= 1000;
        cfg.extract.border_margin = static_cast<int>(n);
      } else {
        ok = false;
      }
      if (ok) absl::StrAppend(&cfg.extract_tag, cfg.extract_tag.empty() ? "" : ",", name, "-", n);
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr,
                   "usage: %s [--transaction=FILE] [--probe-transaction=FILE] [--probe-idc=N] [--mate-idc=M]\n"
                   "          [--cache=DIR] [--refresh-cache] [--fvc-templates] [--synthetic=N[,N...]] [--seed=S]\n"
                   "          [--matchers=lssr,dmc,fusion,cascade] [--cascade-candidates=C (1-%d)]\n"
                   "          [--device=auto|cpu|cuda] [--deadline-s=T] [--data=DIR] [--overlays=DIR]\n"
                   "          [--extract.max_minutiae=N] [--extract.min_quality=Q] [--extract.border_margin=PX]\n"
                   "          [--probe-roi=X0,Y0,X1,Y1]\n",
                   argv[0], kMaxCascadeCandidates);
      return 2;
    }
  }
  return Run(cfg);
}

// Accuracy of the minutiae extractor on FVC2002 DB1-DB4 set B: the same
// matcher and protocol (services/fingerprint/eval/eval.h) on the templates we
// extract from the images and on the shipped templates a commercial extractor
// (SecuGen) made from the same images, plus how our minutiae line up with
// theirs and the extraction time.
//   bazel-bin/bench/fingerprint_extract_eval [--db=N] [--data=DIR] [--overlays=DIR]
//       [--matcher=mcc|dmc|fusion] [--extract.NAME=VALUE ...] (ExtractOptions fields)
// TESSERA_EXTRACT_VERBOSE=1: per-image counts, score tails, per-impression
// genuine misses at FMR 1 %, and overlays of every impression (not only 1-2).
//       [--templates=DIR [--templates-ext=xyt] [--templates-xyt=topleft|nist]]
// --templates evaluates another extractor's templates in place of ours:
// DIR/DB<n>_B/<finger>_<impression>.<ext>, any format ReadTemplateFile reads,
// one view in the pixels of the image at 500 ppi (DB2 resampled as below);
// .xyt gets that image's size and the --templates-xyt convention. They then
// fill every "ours" column; our extraction still runs for the image quality
// (error vs reject), the overlays' skeleton and ms/image.
// The shipped templates were made from images resized to 300 x 400 (see
// ../shared/data/fingerprint/SOURCES-images.txt): for the comparison of
// minutiae their coordinates are scaled back to the image's pixels.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/fingerprint_data.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/png_io.h"
#include "services/fingerprint/eval/eval.h"
#include "services/fingerprint/extract/extractor.h"
#include "services/fingerprint/extract/image_quality.h"
#include "services/fingerprint/formats/fvc_data.h"
#include "services/fingerprint/formats/template_io.h"
#include "services/fingerprint/image/image_decode.h"

namespace {

using namespace tessera;
using namespace tessera::fingerprint;

constexpr double kPi = 3.14159265358979323846;
// FVC2002 set B scanners (SOURCES-images.txt): DB2's FX2000 is 569 ppi.
constexpr double kDbPpi[5] = {0, 500, 569, 500, 500};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Minutiae drawn 3x enlarged on the image: skeleton cyan, background
// darkened, our endings red and bifurcations green with a tail along the
// direction, the shipped minutiae blue.
void WriteOverlay(const GrayImage& image, const Extraction& ex, const Template& shipped, double sx, double sy,
                  const std::string& path) {
  constexpr int kScale = 3;
  const int w = ex.view.width, h = ex.view.height;
  Image8 img = Image8::Make(w * kScale, h * kScale, 3);
  const auto put = [&](double fx, double fy, uint8_t r, uint8_t g, uint8_t b) {
    const int x = static_cast<int>(std::lround(fx * kScale)), y = static_cast<int>(std::lround(fy * kScale));
    if (x < 0 || y < 0 || x >= w * kScale || y >= h * kScale) return;
    img.at(x, y, 0) = r, img.at(x, y, 1) = g, img.at(x, y, 2) = b;
  };
  for (int y = 0; y < h * kScale; ++y) {
    for (int x = 0; x < w * kScale; ++x) {
      const int px = x / kScale, py = y / kScale;
      uint8_t v = image.at(px, py);
      if (!ex.field.ForegroundAt(px, py)) v = static_cast<uint8_t>(v / 3);
      const bool sk = ex.skeleton[static_cast<size_t>(py) * w + px];
      img.at(x, y, 0) = sk ? 0 : v;
      img.at(x, y, 1) = sk ? 200 : v;
      img.at(x, y, 2) = sk ? 200 : v;
    }
  }
  for (const Minutia& m : shipped.minutiae) {
    const double x = m.x * sx, y = m.y * sy;
    const double a = std::atan2(std::sin(m.angle) * sy, std::cos(m.angle) * sx);
    for (double t = -1; t <= 1; t += 0.34) put(x + t, y, 0, 0, 255), put(x, y + t, 0, 0, 255);
    for (double t = 1; t < 8; t += 0.3) put(x + t * std::cos(a), y - t * std::sin(a), 0, 0, 255);
  }
  for (const Minutia& m : ex.view.minutiae) {
    const bool ending = m.type == MinutiaType::kEnding;
    const uint8_t r = ending ? 255 : 0, g = ending ? 0 : 220;
    for (double t = 0; t < 2 * kPi; t += 0.2) put(m.x + 2 * std::cos(t), m.y + 2 * std::sin(t), r, g, 0);
    for (double t = 2; t < 10; t += 0.3) put(m.x + t * std::cos(m.angle), m.y - t * std::sin(m.angle), r, g, 0);
  }
  WritePng(img, path).IgnoreError();
}

// The score threshold where FMR is 1 % over all impostor pairs of `e`.
double ThresholdAtFmr1(const DbEvaluation& e, const std::vector<int>& labels) {
  const int n = e.templates;
  std::vector<double> impostor;
  for (int p = 0; p < n; ++p)
    for (int g = 0; g < n; ++g)
      if (p != g && labels[p] != labels[g]) impostor.push_back(e.scores[static_cast<size_t>(p) * n + g]);
  std::sort(impostor.begin(), impostor.end());
  return impostor[static_cast<size_t>(0.99 * (impostor.size() - 1))];
}

// FNMR at `threshold` after rejecting the impressions ranked first in
// `reject_order` (a share of them): the error-versus-reject curve of
// ISO/IEC 29794-1.
double FnmrAfterRejecting(const DbEvaluation& e, const std::vector<int>& labels, double threshold,
                          const std::vector<int>& reject_order, double share) {
  const int n = e.templates;
  std::vector<bool> rejected(n, false);
  const int count = static_cast<int>(std::lround(share * n));
  for (int i = 0; i < count; ++i) rejected[reject_order[i]] = true;
  int genuine = 0, missed = 0;
  for (int p = 0; p < n; ++p)
    for (int g = 0; g < n; ++g)
      if (p != g && labels[p] == labels[g] && !rejected[p] && !rejected[g]) {
        ++genuine;
        missed += e.scores[static_cast<size_t>(p) * n + g] <= threshold;
      }
  return genuine ? static_cast<double>(missed) / genuine : 0;
}

// Where the genuine tail meets the impostors (ours and shipped), and per
// impression its genuine pairs (as probe or gallery, 14) rejected at FMR 1 %:
// which prints fail.
void PrintGenuineDiagnostics(int db, const std::vector<FvcImpression>& imps, const DbEvaluation& mine,
                             const DbEvaluation& theirs) {
  std::vector<int> labels;
  for (const FvcImpression& imp : imps) labels.push_back(imp.finger);
  const int n = mine.templates;
  const auto score = [n](const DbEvaluation& e, int p, int g) { return e.scores[static_cast<size_t>(p) * n + g]; };
  for (const DbEvaluation* e : {&mine, &theirs}) {
    std::vector<double> gen, imp;
    for (int p = 0; p < n; ++p)
      for (int g = 0; g < n; ++g)
        if (p != g) (labels[p] == labels[g] ? gen : imp).push_back(score(*e, p, g));
    std::sort(gen.begin(), gen.end());
    std::sort(imp.begin(), imp.end());
    std::fprintf(stderr, "DB%d %s: genuine p5 %.3f p10 %.3f p50 %.3f; impostor p50 %.3f p99 %.3f max %.3f\n", db,
                 e == &mine ? "ours" : "shipped", gen[gen.size() / 20], gen[gen.size() / 10], gen[gen.size() / 2],
                 imp[imp.size() / 2], imp[imp.size() * 99 / 100], imp.back());
  }
  const double t_ours = ThresholdAtFmr1(mine, labels), t_theirs = ThresholdAtFmr1(theirs, labels);
  for (int p = 0; p < n; ++p) {
    int miss_ours = 0, miss_theirs = 0;
    for (int g = 0; g < n; ++g) {
      if (p == g || labels[p] != labels[g]) continue;
      miss_ours += (score(mine, p, g) <= t_ours) + (score(mine, g, p) <= t_ours);
      miss_theirs += (score(theirs, p, g) <= t_theirs) + (score(theirs, g, p) <= t_theirs);
    }
    std::fprintf(stderr, "DB%d %d_%d: genuine misses at FMR 1%% ours %d shipped %d (of 14)\n", db, imps[p].finger,
                 imps[p].impression, miss_ours, miss_theirs);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string data_dir, overlays, templates_dir, templates_ext = "xyt";
  XytConvention templates_xyt = XytConvention::kTopLeft;
  int only_db = 0;
  EvalOptions eval;
  ExtractOptions extract;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strncmp(a, "--db=", 5) == 0) only_db = std::atoi(a + 5);
    else if (std::strncmp(a, "--data=", 7) == 0) data_dir = a + 7;
    else if (std::strncmp(a, "--overlays=", 11) == 0) overlays = a + 11;
    else if (std::strncmp(a, "--templates=", 12) == 0) templates_dir = a + 12;
    else if (std::strncmp(a, "--templates-ext=", 16) == 0) templates_ext = a + 16;
    else if (std::strcmp(a, "--templates-xyt=nist") == 0) templates_xyt = XytConvention::kNist;
    else if (std::strcmp(a, "--templates-xyt=topleft") == 0) templates_xyt = XytConvention::kTopLeft;
    else if (std::strncmp(a, "--extract.", 10) == 0 && std::strchr(a, '=') != nullptr) {
      const std::string name(a + 10, std::strchr(a, '=') - (a + 10));
      const float v = std::strtof(std::strchr(a, '=') + 1, nullptr);
      if (name == "border_margin") extract.border_margin = static_cast<int>(v);
      else if (name == "spur_length") extract.spur_length = v;
      else if (name == "break_distance") extract.break_distance = v;
      else if (name == "cluster_radius") extract.cluster_radius = v;
      else if (name == "break_offset") extract.break_offset = v;
      else if (name == "bridge_distance") extract.bridge_distance = v;
      else if (name == "min_quality") extract.min_quality = static_cast<int>(v);
      else if (name == "max_minutiae") extract.max_minutiae = static_cast<int>(v);
      else if (name == "contrast_share") extract.field.contrast_share = v;
      else if (name == "sigma_along") extract.gabor.sigma_along = v;
      else if (name == "sigma_across") extract.gabor.sigma_across = v;
      else if (name == "angle_sigma") extract.field.angle_sigma_blocks = v;
      else if (name == "tensor_sigma") extract.field.tensor_sigma_blocks = v;
      else if (name == "gabor_radius") extract.gabor.radius = static_cast<int>(v);
      else if (name == "gabor_directions") extract.gabor.directions = static_cast<int>(v);
      else if (name == "min_wavelength") extract.field.min_wavelength = v;
      else if (name == "max_wavelength") extract.field.max_wavelength = v;
      else if (name == "trace_steps") extract.trace_steps = static_cast<int>(v);
      else if (name == "wavelength_spread") extract.field.wavelength_spread = v;
      else {
        std::fprintf(stderr, "unknown extraction parameter %s\n", name.c_str());
        return 2;
      }
    }
    else if (std::strcmp(a, "--matcher=dmc") == 0) eval.matcher = EvalMatcher::kDmc;
    else if (std::strcmp(a, "--matcher=fusion") == 0) eval.matcher = EvalMatcher::kFusion;
    else if (std::strcmp(a, "--matcher=mcc") == 0) eval.matcher = EvalMatcher::kMcc;
    else {
      std::fprintf(stderr, "unknown flag %s\n", a);
      return 2;
    }
  }
  data_dir = FingerprintDataDirOrExit(data_dir);
  if (!templates_dir.empty()) std::printf("\"ours\" = the templates in %s (ms/image: our extraction)\n\n", templates_dir.c_str());
  std::printf("| DB | templates | EER %% ours | EER %% shipped | ratio | rank-1 %% ours | rank-1 %% shipped | minutiae ours | minutiae shipped | recall | precision | angle err deg (median) | ms/image |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int db = 1; db <= 4; ++db) {
    if (only_db != 0 && db != only_db) continue;
    auto shipped = LoadFvc2002(data_dir, db);
    if (!shipped.ok()) {
      std::fprintf(stderr, "%s\n", std::string(shipped.status().message()).c_str());
      return 1;
    }
    std::vector<FvcImpression> ours = *shipped;
    double extract_seconds = 0;
    int matched = 0, shipped_total = 0, ours_total = 0;
    std::vector<int> qualities;
    std::vector<double> angle_errors, ending_errors, bif_errors;
    int type_agree = 0;
    for (size_t k = 0; k < ours.size(); ++k) {
      FvcImpression& imp = ours[k];
      std::string tif = imp.path.substr(0, imp.path.size() - 4) + ".tif";
      const std::string bytes = ReadFile(tif);
      DecodeOptions d;
      d.ppi = kDbPpi[db];
      const auto t0 = std::chrono::steady_clock::now();
      auto image = DecodeGrayImage(bytes, d);
      if (!image.ok()) {
        std::fprintf(stderr, "%s: %s\n", tif.c_str(), std::string(image.status().message()).c_str());
        return 1;
      }
      auto at500 = ResampleTo500Ppi(*image);
      if (!at500.ok()) {
        std::fprintf(stderr, "%s: %s\n", tif.c_str(), std::string(at500.status().message()).c_str());
        return 1;
      }
      auto ex = ExtractMinutiae(*at500, extract);
      extract_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!ex.ok()) {
        std::fprintf(stderr, "%s: %s\n", tif.c_str(), std::string(ex.status().message()).c_str());
        return 1;
      }
      qualities.push_back(AssessImageQuality(*ex).score);
      if (!templates_dir.empty()) {
        const std::string path =
            absl::StrCat(templates_dir, "/DB", db, "_B/", imp.finger, "_", imp.impression, ".", templates_ext);
        XytOptions xyt;
        xyt.convention = templates_xyt;
        xyt.width = at500->width;
        xyt.height = at500->height;
        auto views = ReadTemplateFile(path, xyt);
        if (!views.ok() || views->size() != 1 || (*views)[0].width != at500->width ||
            (*views)[0].height != at500->height) {
          std::fprintf(stderr, "%s: %s\n", path.c_str(),
                       views.ok() ? "not one view of the 500 ppi image's size" : std::string(views.status().message()).c_str());
          return 1;
        }
        ex->view = (*views)[0];
      }
      imp.view = ex->view;
      if (std::getenv("TESSERA_EXTRACT_VERBOSE") != nullptr) {
        std::fprintf(stderr, "DB%d %d_%d: ours %zu shipped %zu\n", db, imp.finger, imp.impression,
                     ex->view.minutiae.size(), (*shipped)[k].view.minutiae.size());
      }
      // Shipped minutiae in the 500-ppi image's pixels.
      const double sx = static_cast<double>(image->width) / 300 * 500 / kDbPpi[db];
      const double sy = static_cast<double>(image->height) / 400 * 500 / kDbPpi[db];
      const Template& sg = (*shipped)[k].view;
      shipped_total += sg.minutiae.size();
      ours_total += ex->view.minutiae.size();
      for (const Minutia& s : sg.minutiae) {
        const double x = s.x * sx, y = s.y * sy;
        double best = 1e9;
        const Minutia* hit = nullptr;
        for (const Minutia& m : ex->view.minutiae) {
          const double dd = std::hypot(m.x - x, m.y - y);
          if (dd < best) best = dd, hit = &m;
        }
        if (hit != nullptr && best <= 8) {
          ++matched;
          // Their angle in the resized frame, mapped back through the anisotropic scale.
          const double a = std::atan2(std::sin(s.angle) * sy, std::cos(s.angle) * sx);
          double e = std::fmod(std::fabs(a - hit->angle), 2 * kPi);
          if (e > kPi) e = 2 * kPi - e;
          angle_errors.push_back(e * 180 / kPi);
          type_agree += s.type == hit->type;
          (hit->type == MinutiaType::kEnding ? ending_errors : bif_errors).push_back(e * 180 / kPi);
        }
      }
      if (!overlays.empty() && (imp.impression <= 2 || std::getenv("TESSERA_EXTRACT_VERBOSE") != nullptr)) {
        WriteOverlay(*at500, *ex, sg, sx, sy, absl::StrCat(overlays, "/db", db, "_", imp.finger, "_", imp.impression, ".png"));
      }
    }
    auto mine = EvaluateImpressions(ours, eval);
    auto theirs = EvaluateImpressions(*shipped, eval);
    if (!mine.ok() || !theirs.ok()) {
      std::fprintf(stderr, "evaluation failed\n");
      return 1;
    }
    std::sort(angle_errors.begin(), angle_errors.end());
    const double median_angle = angle_errors.empty() ? 0 : angle_errors[angle_errors.size() / 2];
    std::printf("| DB%d | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %.1f | %.2f | %.2f | %.1f | %.1f |\n", db,
                mine->templates, 100 * mine->verification.eer, 100 * theirs->verification.eer,
                theirs->verification.eer > 0 ? mine->verification.eer / theirs->verification.eer : 0,
                100 * mine->identification.rank1, 100 * theirs->identification.rank1, mine->mean_minutiae,
                theirs->mean_minutiae, shipped_total ? static_cast<double>(matched) / shipped_total : 0,
                ours_total ? static_cast<double>(matched) / ours_total : 0, median_angle,
                1000 * extract_seconds / ours.size());
    {
      std::vector<int> labels, by_quality(ours.size());
      for (const FvcImpression& imp : ours) labels.push_back(imp.finger);
      std::iota(by_quality.begin(), by_quality.end(), 0);
      std::stable_sort(by_quality.begin(), by_quality.end(), [&](int a, int b) { return qualities[a] < qualities[b]; });
      const double threshold = ThresholdAtFmr1(*mine, labels);
      std::string line = absl::StrCat("DB", db, " error vs reject (FNMR % at FMR 1 %, by quality | random):");
      for (double share : {0.0, 0.05, 0.10, 0.20}) {
        double random = 0;
        std::mt19937 rng(20261206);
        for (int r = 0; r < 50; ++r) {
          std::vector<int> order = by_quality;
          std::shuffle(order.begin(), order.end(), rng);
          random += FnmrAfterRejecting(*mine, labels, threshold, order, share) / 50;
        }
        absl::StrAppend(&line, absl::StrFormat(" %d%%: %.2f | %.2f;", static_cast<int>(share * 100),
                                               100 * FnmrAfterRejecting(*mine, labels, threshold, by_quality, share), 100 * random));
      }
      int qmin = 100, qmax = 0;
      double qmean = 0;
      for (int q : qualities) qmin = std::min(qmin, q), qmax = std::max(qmax, q), qmean += q;
      absl::StrAppend(&line, absl::StrFormat(" quality min %d mean %.1f max %d", qmin, qmean / qualities.size(), qmax));
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    if (std::getenv("TESSERA_EXTRACT_VERBOSE") != nullptr) PrintGenuineDiagnostics(db, ours, *mine, *theirs);
    std::sort(ending_errors.begin(), ending_errors.end());
    std::sort(bif_errors.begin(), bif_errors.end());
    std::fprintf(stderr, "DB%d: matched minutiae of the same type %.2f; median angle error endings %.1f, bifurcations %.1f deg\n",
                 db, matched ? static_cast<double>(type_agree) / matched : 0,
                 ending_errors.empty() ? 0 : ending_errors[ending_errors.size() / 2],
                 bif_errors.empty() ? 0 : bif_errors[bif_errors.size() / 2]);
    std::fflush(stdout);
  }
  return 0;
}

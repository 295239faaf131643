// How well the pairs behind an LSS-R score agree on one rigid alignment
// (services/fingerprint/search/match_explain.h), genuine against impostor,
// on FVC2002 set B (CPU), from the shipped ISO templates or, with
// --source=images, from our extraction of the TIFF images (image_template.h,
// at 500 ppi: DB2's 569-ppi images resampled):
//   bazel-bin/bench/fingerprint_match_residuals [--db=N] [--data=DIR] [--bound=PX]
//       [--source=templates|images]
// Genuine: every two impressions of a finger (28 x 10 per DB, the earlier
// impression as probe). Impostor: every two impressions of different fingers
// (2880 per DB). Prints per DB the RMS residual percentiles of both, the
// pairs without an alignment (fewer than 2 pairs), and the share of each at
// or below --bound (default kGenuineRmsResidualBound); then the same pooled.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "bench/fingerprint_data.h"
#include "common/parallel.h"
#include "services/fingerprint/extract/image_template.h"
#include "services/fingerprint/formats/fvc_data.h"
#include "services/fingerprint/formats/template_io.h"
#include "services/fingerprint/search/match_explain.h"

namespace tessera::fingerprint {
namespace {

struct Residuals {
  std::vector<double> rms;    // aligned comparisons
  std::vector<double> score;  // all comparisons
  int unaligned = 0;
};

// FVC2002 set B scanners (SOURCES-images.txt): DB2's FX2000 is 569 ppi.
constexpr double kDbPpi[5] = {0, 500, 569, 500, 500};

std::vector<MinutiaPoint> Points(const Template& t) {
  std::vector<MinutiaPoint> out;
  for (const Minutia& m : t.minutiae) {
    out.push_back({static_cast<float>(m.x), static_cast<float>(m.y), static_cast<float>(m.angle)});
  }
  return out;
}

void Print(const char* label, const Residuals& r, double bound) {
  int below = 0;
  for (double v : r.rms) below += v <= bound;
  std::printf("  %-9s n=%5zu unaligned=%d  rms px: p5 %.2f p25 %.2f p50 %.2f p75 %.2f p90 %.2f p95 %.2f p99 %.2f "
              "max %.2f  <= %.2f: %.1f%%  score p50 %.3f\n",
              label, r.rms.size() + r.unaligned, r.unaligned, bench::Percentile(r.rms, 0.05),
              bench::Percentile(r.rms, 0.25), bench::Percentile(r.rms, 0.5), bench::Percentile(r.rms, 0.75),
              bench::Percentile(r.rms, 0.9), bench::Percentile(r.rms, 0.95), bench::Percentile(r.rms, 0.99),
              bench::Percentile(r.rms, 1.0), bound, r.rms.empty() ? 0.0 : 100.0 * below / r.rms.size(),
              bench::Percentile(r.score, 0.5));
}

// Every impression's minutiae: the shipped template's, or those extracted
// from its image (the record's, as a gallery stores them).
absl::StatusOr<std::vector<std::vector<MinutiaPoint>>> LoadPoints(const std::vector<FvcImpression>& imps, int db,
                                                                  bool images) {
  std::vector<absl::StatusOr<std::vector<MinutiaPoint>>> out(imps.size(), absl::UnknownError("not run"));
  ParallelForDynamic(static_cast<int64_t>(imps.size()), 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      if (!images) {
        out[i] = Points(imps[i].view);
        continue;
      }
      const std::string tif = imps[i].path.substr(0, imps[i].path.size() - 4) + ".tif";
      absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(tif);
      if (!bytes.ok()) {
        out[i] = bytes.status();
        continue;
      }
      ImageInput input;
      input.decode.ppi = kDbPpi[db];
      absl::StatusOr<ImageTemplate> t = TemplateFromImage(std::string(bytes->begin(), bytes->end()), input);
      if (!t.ok()) {
        out[i] = t.status();
        continue;
      }
      absl::StatusOr<std::vector<Template>> views = ParseTemplateRecord(t->record);
      if (!views.ok()) {
        out[i] = views.status();
        continue;
      }
      out[i] = Points((*views)[0]);
    }
  });
  std::vector<std::vector<MinutiaPoint>> points;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].ok()) return absl::Status(out[i].status().code(), absl::StrCat(imps[i].path, ": ", out[i].status().message()));
    points.push_back(std::move(*out[i]));
  }
  return points;
}

void Append(const Residuals& from, Residuals& to) {
  to.rms.insert(to.rms.end(), from.rms.begin(), from.rms.end());
  to.score.insert(to.score.end(), from.score.begin(), from.score.end());
  to.unaligned += from.unaligned;
}

int Run(int argc, char** argv) {
  std::string data;
  int only_db = 0;
  double bound = kGenuineRmsResidualBound;
  bool images = false;
  for (int i = 1; i < argc; ++i) {
    if (const char* v = bench::FlagValue(argv[i], "--data")) {
      data = v;
    } else if (const char* v = bench::FlagValue(argv[i], "--db")) {
      only_db = std::atoi(v);
    } else if (const char* v = bench::FlagValue(argv[i], "--bound")) {
      bound = std::atof(v);
    } else if (const char* v = bench::FlagValue(argv[i], "--source")) {
      images = std::string(v) == "images";
      if (!images && std::string(v) != "templates") {
        std::fprintf(stderr, "--source must be templates or images\n");
        return 2;
      }
    } else {
      std::fprintf(stderr, "usage: fingerprint_match_residuals [--db=1-4] [--data=DIR] [--bound=PX] [--source=templates|images]\n");
      return 2;
    }
  }
  data = FingerprintDataDirOrExit(data);
  Residuals all_genuine, all_impostor;
  for (int db = 1; db <= 4; ++db) {
    if (only_db != 0 && db != only_db) continue;
    absl::StatusOr<std::vector<FvcImpression>> imps = LoadFvc2002(data, db);
    if (!imps.ok()) {
      std::fprintf(stderr, "DB%d: %s\n", db, imps.status().ToString().c_str());
      return 1;
    }
    absl::StatusOr<std::vector<std::vector<MinutiaPoint>>> points = LoadPoints(*imps, db, images);
    if (!points.ok()) {
      std::fprintf(stderr, "DB%d: %s\n", db, points.status().ToString().c_str());
      return 1;
    }
    const int n = static_cast<int>(imps->size());
    std::vector<std::pair<int, int>> comparisons;
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j) comparisons.push_back({i, j});
    std::vector<absl::StatusOr<MatchExplanation>> out(comparisons.size(), absl::UnknownError("not run"));
    ParallelForDynamic(static_cast<int64_t>(comparisons.size()), 16, [&](int64_t begin, int64_t end, int) {
      for (int64_t k = begin; k < end; ++k) {
        out[k] = ExplainMatch((*points)[comparisons[k].first], (*points)[comparisons[k].second]);
      }
    });
    Residuals genuine, impostor;
    for (size_t k = 0; k < comparisons.size(); ++k) {
      if (!out[k].ok()) {
        std::fprintf(stderr, "DB%d %d vs %d: %s\n", db, comparisons[k].first, comparisons[k].second,
                     out[k].status().ToString().c_str());
        return 1;
      }
      const bool mates = (*imps)[comparisons[k].first].finger == (*imps)[comparisons[k].second].finger;
      Residuals& r = mates ? genuine : impostor;
      r.score.push_back(out[k]->score);
      if (out[k]->alignment.valid) {
        r.rms.push_back(out[k]->rms_residual);
      } else {
        ++r.unaligned;
      }
    }
    std::printf("DB%d_B (%s)\n", db, images ? "extracted from the images" : "shipped templates");
    Print("genuine", genuine, bound);
    Print("impostor", impostor, bound);
    Append(genuine, all_genuine);
    Append(impostor, all_impostor);
  }
  if (only_db == 0) {
    std::printf("DB1-4 pooled\n");
    Print("genuine", all_genuine, bound);
    Print("impostor", all_impostor, bound);
  }
  return 0;
}

}  // namespace
}  // namespace tessera::fingerprint

int main(int argc, char** argv) { return tessera::fingerprint::Run(argc, argv); }

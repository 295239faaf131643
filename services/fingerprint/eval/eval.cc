#include "services/fingerprint/eval/eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "common/status.h"
#include "services/fingerprint/search/fusion_score.h"
#include "services/fingerprint/formats/fvc_data.h"

namespace tessera {
namespace fingerprint {

VerificationMetrics ComputeVerificationMetrics(std::vector<double> genuine, std::vector<double> impostor) {
  VerificationMetrics m;
  m.genuine = static_cast<int>(genuine.size());
  m.impostor = static_cast<int>(impostor.size());
  if (genuine.empty() || impostor.empty()) return m;
  std::sort(genuine.begin(), genuine.end());
  std::sort(impostor.begin(), impostor.end());
  const double ng = genuine.size(), ni = impostor.size();
  // FMR(t) = #impostor >= t / ni; FNMR(t) = #genuine < t / ng.
  auto fmr = [&](double t) {
    return (impostor.end() - std::lower_bound(impostor.begin(), impostor.end(), t)) / ni;
  };
  auto fnmr = [&](double t) { return (std::lower_bound(genuine.begin(), genuine.end(), t) - genuine.begin()) / ng; };
  // Candidate thresholds: every distinct score, plus one above all.
  std::vector<double> thresholds(genuine);
  thresholds.insert(thresholds.end(), impostor.begin(), impostor.end());
  std::sort(thresholds.begin(), thresholds.end());
  thresholds.erase(std::unique(thresholds.begin(), thresholds.end()), thresholds.end());
  thresholds.push_back(std::nextafter(thresholds.back(), HUGE_VAL));
  // FMR falls and FNMR rises with t.
  double t1 = thresholds.front(), t2 = thresholds.back();
  for (double t : thresholds) {
    if (fnmr(t) <= fmr(t)) t1 = t;  // largest such t (ascending scan)
  }
  for (auto it = thresholds.rbegin(); it != thresholds.rend(); ++it) {
    if (fnmr(*it) >= fmr(*it)) t2 = *it;  // smallest such t (descending scan)
  }
  if (fnmr(t1) + fmr(t1) <= fmr(t2) + fnmr(t2)) {
    m.eer_low = fnmr(t1);
    m.eer_high = fmr(t1);
  } else {
    m.eer_low = fmr(t2);
    m.eer_high = fnmr(t2);
  }
  m.eer = 0.5 * (m.eer_low + m.eer_high);
  m.fmr100 = m.fmr1000 = m.zero_fmr = 1.0;
  for (double t : thresholds) {
    const double a = fmr(t), r = fnmr(t);
    if (a <= 0.01) m.fmr100 = std::min(m.fmr100, r);
    if (a <= 0.001) m.fmr1000 = std::min(m.fmr1000, r);
    if (a == 0.0) m.zero_fmr = std::min(m.zero_fmr, r);
  }
  return m;
}

IdentificationMetrics ComputeIdentification(const std::vector<float>& scores, const std::vector<int>& labels) {
  IdentificationMetrics m;
  const int n = static_cast<int>(labels.size());
  int rank1 = 0, rank10 = 0;
  for (int p = 0; p < n; ++p) {
    float best_mate = -1.0f;
    bool has_mate = false;
    for (int g = 0; g < n; ++g) {
      if (g == p || labels[g] != labels[p]) continue;
      has_mate = true;
      best_mate = std::max(best_mate, scores[static_cast<size_t>(p) * n + g]);
    }
    if (!has_mate) continue;
    int rank = 1;
    for (int g = 0; g < n; ++g) {
      if (g == p || labels[g] == labels[p]) continue;
      if (scores[static_cast<size_t>(p) * n + g] >= best_mate) ++rank;
    }
    m.ranks.push_back(rank);
    rank1 += rank <= 1;
    rank10 += rank <= 10;
  }
  m.probes = static_cast<int>(m.ranks.size());
  if (m.probes > 0) {
    m.rank1 = static_cast<double>(rank1) / m.probes;
    m.rank10 = static_cast<double>(rank10) / m.probes;
  }
  return m;
}

std::vector<MinutiaPoint> ToMinutiaPoints(const Template& t) {
  std::vector<MinutiaPoint> out;
  out.reserve(t.minutiae.size());
  for (const Minutia& m : t.minutiae) {
    out.push_back({static_cast<float>(m.x), static_cast<float>(m.y), static_cast<float>(m.angle)});
  }
  return out;
}

absl::StatusOr<DbEvaluation> EvaluateFvc2002Db(const std::string& data_dir, int db, const EvalOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<FvcImpression> imps, LoadFvc2002(data_dir, db));
  TESSERA_ASSIGN_OR_RETURN(DbEvaluation e, EvaluateImpressions(imps, options));
  e.db = db;
  return e;
}

absl::StatusOr<DbEvaluation> EvaluateImpressions(const std::vector<FvcImpression>& imps, const EvalOptions& options) {
  DbEvaluation e;
  const int n = static_cast<int>(imps.size());
  e.templates = n;
  std::vector<std::vector<MinutiaPoint>> points;
  std::vector<int> labels;
  for (const FvcImpression& imp : imps) {
    points.push_back(ToMinutiaPoints(imp.view));
    labels.push_back(imp.finger);
    e.mean_minutiae += imp.view.minutiae.size();
  }
  e.mean_minutiae /= n;
  auto t0 = std::chrono::steady_clock::now();
  TESSERA_ASSIGN_OR_RETURN(std::vector<MccTemplate> mcc, BuildMccTemplates(Stream::Cpu(), points, options.mcc));
  auto t1 = std::chrono::steady_clock::now();
  e.descriptor_seconds = std::chrono::duration<double>(t1 - t0).count();
  MccGallery gallery;
  for (const MccTemplate& t : mcc) {
    gallery.Append(t, options.mcc);
    e.mean_valid_cylinders += t.cylinders.size();
  }
  e.mean_valid_cylinders /= n;
  const LssConstants constants = MakeLssConstants(options.lss, options.mcc);
  e.scores.assign(static_cast<size_t>(n) * n, 0.0f);
  auto t2 = std::chrono::steady_clock::now();
  if (options.matcher != EvalMatcher::kDmc) {
    for (int p = 0; p < n; ++p) {
      const LssProbe probe = PrepareProbe(mcc[p], options.mcc);
      cpu::ScoreGallery(probe, gallery, options.matcher == EvalMatcher::kFusion ? MccScore::kLssR : options.score,
                        constants, &e.scores[static_cast<size_t>(p) * n], options.threads);
    }
  }
  if (options.matcher != EvalMatcher::kMcc) {
    DmcMatcherOptions dmc_options = options.dmc;
    dmc_options.mcc = options.mcc;
    dmc_options.threads = options.threads;
    TESSERA_ASSIGN_OR_RETURN(DmcMatcher matcher, DmcMatcher::Create(dmc_options));
    std::vector<float> row(n);
    for (int p = 0; p < n; ++p) {
      TESSERA_ASSIGN_OR_RETURN(DmcLatent latent, matcher.Prepare(mcc[p]));
      TESSERA_RETURN_IF_ERROR(matcher.ScoreGallery(Stream::Cpu(), latent, gallery, row.data()));
      float* out = &e.scores[static_cast<size_t>(p) * n];
      for (int g = 0; g < n; ++g) {
        out[g] = options.matcher == EvalMatcher::kDmc
                     ? row[g]
                     : FuseScores(out[g], row[g], options.fusion_weight);
      }
    }
  }
  auto t3 = std::chrono::steady_clock::now();
  e.match_seconds = std::chrono::duration<double>(t3 - t2).count();
  e.matches = static_cast<long long>(n) * n;
  std::vector<double> genuine, impostor;
  for (int p = 0; p < n; ++p) {
    for (int g = 0; g < n; ++g) {
      if (p == g) continue;
      (labels[p] == labels[g] ? genuine : impostor).push_back(e.scores[static_cast<size_t>(p) * n + g]);
    }
  }
  e.verification = ComputeVerificationMetrics(genuine, impostor);
  e.identification = ComputeIdentification(e.scores, labels);
  return e;
}

}  // namespace fingerprint
}  // namespace tessera

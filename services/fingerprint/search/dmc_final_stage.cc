// DMC final evaluation stage (definition in dmc_final_stage.h).
#include "services/fingerprint/search/dmc_final_stage.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status.h"
#include "services/fingerprint/search/tps.h"

namespace tessera {
namespace fingerprint {
namespace {

constexpr double kPi = 3.14159265358979323846;

double WrapAngle(double a) { return std::remainder(a, 2.0 * kPi); }

struct Pair {
  int l, k;  // latent cylinder, gallery cylinder (local index)
  float sim;
  double weight;
};

struct Cluster {
  std::vector<Pair> pairs;  // one-to-one, ascending k
  double weight = 0;
  int centre = 0;
};

// A consolidated cluster: pairs with both directions of the assignment.
struct Assignment {
  std::vector<int> g_of_l, l_of_g;  // -1: unpaired
  std::vector<Pair> pairs;
  double weight = 0;
  Assignment(int nl, int ng) : g_of_l(nl, -1), l_of_g(ng, -1) {}
  void Add(const Pair& p) {
    g_of_l[p.l] = p.k;
    l_of_g[p.k] = p.l;
    pairs.push_back(p);
    weight += p.weight;
  }
};

// Gallery cylinder j of template t as an MccCylinder (for lss.h's lambda).
MccCylinder GalleryCylinder(const DmcBatchView& b, int t, int j) {
  const int s = b.start[t], nt = b.start[t + 1] - s;
  MccCylinder c{};
  for (int w = 0; w < kMccBitWords; ++w) c.bits[w] = b.bits[static_cast<size_t>(kMccBitWords) * s + static_cast<size_t>(w) * nt + j];
  for (int w = 0; w < kMccMaskWords; ++w) c.mask[w] = b.mask[static_cast<size_t>(kMccMaskWords) * s + static_cast<size_t>(w) * nt + j];
  c.x = b.x[s + j];
  c.y = b.y[s + j];
  c.theta = b.theta[s + j];
  c.minutia = j;
  return c;
}

// Convex hull (counterclockwise in a y-up sense; orientation does not matter
// for the inside test below), Andrew's monotone chain.
std::vector<Point2> ConvexHull(std::vector<Point2> p) {
  std::sort(p.begin(), p.end(), [](const Point2& a, const Point2& b) { return a.x < b.x || (a.x == b.x && a.y < b.y); });
  if (p.size() < 3) return p;
  auto cross = [](const Point2& o, const Point2& a, const Point2& b) {
    return (a.x - o.x) * (b.y - o.y) - (a.y - o.y) * (b.x - o.x);
  };
  std::vector<Point2> h(2 * p.size());
  size_t k = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    while (k >= 2 && cross(h[k - 2], h[k - 1], p[i]) <= 0) --k;
    h[k++] = p[i];
  }
  for (size_t i = p.size() - 1, t = k + 1; i > 0; --i) {
    while (k >= t && cross(h[k - 2], h[k - 1], p[i - 1]) <= 0) --k;
    h[k++] = p[i - 1];
  }
  h.resize(k - 1);
  return h;
}

// Whether q lies inside the hull or within `margin` of it.
bool NearHull(const std::vector<Point2>& hull, const Point2& q, double margin) {
  if (hull.empty()) return false;
  bool inside = hull.size() >= 3;
  double best2 = HUGE_VAL;  // squared distance to the boundary
  for (size_t i = 0; i < hull.size(); ++i) {
    const Point2& a = hull[i];
    const Point2& b = hull[(i + 1) % hull.size()];
    const double ex = b.x - a.x, ey = b.y - a.y;
    if ((ex * (q.y - a.y) - ey * (q.x - a.x)) < 0) inside = false;  // right of a counterclockwise edge
    const double len2 = ex * ex + ey * ey;
    double t = len2 > 0 ? ((q.x - a.x) * ex + (q.y - a.y) * ey) / len2 : 0.0;
    t = std::min(1.0, std::max(0.0, t));
    const double fx = a.x + t * ex - q.x, fy = a.y + t * ey - q.y;
    best2 = std::min(best2, fx * fx + fy * fy);
  }
  return inside || best2 <= margin * margin;
}

}  // namespace

DmcTemplateScore ScoreTemplateFinalStage(const DmcLatent& latent, const DmcBatchView& batch,
                                         const DmcKernelResults& results, int t, const LssConstants& lss,
                                         const DmcFinalStageParams& params) {
  DmcTemplateScore out;
  const int s = batch.start[t], ng = batch.start[t + 1] - s, nl = latent.n();
  if (ng == 0 || nl == 0) return out;
  const int n_total = batch.num_cylinders;
  auto weight = [&](int l, int k, float sim) {
    const double lam = params.similarity_power == 1.0f ? sim : std::pow(static_cast<double>(sim), params.similarity_power);
    const double sim_term = (1.0 - params.similarity_weight) + params.similarity_weight * lam;
    const double quality_term =
        (1.0 - params.quality_weight) + params.quality_weight * 0.5 * (latent.quality[l] + results.quality[s + k]);
    return sim_term * quality_term;
  };

  // 1. Clusters, one-to-one.
  std::vector<Cluster> clusters;
  std::vector<int> claim(nl, -1);  // member index within the current cluster claiming latent l
  for (int i = 0; i < ng; ++i) {
    const int count = results.cluster_count[s + i];
    if (count < params.min_cluster_size) continue;
    Cluster c;
    c.centre = i;
    for (int m = 0; m < count; ++m) {
      const int k = results.cluster_members[static_cast<size_t>(m) * n_total + s + i];
      if (k >= ng) continue;  // defensive: corrupt input
      const int l = results.best_latent[s + k];
      if (l < 0 || l >= nl) continue;
      const float sim = results.similarity[s + k];
      const int prev = claim[l];
      if (prev >= 0) {
        Pair& p = c.pairs[prev];
        if (sim > p.sim || (sim == p.sim && k < p.k)) p = Pair{l, k, sim, weight(l, k, sim)};
        continue;
      }
      claim[l] = static_cast<int>(c.pairs.size());
      c.pairs.push_back(Pair{l, k, sim, weight(l, k, sim)});
    }
    for (const Pair& p : c.pairs) claim[p.l] = -1;
    if (static_cast<int>(c.pairs.size()) < params.min_cluster_size) continue;
    std::sort(c.pairs.begin(), c.pairs.end(), [](const Pair& a, const Pair& b) { return a.k < b.k; });
    for (const Pair& p : c.pairs) c.weight += p.weight;
    clusters.push_back(std::move(c));
  }
  out.clusters = static_cast<int>(clusters.size());
  if (clusters.empty()) return out;
  std::sort(clusters.begin(), clusters.end(), [](const Cluster& a, const Cluster& b) {
    return a.weight > b.weight || (a.weight == b.weight && a.centre < b.centre);
  });

  // 2. Consolidation: greedy seeds, merging overlapping, non-conflicting clusters.
  std::vector<uint8_t> used(clusters.size(), 0);
  Assignment best(nl, ng);
  for (int seed_round = 0; seed_round < params.max_consolidated; ++seed_round) {
    size_t seed = 0;
    while (seed < clusters.size() && used[seed]) ++seed;
    if (seed == clusters.size()) break;
    used[seed] = 1;
    Assignment a(nl, ng);
    for (const Pair& p : clusters[seed].pairs) a.Add(p);
    for (bool merged = true; merged;) {
      merged = false;
      for (size_t c = seed + 1; c < clusters.size(); ++c) {
        if (used[c]) continue;
        int overlap = 0, conflicts = 0;
        for (const Pair& p : clusters[c].pairs) {
          if (a.g_of_l[p.l] == p.k) {
            ++overlap;
          } else if (a.g_of_l[p.l] >= 0 || a.l_of_g[p.k] >= 0) {
            ++conflicts;
          }
        }
        if (overlap < params.min_overlap || conflicts >= overlap) continue;
        for (const Pair& p : clusters[c].pairs) {
          if (a.g_of_l[p.l] < 0 && a.l_of_g[p.k] < 0) a.Add(p);
        }
        used[c] = 1;
        merged = true;
      }
    }
    if (a.weight > best.weight) best = std::move(a);
  }
  out.consolidated_pairs = static_cast<int>(best.pairs.size());

  // 3. Alignment of the whole latent by the kept pairs; drop pairs that do
  // not fit it; new pairs under the warp.
  const int np = static_cast<int>(best.pairs.size());
  std::vector<Point2> from, to;
  for (const Pair& p : best.pairs) {
    from.push_back({latent.x[p.l], latent.y[p.l]});
    to.push_back({batch.x[s + p.k], batch.y[s + p.k]});
  }
  absl::StatusOr<ThinPlateSpline> tps = absl::FailedPreconditionError("not fitted");
  if (np >= params.tps_min_pairs) tps = ThinPlateSpline::Fit(from, to, params.tps_lambda);
  // Robust refits: while the worst control pair misses its partner by more
  // than tps_keep_distance, drop it and refit (an outlier would otherwise
  // pull the warp away from the good pairs).
  for (int round = 0; round < params.tps_refits && tps.ok(); ++round) {
    int worst = -1;
    double worst_d2 = static_cast<double>(params.tps_keep_distance) * params.tps_keep_distance;
    for (size_t i = 0; i < from.size(); ++i) {
      const Point2 q = tps->Apply(from[i]);
      const double d2 = (q.x - to[i].x) * (q.x - to[i].x) + (q.y - to[i].y) * (q.y - to[i].y);
      if (d2 > worst_d2) {
        worst_d2 = d2;
        worst = static_cast<int>(i);
      }
    }
    if (worst < 0 || static_cast<int>(from.size()) <= params.tps_min_pairs) break;
    from.erase(from.begin() + worst);
    to.erase(to.begin() + worst);
    auto refit = ThinPlateSpline::Fit(from, to, params.tps_lambda);
    if (!refit.ok()) break;
    tps = std::move(refit);
  }
  absl::StatusOr<RigidTransform> rigid = absl::FailedPreconditionError("not fitted");
  if (!tps.ok() && np >= 2) rigid = FitRigid(from, to);
  // Warped position and direction of latent minutia l.
  auto warp = [&](int l, Point2* q, double* theta) {
    const Point2 p{latent.x[l], latent.y[l]};
    const double th = latent.theta[l];
    if (tps.ok()) {
      double j[2][2];
      *q = tps->ApplyWithJacobian(p, j);
      const double dx = std::cos(th), dy = -std::sin(th);  // image-frame direction
      const double vx = j[0][0] * dx + j[0][1] * dy, vy = j[1][0] * dx + j[1][1] * dy;
      *theta = std::atan2(-vy, vx);
    } else {
      *q = rigid->Apply(p);
      *theta = th + rigid->angle;
    }
  };
  Assignment final_pairs(nl, ng);
  std::vector<Point2> wq;  // warped latent positions
  if (tps.ok() || rigid.ok()) {
    const double d2max = static_cast<double>(params.tps_pair_distance) * params.tps_pair_distance;
    wq.resize(nl);
    std::vector<double> wt(nl);
    for (int l = 0; l < nl; ++l) warp(l, &wq[l], &wt[l]);
    const double keep2 = static_cast<double>(params.tps_keep_distance) * params.tps_keep_distance;
    // Soft geometric consistency: exp(-d^2 / (2 sigma^2)) of the residual.
    const double inv2s2 =
        params.residual_sigma > 0 ? 1.0 / (2.0 * params.residual_sigma * params.residual_sigma) : 0.0;
    auto residual_factor = [inv2s2](double d2) { return std::exp(-d2 * inv2s2); };
    for (const Pair& p : best.pairs) {
      const double ex = wq[p.l].x - batch.x[s + p.k], ey = wq[p.l].y - batch.y[s + p.k];
      if (ex * ex + ey * ey <= keep2) {
        Pair q = p;
        q.weight *= residual_factor(ex * ex + ey * ey);
        final_pairs.Add(q);
      }
    }
    struct Candidate {
      double d2;
      int l, k;
    };
    std::vector<Candidate> cand;
    for (int l = 0; l < nl; ++l) {
      if (final_pairs.g_of_l[l] >= 0) continue;
      for (int k = 0; k < ng; ++k) {
        if (final_pairs.l_of_g[k] >= 0) continue;
        const double ex = wq[l].x - batch.x[s + k], ey = wq[l].y - batch.y[s + k];
        const double d2 = ex * ex + ey * ey;
        if (d2 > d2max) continue;
        if (std::fabs(WrapAngle(wt[l] - batch.theta[s + k])) > params.tps_pair_angle) continue;
        cand.push_back({d2, l, k});
      }
    }
    std::sort(cand.begin(), cand.end(), [](const Candidate& a, const Candidate& b) {
      return a.d2 < b.d2 || (a.d2 == b.d2 && (a.l < b.l || (a.l == b.l && a.k < b.k)));
    });
    for (const Candidate& c : cand) {
      if (final_pairs.g_of_l[c.l] >= 0 || final_pairs.l_of_g[c.k] >= 0) continue;
      const float sim = cpu::LocalSimilarity(latent.cylinders.cylinders[c.l], GalleryCylinder(batch, t, c.k), lss);
      if (!(sim > params.new_pair_min_similarity)) continue;
      Pair p{c.l, c.k, sim, weight(c.l, c.k, sim) * residual_factor(c.d2)};
      final_pairs.Add(p);
      out.pairs.push_back({p.l, p.k, p.sim, true});
    }
  } else {
    for (const Pair& p : best.pairs) final_pairs.Add(p);
  }
  for (const Pair& p : final_pairs.pairs) {
    if (std::none_of(out.pairs.begin(), out.pairs.end(), [&](const DmcPair& q) { return q.latent == p.l; })) {
      out.pairs.push_back({p.l, p.k, p.sim, false});
    }
  }

  // 4. Final similarity, normalised by the minutiae in the common area.
  double eff_l = nl, eff_g = ng;
  if ((tps.ok() || rigid.ok()) && params.overlap_floor < 1.0f) {
    const std::vector<Point2>& wl = wq;
    std::vector<Point2> gp(ng);
    for (int k = 0; k < ng; ++k) gp[k] = {batch.x[s + k], batch.y[s + k]};
    const std::vector<Point2> hull_l = ConvexHull(wl), hull_g = ConvexHull(gp);
    int in_l = 0, in_g = 0;
    for (int l = 0; l < nl; ++l) in_l += NearHull(hull_g, wl[l], params.overlap_margin);
    for (int k = 0; k < ng; ++k) in_g += NearHull(hull_l, gp[k], params.overlap_margin);
    const double pl = nl * std::pow(std::max(in_l, 1) / static_cast<double>(nl), params.overlap_power);
    const double pg = ng * std::pow(std::max(in_g, 1) / static_cast<double>(ng), params.overlap_power);
    eff_l = std::max<double>({pl, params.overlap_floor * nl, std::min<double>(nl, params.overlap_min_minutiae)});
    eff_g = std::max<double>({pg, params.overlap_floor * ng, std::min<double>(ng, params.overlap_min_minutiae)});
  }
  const double sum = final_pairs.weight;
  out.score = static_cast<float>(std::min(1.0, sum * sum / (eff_l * eff_g)));
  return out;
}

absl::Status ScoreBatchFinalStage(const DmcLatent& latent, const DmcBatchView& batch, const DmcKernelResults& results,
                                  const LssConstants& lss, const DmcFinalStageParams& params, int threads,
                                  float* scores, StopPoller* stop) {
  TESSERA_RETURN_IF_ERROR(ValidateDmcBatch(latent.view(), batch));
  if (batch.num_templates > 0 && scores == nullptr) return absl::InvalidArgumentError("DMC final stage: no scores");
  if (batch.num_cylinders > 0 && (results.best_latent == nullptr || results.similarity == nullptr ||
                                  results.quality == nullptr || results.cluster_count == nullptr ||
                                  results.cluster_members == nullptr)) {
    return absl::InvalidArgumentError("DMC final stage: kernel results have null arrays");
  }
  if (params.min_cluster_size < 1 || params.min_overlap < 1 || params.max_consolidated < 1 ||
      params.tps_min_pairs < 3 || !(params.tps_lambda >= 0) || !(params.tps_pair_distance > 0) ||
      !(params.tps_pair_angle > 0) || !(params.tps_keep_distance > 0) || params.tps_refits < 0 ||
      !(params.overlap_margin >= 0) || !(params.overlap_floor >= 0 && params.overlap_floor <= 1) ||
      !(params.overlap_min_minutiae >= 0) || !(params.overlap_power >= 0) ||
      !(params.similarity_weight >= 0 && params.similarity_weight <= 1) ||
      !(params.quality_weight >= 0 && params.quality_weight <= 1) || !(params.similarity_power > 0)) {
    return absl::InvalidArgumentError("DMC final stage: parameters out of range");
  }
  auto score_range = [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) {
      if (stop != nullptr && stop->ShouldStop()) return;
      scores[t] = ScoreTemplateFinalStage(latent, batch, results, static_cast<int>(t), lss, params).score;
    }
  };
  if (threads == 1) {
    score_range(0, batch.num_templates, 0);
  } else {
    ParallelForDynamic(batch.num_templates, 8, score_range);
  }
  if (stop != nullptr && stop->stopped()) return stop->status();
  return absl::OkStatus();
}

}  // namespace fingerprint
}  // namespace tessera

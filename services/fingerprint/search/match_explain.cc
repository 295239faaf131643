#include "services/fingerprint/search/match_explain.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "services/fingerprint/search/tps.h"

namespace tessera {
namespace fingerprint {
namespace {

absl::Status CheckSide(const std::vector<MinutiaPoint>& minutiae, const MccParams& mcc, const char* side) {
  if (minutiae.empty()) return absl::InvalidArgumentError(absl::StrCat(side, ": no minutiae"));
  return Annotate(ValidateMccInput(minutiae, mcc), side);
}

Point2 At(const MinutiaPoint& m) { return {m.x, m.y}; }

}  // namespace

absl::StatusOr<MatchExplanation> ExplainMatch(const std::vector<MinutiaPoint>& probe,
                                              const std::vector<MinutiaPoint>& gallery,
                                              const ExplainOptions& options) {
  TESSERA_RETURN_IF_ERROR(CheckSide(probe, options.mcc, "probe"));
  TESSERA_RETURN_IF_ERROR(CheckSide(gallery, options.mcc, "gallery"));
  // As the searcher builds them (searcher.cc: cpu::BuildMccTemplate, MakeLssConstants).
  const MccTemplate a = cpu::BuildMccTemplate(probe, options.mcc);
  const MccTemplate b = cpu::BuildMccTemplate(gallery, options.mcc);
  const LssConstants constants = MakeLssConstants(options.lss, options.mcc);
  const cpu::LssRSelection selection = cpu::ReferenceLssRSelection(a, b, constants);

  MatchExplanation out;
  out.score = selection.score;
  out.np = selection.np;
  out.probe_cylinders = static_cast<int>(a.cylinders.size());
  out.gallery_cylinders = static_cast<int>(b.cylinders.size());
  std::vector<Point2> from, to;
  for (const cpu::LssRPair& p : selection.pairs) {
    MatchedPair m;
    m.probe_index = a.cylinders[p.a].minutia;
    m.gallery_index = b.cylinders[p.b].minutia;
    m.probe = probe[m.probe_index];
    m.gallery = gallery[m.gallery_index];
    m.local_similarity = p.local;
    m.relaxed_similarity = p.relaxed;
    out.pairs.push_back(m);
    from.push_back(At(m.probe));
    to.push_back(At(m.gallery));
  }
  // One pair fixes the shift but not the rotation.
  if (out.pairs.size() < 2) return out;
  TESSERA_ASSIGN_OR_RETURN(const RigidTransform t, FitRigid(from, to));
  out.alignment = {true, t.angle, t.tx, t.ty};
  double sum_sq = 0;
  for (size_t i = 0; i < out.pairs.size(); ++i) {
    const Point2 q = t.Apply(from[i]);
    out.pairs[i].residual = std::hypot(q.x - to[i].x, q.y - to[i].y);
    sum_sq += out.pairs[i].residual * out.pairs[i].residual;
  }
  out.rms_residual = std::sqrt(sum_sq / static_cast<double>(out.pairs.size()));
  return out;
}

}  // namespace fingerprint
}  // namespace tessera

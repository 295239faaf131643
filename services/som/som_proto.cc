#include "services/som/som_proto.h"

#include <cmath>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/device.h"
#include "common/status.h"

namespace tessera {
namespace som {
namespace {

// Epoch counts beyond this are surely mistakes.
constexpr int kMaxEpochs = 100000;

absl::Status CheckFinite(const char* field, double value, double min, bool min_inclusive) {
  if (!std::isfinite(value) || value < min || (!min_inclusive && value == min)) {
    return absl::InvalidArgumentError(absl::StrCat("options.", field, " is ", value, "; it must be finite and ",
                                                   min_inclusive ? "at least " : "greater than ", min));
  }
  return absl::OkStatus();
}

absl::Status CheckCount(const char* field, int value, int max) {
  if (value < 1 || value > max) {
    return absl::InvalidArgumentError(absl::StrCat("options.", field, " is ", value, "; it must be in 1..", max));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<AtlasJobOptions> ToAtlasJobOptions(const v1::AtlasOptions& proto, const std::string& default_device,
                                                  int64_t max_nodes) {
  AtlasJobOptions out;
  TrainOptions& o = out.train;
  if (proto.width() <= 0 || proto.height() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("options.width and options.height must be positive (got ",
                                                   proto.width(), "x", proto.height(), ")"));
  }
  const int64_t nodes = int64_t{proto.width()} * proto.height();
  if (nodes > max_nodes) {
    return absl::InvalidArgumentError(absl::StrCat("a ", proto.width(), "x", proto.height(), " map has ", nodes,
                                                   " cells, more than this server's limit of ", max_nodes));
  }
  o.grid = GridShape{proto.width(), proto.height(), proto.toroid() ? Topology::kToroidal : Topology::kPlanar};
  if (proto.epochs() != 0) {
    TESSERA_RETURN_IF_ERROR(CheckCount("epochs", proto.epochs(), kMaxEpochs));
    o.max_epochs = proto.epochs();
  }
  const std::string init = absl::AsciiStrToLower(proto.init());
  if (init == "random") {
    o.init = InitMethod::kRandom;
  } else if (init.empty() || init == "pca") {
    o.init = InitMethod::kPca;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("options.init '", proto.init(), "' is not one of pca, random"));
  }
  out.device = proto.device().empty() ? default_device : proto.device();
  if (out.device == "gpu") out.device = "cuda";
  if (out.device != "auto" && out.device != "cpu" && out.device != "cuda") {
    return absl::InvalidArgumentError(absl::StrCat("options.device '", out.device, "' is not one of auto, cpu, cuda"));
  }
  TESSERA_ASSIGN_OR_RETURN(o.backend, ResolveBackend(out.device));
  if (proto.has_seed()) o.seed = proto.seed();
  if (proto.has_holdout_fraction()) {
    const double f = proto.holdout_fraction();
    if (!std::isfinite(f) || f < 0 || f >= 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("options.holdout_fraction is ", f, "; it must be in [0, 1)"));
    }
    out.holdout_fraction = f;
  }
  if (proto.has_radius_start()) {
    TESSERA_RETURN_IF_ERROR(CheckFinite("radius_start", proto.radius_start(), 0, false));
    o.radius_start = proto.radius_start();
  }
  if (proto.has_radius_end()) {
    TESSERA_RETURN_IF_ERROR(CheckFinite("radius_end", proto.radius_end(), 0, true));
    o.radius_end = proto.radius_end();
  }
  if (proto.radius_decay_epochs() != 0) {
    TESSERA_RETURN_IF_ERROR(CheckCount("radius_decay_epochs", proto.radius_decay_epochs(), kMaxEpochs));
    o.radius_decay_epochs = proto.radius_decay_epochs();
  }
  if (proto.has_convergence_tolerance()) {
    TESSERA_RETURN_IF_ERROR(CheckFinite("convergence_tolerance", proto.convergence_tolerance(), 0, true));
    o.convergence_tolerance = proto.convergence_tolerance();
  }
  if (proto.convergence_patience() != 0) {
    TESSERA_RETURN_IF_ERROR(CheckCount("convergence_patience", proto.convergence_patience(), kMaxEpochs));
    o.convergence_patience = proto.convergence_patience();
  }
  const std::string type = absl::AsciiStrToLower(proto.weight_type());
  if (type.empty() || type == "fp32" || type == "float32") {
    o.weight_type = WeightType::kFloat32;
  } else if (type == "fp16" || type == "float16") {
    o.weight_type = WeightType::kFloat16;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("options.weight_type '", proto.weight_type(), "' is not one of fp32, fp16"));
  }
  return out;
}

absl::Status ValidateAtlasId(absl::string_view id) {
  if (id.empty() || id.size() > 128 || id[0] == '.') {
    return absl::InvalidArgumentError(absl::StrCat("atlas_id '", id,
                                                   "' must be 1-128 characters of [A-Za-z0-9._-], not starting with '.'"));
  }
  for (char c : id) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return absl::InvalidArgumentError(
          absl::StrCat("atlas_id '", id, "' has a character outside [A-Za-z0-9._-]"));
    }
  }
  return absl::OkStatus();
}

void ToQualityProto(const QualityMetrics& q, v1::Quality* out) {
  out->set_documents(q.docs);
  out->set_qe_euclidean(q.qe_euclidean);
  out->set_qe_cosine(q.qe_cosine);
  out->set_topographic_error(q.topographic_error);
  out->set_dead_units(q.dead_units);
  out->set_dead_unit_fraction(q.dead_unit_fraction);
}

QualityMetrics FromQualityProto(const v1::Quality& q) {
  QualityMetrics out;
  out.docs = q.documents();
  out.qe_euclidean = q.qe_euclidean();
  out.qe_cosine = q.qe_cosine();
  out.topographic_error = q.topographic_error();
  out.dead_units = q.dead_units();
  out.dead_unit_fraction = q.dead_unit_fraction();
  return out;
}

v1::AtlasSummary ToAtlasSummary(const Atlas& atlas, const std::string& id, const std::string& directory,
                                bool with_history) {
  v1::AtlasSummary s;
  s.set_atlas_id(id);
  s.set_width(atlas.model.grid.width);
  s.set_height(atlas.model.grid.height);
  s.set_toroid(atlas.model.grid.topology == Topology::kToroidal);
  s.set_features(atlas.model.features);
  s.set_documents(static_cast<int64_t>(atlas.bmu.size()));
  s.set_weight_type(atlas.model.type == WeightType::kFloat16 ? "fp16" : "fp32");
  s.set_init(InitMethodName(atlas.options.init));
  s.set_seed(atlas.options.seed);
  s.set_epochs(atlas.epochs);
  s.set_converged(atlas.converged);
  ToQualityProto(atlas.final_quality, s.mutable_training_quality());
  ToQualityProto(atlas.held_out_quality, s.mutable_held_out_quality());
  if (with_history) {
    for (const EpochReport& r : atlas.history) {
      v1::EpochSummary* e = s.add_history();
      e->set_epoch(r.epoch);
      e->set_radius(r.radius);
      e->set_qe(r.qe);
      e->set_topographic_error(r.topographic_error);
      e->set_seconds(r.seconds);
    }
  }
  s.set_created(atlas.created);
  s.set_directory(directory);
  return s;
}

}  // namespace som
}  // namespace tessera

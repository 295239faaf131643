#include "services/reconstruction/ct_tv_methods.h"

#include <cmath>
#include <memory>

#include "common/buffer.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/reconstruction/fbp/fbp.h"
#include "kernels/reconstruction/regularizers/tv.h"
#include "kernels/reconstruction/solvers/asd_pocs.h"
#include "kernels/reconstruction/solvers/fista_tv.h"
#include "kernels/reconstruction/vector_ops.h"

namespace tessera::reconstruction {
namespace {

// TIGRE's ASD_POCS: epsilon = 0.2 ||A FDK(y) - y||.
constexpr double kToleranceFraction = 0.2;

absl::StatusOr<std::shared_ptr<Buffer>> Floats(const Stream& stream, int64_t n) {
  return Buffer::Allocate(MemoryKindFor(stream), static_cast<size_t>(n) * sizeof(float), stream.ordinal());
}

}  // namespace

absl::StatusOr<double> CtTvSolver::FbpDataTolerance(const float* y) {
  const Stream& stream = op_.stream();
  if (fbp_ == nullptr) {  // a refusal (limited angle) is returned again per slice: it is only the checks
    recon::fbp::FbpOptions options;
    options.mode = mode_;
    TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<recon::fbp::FbpPlan> plan,
                             recon::fbp::FbpPlan::Create(geometry_, stream, options));
    TESSERA_ASSIGN_OR_RETURN(fbp_image_, Floats(stream, op_.domain_size()));
    TESSERA_ASSIGN_OR_RETURN(fbp_residual_, Floats(stream, op_.range_size()));
    fbp_ = std::move(plan);  // last: set only once the scratch exists
  }
  float* image_data = static_cast<float*>(fbp_image_->data());
  float* range_data = static_cast<float*>(fbp_residual_->data());
  TESSERA_RETURN_IF_ERROR(fbp_->Run(y, image_data));
  TESSERA_RETURN_IF_ERROR(op_.Forward(image_data, range_data));
  TESSERA_RETURN_IF_ERROR(recon::Subtract(stream, range_data, y, range_data, op_.range_size()));
  TESSERA_ASSIGN_OR_RETURN(const double sq, recon::Dot(stream, range_data, range_data, op_.range_size()));
  return kToleranceFraction * std::sqrt(sq);
}

absl::StatusOr<recon::solvers::SolverReport> CtTvSolver::Solve(const float* y, float* x,
                                                               const recon::solvers::SolverProgress& progress) {
  const recon::regularizers::TvShape shape{geometry_.volume.nx, geometry_.volume.ny, geometry_.volume.nz, 1};
  if (method_ == CtMethod::kFistaTv) {
    if (lipschitz_ == 0) {
      TESSERA_ASSIGN_OR_RETURN(lipschitz_, recon::solvers::EstimateNormLipschitz(op_));
    }
    recon::solvers::FistaTvOptions o;
    o.iterations = ct_.iterations;
    o.tv_weight = ct_.tv_weight;
    o.tv_iterations = ct_.tv_iterations;
    o.non_negative = ct_.non_negative;
    o.lipschitz = lipschitz_;
    o.progress = progress;
    return recon::solvers::FistaTv(op_, shape, y, x, o);
  }
  recon::solvers::AsdPocsOptions o;
  o.iterations = ct_.iterations;
  o.alpha = ct_.tv_weight;
  o.tv_iterations = ct_.tv_iterations;
  o.relaxation = ct_.relaxation;
  o.subsets = op_.num_subsets();
  o.mode = mode_;
  o.progress = progress;
  absl::StatusOr<double> tolerance = FbpDataTolerance(y);
  // FBP refuses what it cannot filter (a limited-angle scan): then no data
  // tolerance (0), so the adaptive rule always applies and only the
  // iteration count and the relaxation floor stop the run.
  if (!tolerance.ok() && tolerance.status().code() != absl::StatusCode::kInvalidArgument) return tolerance.status();
  o.epsilon = tolerance.ok() ? *tolerance : 0.0;
  return recon::solvers::AsdPocs(op_, shape, y, x, o);
}

}  // namespace tessera::reconstruction

#include "services/reconstruction/reconstruction_run.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/device.h"
#include "common/dicom/result_volume_output.h"
#include "common/log.h"
#include "common/durable_file.h"
#include "common/memory_kind_for.h"
#include "common/ndarray.h"
#include "common/nifti_io.h"
#include "common/status.h"
#include "kernels/reconstruction/ct/dd_projector.h"
#include "kernels/reconstruction/fbp/fbp.h"
#include "kernels/reconstruction/grid_subdivision.h"
#include "kernels/reconstruction/pet/listmode_file.h"
#include "kernels/reconstruction/pet/listmode_osem.h"
#include "kernels/reconstruction/pet/osem.h"
#include "kernels/reconstruction/pet/projector.h"
#include "kernels/reconstruction/solvers/cgls.h"
#include "kernels/reconstruction/solvers/sart.h"
#include "kernels/reconstruction/vector_ops.h"
#include "services/common/file_upload.h"
#include "services/reconstruction/ct_memory_budget.h"
#include "services/reconstruction/ct_tv_methods.h"
#include "services/reconstruction/formats/geometry_json.h"
#include "services/reconstruction/formats/recon_nifti.h"
#include "services/reconstruction/mri_run.h"
#include "services/reconstruction/pet_corrections.h"
#include "services/reconstruction/recon_run_util.h"
#include "services/reconstruction/ultrasound_run.h"

namespace tessera::reconstruction {
namespace {

namespace fs = std::filesystem;
using recon::CtGeometry;

constexpr char kVolumeFile[] = "reconstruction.nii.gz";

absl::StatusOr<CtGeometry> LoadGeometry(const ReconSpec& spec) {
  absl::StatusOr<CtGeometry> g = recon::formats::ReadGeometryJson(spec.geometry_path);
  if (!g.ok()) return Annotate(g.status(), "geometry");
  return g;
}

// fbp for 2-D geometries, fdk for cone beams, unless the request chose.
absl::StatusOr<CtMethod> EffectiveCtMethod(const CtSpec& ct, const CtGeometry& g) {
  const bool cone = !g.projection.is_2d;
  if (!ct.method_given) return cone ? CtMethod::kFdk : CtMethod::kFbp;
  if (ct.method == CtMethod::kFdk && !cone) {
    return absl::InvalidArgumentError(absl::StrCat("ct.method: fdk needs a cone geometry; this one is ",
                                                   recon::BeamKindName(g.projection.beam), " 2-D (use fbp)"));
  }
  if (ct.method == CtMethod::kFbp && cone) {
    return absl::InvalidArgumentError("ct.method: fbp is for 2-D geometries; a cone geometry takes fdk");
  }
  return ct.method;
}

// TOF from the request; list-mode files carry their own, which a request
// without TOF fields takes (and one with them must match: CheckListModeHeader).
absl::StatusOr<recon::pet::PetGeometry> PetGeometryOf(const ReconSpec& spec, const CtGeometry& g) {
  recon::pet::PetGeometry pg;
  pg.ct = g;
  pg.tof.num_bins = spec.pet.tof_bins;
  pg.tof.bin_mm = spec.pet.tof_bin_mm;
  pg.tof.fwhm_mm = spec.pet.tof_fwhm_mm;
  if (!spec.listmode_path.empty()) {
    absl::StatusOr<recon::pet::ListModeHeader> header = recon::pet::ReadListModeHeader(spec.listmode_path);
    if (!header.ok()) return Annotate(header.status(), "listmode");
    if (spec.pet.tof_bins <= 1) {
      pg.tof.num_bins = static_cast<int>(header->num_tof_bins);
      pg.tof.bin_mm = header->tof_bin_mm;
      pg.tof.fwhm_mm = header->tof_fwhm_mm;
    }
    TESSERA_RETURN_IF_ERROR(Annotate(recon::pet::CheckListModeHeader(*header, pg), "listmode"));
  }
  TESSERA_RETURN_IF_ERROR(Annotate(recon::pet::Validate(pg), "pet"));
  return pg;
}

Shape WithoutOnes(const Shape& shape) {
  Shape out;
  for (int64_t d : shape) {
    if (d != 1) out.push_back(d);
  }
  return out;
}

// The header's dims against what the geometry needs (axes of length 1 do not
// count, as recon_nifti reads them).
absl::Status CheckHeaderDims(const std::string& path, const Shape& expected, const char* field,
                             const std::string& what) {
  absl::StatusOr<std::vector<int64_t>> dims = ReadNiftiHeaderDims(path);
  if (!dims.ok()) return Annotate(dims.status(), field);
  if (WithoutOnes(*dims) != WithoutOnes(expected)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", path, " is ", ShapeToString(*dims), " but ", what,
                                                   " needs ", ShapeToString(expected)));
  }
  return absl::OkStatus();
}

// Input arrays on the stream's backend.
absl::StatusOr<NDArray> ToBackend(const NDArray& host, const Stream& stream) {
  if (stream.backend() == Backend::kCpu) return host;
  return host.CopyTo(MemoryKind::kDevice, stream, stream.ordinal());
}

// `slices` volumes of the geometry's, one after the other (a CT stack).
absl::StatusOr<NDArray> NewVolume(const CtGeometry& g, const Stream& stream, int64_t slices = 1) {
  const MemoryKind kind = MemoryKindFor(stream);
  return NDArray::Allocate({g.volume.nx, g.volume.ny, g.volume.nz * slices}, DType::kFloat32, kind, stream.ordinal());
}

// Issue 40: a 2-D geometry's sinogram may be a stack (cols, projections,
// slices), reconstructed slice by slice with one plan into nx x ny x slices.
absl::StatusOr<int64_t> CtSinogramSlices(const ReconSpec& spec, const CtGeometry& g) {
  absl::StatusOr<std::vector<int64_t>> dims = ReadNiftiHeaderDims(spec.sinogram_path);
  if (!dims.ok()) return Annotate(dims.status(), "sinogram");
  absl::StatusOr<int64_t> slices = recon::formats::StackedSinogramSlices(*dims, g.projection);
  if (!slices.ok()) return Annotate(slices.status(), absl::StrCat("sinogram: ", spec.sinogram_path));
  return slices;
}

// PET sinogram stacks as CT's (no TOF, not list-mode); the corrections take
// one 2-D sinogram, so a stack with any of them is refused.
absl::StatusOr<int64_t> PetSinogramSlices(const ReconSpec& spec, const CtGeometry& g) {
  if (spec.sinogram_path.empty()) return 1;  // list-mode
  absl::StatusOr<std::vector<int64_t>> dims = ReadNiftiHeaderDims(spec.sinogram_path);
  if (!dims.ok()) return Annotate(dims.status(), "sinogram");
  recon::formats::SinogramOptions so;
  so.tof_bins = spec.pet.tof_bins > 1 ? spec.pet.tof_bins : 0;
  absl::StatusOr<int64_t> slices = recon::formats::StackedSinogramSlices(*dims, g.projection, so);
  if (!slices.ok()) return Annotate(slices.status(), absl::StrCat("sinogram: ", spec.sinogram_path));
  const PetSpec& p = spec.pet;
  if (*slices > 1 && (!p.randoms_path.empty() || !p.scatter_path.empty() || !p.normalization_path.empty())) {
    return absl::InvalidArgumentError(absl::StrCat("pet: randoms, scatter and normalization take one 2-D sinogram; ",
                                                   spec.sinogram_path, " is a stack of ", *slices, " slices"));
  }
  return slices;
}

// A stack's attenuation: one 2-D map for every slice, or nx x ny x slices (a
// map per slice; its affine is not checked, only its grid).
absl::StatusOr<bool> AttenuationPerSlice(const ReconSpec& spec, const CtGeometry& g, int64_t slices) {
  if (slices == 1 || spec.pet.attenuation_path.empty()) return false;
  const recon::VolumeGeometry& v = g.volume;
  absl::StatusOr<std::vector<int64_t>> dims = ReadNiftiHeaderDims(spec.pet.attenuation_path);
  if (!dims.ok()) return Annotate(dims.status(), "pet.attenuation");
  if (WithoutOnes(*dims) == WithoutOnes({v.nx, v.ny, v.nz * slices})) return true;
  TESSERA_RETURN_IF_ERROR(CheckHeaderDims(spec.pet.attenuation_path, {v.nx, v.ny, v.nz}, "pet.attenuation",
                                          absl::StrCat("vol_geom (one map for all ", slices, " slices, or one per slice)")));
  return false;
}

// The output grid of a stack: the 2-D slab repeated `slices` times along z,
// centred where the slab was.
recon::VolumeGeometry StackedVolume(recon::VolumeGeometry v, int64_t slices) {
  if (slices == 1) return v;
  const double dz = v.dz(), centre = 0.5 * (v.min_z + v.max_z);
  v.nz *= slices;
  v.min_z = centre - 0.5 * dz * v.nz;
  v.max_z = centre + 0.5 * dz * v.nz;
  return v;
}

// fbp/fdk with the projections and the volume in host memory (issue 36's
// device-memory budget): FbpPlan::RunOutOfCore streams chunks of views into
// z-slabs within options.device_memory_bytes of the stream's memory, each
// slice of a stack in turn. `redundancy` gets the weights and the chunking.
absl::Status RunFdkOutOfCore(const CtGeometry& g, const recon::fbp::FbpOptions& options, int64_t slices,
                             const NDArray& host_sinogram, const Stream& stream, const ReconRunContext& ctx,
                             const std::string& name, NDArray* volume, std::string* redundancy) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<recon::fbp::FbpPlan> plan,
                           recon::fbp::FbpPlan::Create(g, stream, options));
  const recon::fbp::FdkChunking& chunking = plan->chunking();
  *redundancy = absl::StrCat(plan->redundancy(), plan->redundancy().empty() ? "" : "; ", "out of core: ",
                             chunking.slabs.size(), " slab(s) of <= ", chunking.slab_planes, " planes, ",
                             chunking.views_per_chunk, " views per chunk of ", chunking.window_rows, " rows");
  TESSERA_LOG(INFO) << name << ": within " << options.device_memory_bytes << " bytes, " << *redundancy;
  TESSERA_ASSIGN_OR_RETURN(*volume, NDArray::Allocate({g.volume.nx, g.volume.ny, g.volume.nz * slices},
                                                      DType::kFloat32, MemoryKind::kHost));
  const float* y = host_sinogram.data<float>();
  float* x = volume->data<float>();
  for (int64_t s = 0; s < slices; ++s) {
    TESSERA_RETURN_IF_ERROR(plan->RunOutOfCore(
        y + s * g.projection.sinogram_size(), x + s * g.volume.size(), [&](int64_t done, int64_t total) {
          const int64_t all = total * slices, at = s * total + done;
          Report(ctx, "reconstruct", at, all, 0.05 + 0.9 * at / std::max<int64_t>(1, all), {},
                 absl::StrCat(name, ": ", at, " of ", all, " view passes back-projected (out of core)"));
          return Continue(ctx);
        }));
  }
  return absl::OkStatus();
}

// `redundancy`: fbp/fdk's redundancy weights ("short scan 220 deg ...: Parker
// weights"), for the result's geometry text; the iterative methods leave it
// empty unless they solve on a finer grid (ct.voxel_subdivision), and say so.
// `slices` > 1: a stack of 2-D sinograms (CtSinogramSlices), each slice
// reconstructed with the one plan / projector (whose CPU kernels spread each
// slice over the threads), progress per slice.
absl::Status RunCt(const ReconSpec& spec, const CtGeometry& g, CtMethod method, int64_t slices,
                   const Stream& stream, const ReconRunContext& ctx, NDArray* volume,
                   v1::ReconstructionResult* result, std::string* redundancy) {
  const recon::ExecutionMode mode =
      spec.deterministic ? recon::ExecutionMode::kDeterministic : recon::ExecutionMode::kDefault;
  absl::StatusOr<NDArray> host = slices == 1 ? recon::formats::ReadSinogram(spec.sinogram_path, g.projection)
                                             : recon::formats::ReadSinogramStack(spec.sinogram_path, g.projection);
  if (!host.ok()) return Annotate(host.status(), "sinogram");
  // ct.device_memory_gib (ct_memory_budget.h): fbp/fdk go out of core when
  // the resident run does not fit; iterative methods are refused before
  // anything is allocated.
  TESSERA_ASSIGN_OR_RETURN(const int64_t budget, CtDeviceBudgetBytes(spec.ct, stream));
  recon::fbp::FbpOptions fbp_options;
  fbp_options.filter = spec.ct.filter;
  fbp_options.cutoff = spec.ct.filter_cutoff;
  fbp_options.mode = mode;
  fbp_options.redundancy_weights = spec.ct.redundancy_weights;
  fbp_options.short_scan =
      spec.ct.derivative_filtering ? recon::fbp::ShortScanMethod::kDerivative : recon::fbp::ShortScanMethod::kParker;
  if (method == CtMethod::kFbp || method == CtMethod::kFdk) {
    if (budget > 0) {
      TESSERA_ASSIGN_OR_RETURN(const int64_t resident,
                               recon::fbp::FbpResidentBytes(g, fbp_options, stream.backend()));
      const int64_t stacked = (slices - 1) * (g.projection.sinogram_size() + g.volume.size()) * 4;
      if (resident + stacked > budget) {
        fbp_options.device_memory_bytes = budget;
        TESSERA_RETURN_IF_ERROR(
            RunFdkOutOfCore(g, fbp_options, slices, *host, stream, ctx, CtMethodName(method), volume, redundancy));
        result->set_iterations(0);
        return absl::OkStatus();
      }
    }
  }
  // ct.voxel_subdivision (grid_subdivision.h): the iterative methods solve on
  // `solve_g`, n times finer over the same field of view, one slice at a time
  // in `fine`, each block-averaged into the output volume of g.
  const int subdivision = spec.ct.voxel_subdivision;
  CtGeometry solve_g = g;
  if (subdivision > 1) {
    TESSERA_ASSIGN_OR_RETURN(solve_g, recon::SubdividedGeometry(g, subdivision));
  }
  if (method != CtMethod::kFbp && method != CtMethod::kFdk) {
    TESSERA_RETURN_IF_ERROR(CheckCtIterativeBudget(method, g, slices, spec.ct.subsets, budget,
                                                   subdivision > 1 ? &solve_g : nullptr));
  }
  TESSERA_ASSIGN_OR_RETURN(NDArray sinogram, ToBackend(*host, stream));
  *host = NDArray();
  TESSERA_ASSIGN_OR_RETURN(*volume, NewVolume(g, stream, slices));
  float* x = volume->data<float>();
  const float* y = sinogram.data<float>();
  const std::string name = CtMethodName(method);
  const int64_t sinogram_size = g.projection.sinogram_size(), voxels = g.volume.size();
  const auto slice_done = [&](int64_t s) -> absl::Status {
    Report(ctx, "reconstruct", s + 1, slices, IterationFraction(static_cast<int>(s + 1), static_cast<int>(slices)), {},
           absl::StrCat(name, ": slice ", s + 1, " of ", slices, " done"));
    return Continue(ctx);
  };
  if (method == CtMethod::kFbp || method == CtMethod::kFdk) {
    TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<recon::fbp::FbpPlan> plan,
                             recon::fbp::FbpPlan::Create(g, stream, fbp_options));
    *redundancy = plan->redundancy();
    const int64_t views = g.projection.num_views();
    if (slices > 1) {
      for (int64_t s = 0; s < slices; ++s) {
        TESSERA_RETURN_IF_ERROR(plan->Run(y + s * sinogram_size, x + s * voxels));
        TESSERA_RETURN_IF_ERROR(slice_done(s));
      }
      result->set_iterations(0);
      return stream.Synchronize();
    }
    TESSERA_RETURN_IF_ERROR(plan->Run(y, x, [&](int64_t done, int64_t total) -> absl::Status {
      Report(ctx, "reconstruct", done, total, 0.05 + 0.9 * done / std::max<int64_t>(1, total), {},
             absl::StrCat(name, ": ", done, " of ", views, " views back-projected"));
      return Continue(ctx);
    }));
    result->set_iterations(0);
    return stream.Synchronize();
  }
  recon::ct::DdProjectorOptions po;
  po.mode = mode;
  po.num_subsets = method == CtMethod::kOsSart || method == CtMethod::kAsdPocs
                       ? std::min<int64_t>(spec.ct.subsets, g.projection.num_views())
                       : 1;
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<recon::ct::DdProjector> projector,
                           recon::ct::DdProjector::Create(solve_g, stream, po));
  CtTvSolver tv_solver(method, spec.ct, solve_g, *projector, mode);  // fista-tv / asd-pocs
  TESSERA_RETURN_IF_ERROR(recon::Fill(stream, x, voxels * slices, 0.0f));
  NDArray fine;
  if (subdivision > 1) {
    TESSERA_ASSIGN_OR_RETURN(fine, NewVolume(solve_g, stream));
    *redundancy = absl::StrCat("solved on a ", subdivision, "x finer grid (", solve_g.volume.nx, "x", solve_g.volume.ny,
                               "x", solve_g.volume.nz, "), block-averaged");
  }
  const recon::BlockShape blocks = recon::SubdivisionBlocks(g, subdivision);
  recon::solvers::SolverOptions so;
  so.iterations = spec.ct.iterations;
  so.subsets = po.num_subsets;
  so.lambda = static_cast<float>(spec.ct.relaxation);
  so.non_negative = spec.ct.non_negative;
  so.mode = mode;
  so.progress = [&](int iteration, int total, double residual) -> absl::Status {
    Report(ctx, "reconstruct", iteration, total, IterationFraction(iteration, total), {{"residual", residual}},
           absl::StrFormat("%s: iteration %d of %d, ||Ax - y|| = %.6g", name, iteration, total, residual));
    return Continue(ctx);
  };
  if (slices > 1) so.progress = nullptr;  // progress per slice; residual_norms: each slice's last
  for (int64_t s = 0; s < slices; ++s) {
    const float* ys = y + s * sinogram_size;
    float* xs = subdivision > 1 ? fine.data<float>() : x + s * voxels;
    // Every slice starts from 0, as without subdivision.
    if (subdivision > 1) TESSERA_RETURN_IF_ERROR(recon::Fill(stream, xs, solve_g.volume.size(), 0.0f));
    absl::StatusOr<recon::solvers::SolverReport> report =
        method == CtMethod::kCgls                                      ? recon::solvers::Cgls(*projector, ys, xs, so)
        : method == CtMethod::kFistaTv || method == CtMethod::kAsdPocs ? tv_solver.Solve(ys, xs, so.progress)
                                                                       : recon::solvers::Sart(*projector, ys, xs, so);
    if (!report.ok()) return report.status();
    if (subdivision > 1) TESSERA_RETURN_IF_ERROR(recon::BlockAverage(stream, xs, blocks, x + s * voxels));
    result->set_iterations(report->iterations);
    if (slices == 1) {
      for (double r : report->residual_norms) result->add_residual_norms(r);
    } else {
      if (!report->residual_norms.empty()) result->add_residual_norms(report->residual_norms.back());
      TESSERA_RETURN_IF_ERROR(slice_done(s));
    }
  }
  return stream.Synchronize();
}

// `slices` > 1: a stack of 2-D sinograms (PetSinogramSlices), each slice
// reconstructed with one projector (one per slice with a map per slice),
// progress per slice, log_likelihood each slice's last.
absl::Status RunPet(const ReconSpec& spec, const CtGeometry& g, int64_t slices, const Stream& stream,
                    const ReconRunContext& ctx, NDArray* volume, v1::ReconstructionResult* result) {
  const recon::ExecutionMode mode =
      spec.deterministic ? recon::ExecutionMode::kDeterministic : recon::ExecutionMode::kDefault;
  TESSERA_ASSIGN_OR_RETURN(const recon::pet::PetGeometry pg, PetGeometryOf(spec, g));
  TESSERA_ASSIGN_OR_RETURN(const bool mu_per_slice, AttenuationPerSlice(spec, g, slices));
  NDArray mu;
  if (!spec.pet.attenuation_path.empty()) {
    recon::formats::VolumeReadOptions vo;
    vo.nonnegative = true;
    vo.what = "attenuation map";
    vo.check_affine = !mu_per_slice;
    absl::StatusOr<NDArray> mu_host = recon::formats::ReadVolume(
        spec.pet.attenuation_path, mu_per_slice ? StackedVolume(g.volume, slices) : g.volume, vo);
    if (!mu_host.ok()) return Annotate(mu_host.status(), "pet.attenuation");
    TESSERA_ASSIGN_OR_RETURN(mu, ToBackend(*mu_host, stream));
  }
  TESSERA_ASSIGN_OR_RETURN(const PetCorrections corrections, ReadPetCorrections(spec.pet, pg));
  const int subsets = static_cast<int>(std::min<int64_t>(spec.pet.subsets, g.projection.num_views()));
  const std::string name = PetMethodName(spec.pet.method);
  const auto progress = [&](int iteration, int total, double log_likelihood) -> absl::Status {
    result->add_log_likelihood(log_likelihood);
    Report(ctx, "reconstruct", iteration, total, IterationFraction(iteration, total),
           {{"log_likelihood", log_likelihood}},
           absl::StrFormat("%s: sub-iteration %d of %d, log-likelihood %.8g", name, iteration, total,
                           log_likelihood));
    return Continue(ctx);
  };
  TESSERA_ASSIGN_OR_RETURN(*volume, NewVolume(g, stream, slices));
  float* x = volume->data<float>();
  TESSERA_RETURN_IF_ERROR(recon::Fill(stream, x, g.volume.size() * slices, 1.0f));  // uniform start
  if (!spec.listmode_path.empty()) {
    absl::StatusOr<recon::pet::ListModeData> events = recon::pet::ReadListModeFile(spec.listmode_path, &pg);
    if (!events.ok()) return Annotate(events.status(), "listmode");
    recon::pet::ListModeOptions lo;
    lo.num_subsets = subsets;
    lo.mode = mode;
    lo.mu_map = mu.empty() ? nullptr : mu.data<float>();
    lo.efficiency = corrections.efficiency.empty() ? nullptr : corrections.efficiency.data();
    TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<recon::pet::ListModeReconstructor> reconstructor,
                             recon::pet::ListModeReconstructor::Create(pg, stream, lo));
    TESSERA_RETURN_IF_ERROR(reconstructor->SetEvents(events->events.data(),
                                                     static_cast<int64_t>(events->events.size())));
    events->events = {};
    TESSERA_RETURN_IF_ERROR(reconstructor->Run(x, spec.pet.iterations, progress));
    result->set_iterations(spec.pet.iterations);
    return stream.Synchronize();
  }
  recon::formats::SinogramOptions so;
  so.tof_bins = spec.pet.tof_bins > 1 ? spec.pet.tof_bins : 0;
  so.counts = true;
  absl::StatusOr<NDArray> host = slices == 1 ? recon::formats::ReadSinogram(spec.sinogram_path, g.projection, so)
                                             : recon::formats::ReadSinogramStack(spec.sinogram_path, g.projection, so);
  if (!host.ok()) return Annotate(host.status(), "sinogram");
  TESSERA_ASSIGN_OR_RETURN(NDArray counts, ToBackend(*host, stream));
  *host = NDArray();
  recon::pet::PetProjectorOptions po;
  po.num_subsets = subsets;
  po.mode = mode;
  po.mu_map = mu.empty() ? nullptr : mu.data<float>();
  po.efficiency = corrections.efficiency.empty() ? nullptr : corrections.efficiency.data();
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<recon::pet::PetProjector> projector,
                           recon::pet::PetProjector::Create(pg, stream, po));
  NDArray background;  // randoms + scatter per sinogram element, on the backend
  if (!corrections.background.empty()) {
    TESSERA_ASSIGN_OR_RETURN(background, ToBackend(corrections.background, stream));
  }
  recon::pet::OsemOptions oo;
  oo.background = background.empty() ? nullptr : background.data<float>();
  oo.iterations = spec.pet.iterations;
  oo.num_subsets = po.num_subsets;
  oo.progress = progress;
  if (slices == 1) {
    TESSERA_RETURN_IF_ERROR(recon::pet::Osem(*projector, counts.data<float>(), x, oo));
    result->set_iterations(spec.pet.iterations);
    return stream.Synchronize();
  }
  double last_log_likelihood = 0;
  oo.progress = [&](int, int, double log_likelihood) -> absl::Status {
    last_log_likelihood = log_likelihood;
    return Continue(ctx);
  };
  const int64_t sinogram_size = g.projection.sinogram_size(), voxels = g.volume.size();
  for (int64_t s = 0; s < slices; ++s) {
    if (mu_per_slice && s > 0) {  // the first was made with slice 0's map
      po.mu_map = mu.data<float>() + s * voxels;
      TESSERA_ASSIGN_OR_RETURN(projector, recon::pet::PetProjector::Create(pg, stream, po));
    }
    TESSERA_RETURN_IF_ERROR(recon::pet::Osem(*projector, counts.data<float>() + s * sinogram_size, x + s * voxels, oo));
    result->add_log_likelihood(last_log_likelihood);
    Report(ctx, "reconstruct", s + 1, slices, IterationFraction(static_cast<int>(s + 1), static_cast<int>(slices)), {},
           absl::StrCat(name, ": slice ", s + 1, " of ", slices, " done"));
    TESSERA_RETURN_IF_ERROR(Continue(ctx));
  }
  result->set_iterations(spec.pet.iterations);
  return stream.Synchronize();
}

// CT and PET: the geometry's volume, written as reconstruction.nii.gz.
absl::Status RunTomography(const ReconSpec& spec, const ReconRunContext& ctx, const Stream& stream,
                           ReconOutcome* out) {
  TESSERA_ASSIGN_OR_RETURN(CtGeometry g, LoadGeometry(spec));
  v1::ReconstructionResult& result = out->result;
  NDArray volume;
  std::string redundancy;
  int64_t slices = 1;  // a CT stack's
  if (spec.modality == Modality::kCt) {
    TESSERA_ASSIGN_OR_RETURN(CtMethod method, EffectiveCtMethod(spec.ct, g));
    TESSERA_ASSIGN_OR_RETURN(slices, CtSinogramSlices(spec, g));
    result.set_modality("ct");
    result.set_method(CtMethodName(method));
    TESSERA_RETURN_IF_ERROR(RunCt(spec, g, method, slices, stream, ctx, &volume, &result, &redundancy));
  } else {
    result.set_modality("pet");
    result.set_method(PetMethodName(spec.pet.method));
    TESSERA_ASSIGN_OR_RETURN(slices, PetSinogramSlices(spec, g));
    TESSERA_RETURN_IF_ERROR(RunPet(spec, g, slices, stream, ctx, &volume, &result));
  }
  TESSERA_RETURN_IF_ERROR(Continue(ctx));
  Report(ctx, "output", 0, 0, 0.97, {}, "writing reconstruction.nii.gz");
  TESSERA_ASSIGN_OR_RETURN(NDArray host, volume.CopyTo(MemoryKind::kHost, stream));
  const recon::VolumeGeometry v = StackedVolume(g.volume, slices);
  TESSERA_RETURN_IF_ERROR(recon::formats::WriteVolume(host, v, (fs::path(ctx.work_dir) / kVolumeFile).string()));
  out->work_files.push_back(kVolumeFile);
  std::string geometry = recon::Describe(g);
  if (slices > 1) absl::StrAppend(&geometry, "; a stack of ", slices, " slices (one plan)");
  if (!redundancy.empty()) absl::StrAppend(&geometry, "; ", redundancy);
  result.set_geometry(geometry);
  for (int64_t d : {v.nx, v.ny, v.nz}) result.add_dims(d);
  for (double s : {v.dx(), v.dy(), v.dz()}) result.add_spacing(s);
  return absl::OkStatus();
}

// request.output's DICOM form of reconstruction.nii.gz: reconstruction_dicom/
// ("tessera recon ct fdk"), added to the work files. The NIfTI stays in the
// job's results whatever the format (DownloadResult and volume_sha256 read
// it); format dicom only keeps it out of output_dir.
absl::Status WriteDicomOutput(const ReconSpec& spec, const ReconRunContext& ctx, ReconOutcome* out) {
  if (!spec.output.dicom) return absl::OkStatus();
  Report(ctx, "output", 0, 0, 0.98, {}, "writing reconstruction_dicom/");
  TESSERA_ASSIGN_OR_RETURN(Volume volume, ReadNifti((fs::path(ctx.work_dir) / kVolumeFile).string()));
  dicom::ResultOutputPlan plan = spec.output;
  plan.nifti = false;  // written already
  const v1::ReconstructionResult& result = out->result;
  TESSERA_ASSIGN_OR_RETURN(dicom::ResultVolumeFiles written,
                           dicom::WriteResultVolume(volume, ctx.work_dir, kVolumeFile, dicom::ResultVolumeKind::kImage,
                                                    plan, absl::StrCat("tessera recon ", result.modality(), " ",
                                                                       result.method())));
  for (const std::string& name : written.files) out->work_files.push_back(name);
  TESSERA_LOG(INFO) << "reconstruction: " << written.note;
  return absl::OkStatus();
}

// Every modality: the volume's hash, the list of result files, and their
// copies in output_dir (each written under a temporary name, then renamed;
// a DICOM series into its own emptied folder there).
absl::Status Publish(const ReconSpec& spec, const ReconRunContext& ctx, ReconOutcome* out) {
  v1::ReconstructionResult& result = out->result;
  TESSERA_ASSIGN_OR_RETURN(std::string sha, Sha256OfFile((fs::path(ctx.work_dir) / kVolumeFile).string()));
  result.set_volume_sha256(sha);
  TESSERA_RETURN_IF_ERROR(WriteDicomOutput(spec, ctx, out));
  for (const std::string& name : out->work_files) result.add_files(name);
  if (spec.output_dir.empty()) return absl::OkStatus();
  std::error_code dir_ec;
  fs::create_directories(spec.output_dir, dir_ec);
  const std::string series_dir = dicom::DicomSeriesDirName(kVolumeFile);
  if (spec.output.dicom && !dir_ec) {
    fs::remove_all(fs::path(spec.output_dir) / series_dir, dir_ec);
    fs::create_directories(fs::path(spec.output_dir) / series_dir, dir_ec);
    if (!spec.output.nifti) result.set_output_path((fs::path(spec.output_dir) / series_dir).string());
  }
  for (const std::string& name : out->work_files) {
    if (name == kVolumeFile && !spec.output.nifti) continue;  // format dicom
    const std::string copy = (fs::path(spec.output_dir) / name).string();
    const absl::Status copied =
        dir_ec ? absl::UnknownError(dir_ec.message()) : WriteFileAtomically(copy, [&](const std::string& tmp) {
          std::error_code ec;
          fs::copy_file(fs::path(ctx.work_dir) / name, tmp, fs::copy_options::overwrite_existing, ec);
          return ec ? absl::UnknownError(ec.message()) : absl::OkStatus();
        });
    if (!copied.ok()) return absl::InternalError(absl::StrCat("output_dir: cannot write ", copy, ": ", copied.message()));
    if (name == kVolumeFile) result.set_output_path(copy);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckReconInputs(const ReconSpec& spec) {
  if (spec.modality == Modality::kMri) return CheckMriInputs(spec);
  if (spec.modality == Modality::kUltrasound) return CheckUltrasoundInputs(spec);
  TESSERA_ASSIGN_OR_RETURN(CtGeometry g, LoadGeometry(spec));
  const recon::VolumeGeometry& v = g.volume;
  if (spec.modality == Modality::kCt) {
    TESSERA_RETURN_IF_ERROR(EffectiveCtMethod(spec.ct, g).status());
    return CtSinogramSlices(spec, g).status();
  }
  TESSERA_ASSIGN_OR_RETURN(const recon::pet::PetGeometry pg, PetGeometryOf(spec, g));
  int64_t slices = 1;
  if (!spec.sinogram_path.empty()) {
    const absl::Status one = CheckHeaderDims(
        spec.sinogram_path, recon::formats::SinogramShape(g.projection, spec.pet.tof_bins > 1 ? spec.pet.tof_bins : 0),
        "sinogram", spec.pet.tof_bins > 1 ? "proj_geom with pet.tof_bins" : "proj_geom");
    if (!one.ok()) {  // a stack, or the one-sinogram error
      absl::StatusOr<int64_t> stacked = PetSinogramSlices(spec, g);
      if (!stacked.ok() && !absl::StartsWith(stacked.status().message(), "pet:")) return one;
      TESSERA_ASSIGN_OR_RETURN(slices, stacked);
    }
  }
  if (slices > 1) {
    TESSERA_RETURN_IF_ERROR(AttenuationPerSlice(spec, g, slices).status());
  } else if (!spec.pet.attenuation_path.empty()) {
    TESSERA_RETURN_IF_ERROR(CheckHeaderDims(spec.pet.attenuation_path, {v.nx, v.ny, v.nz}, "pet.attenuation",
                                            "vol_geom"));
  }
  // The corrections are read whole (a sinogram without TOF axis each): their
  // values decide whether the job can run at all.
  return ReadPetCorrections(spec.pet, pg).status();
}

absl::StatusOr<ReconOutcome> RunReconstruction(const ReconSpec& spec, const ReconRunContext& ctx) {
  const auto start = std::chrono::steady_clock::now();
  Report(ctx, "input", 0, 0, 0.0, {}, "reading the inputs");
  TESSERA_ASSIGN_OR_RETURN(Backend backend, ResolveBackend(spec.device));
  absl::StatusOr<Stream> stream = backend == Backend::kCpu ? Stream::Cpu() : Stream::Create(backend);
  if (!stream.ok()) return stream.status();

  ReconOutcome out;
  if (spec.modality == Modality::kUltrasound) {
    TESSERA_RETURN_IF_ERROR(RunUltrasound(spec, ctx, *stream, &out));
  } else if (spec.modality == Modality::kMri) {
    TESSERA_RETURN_IF_ERROR(RunMri(spec, ctx, *stream, &out));
  } else {
    TESSERA_RETURN_IF_ERROR(RunTomography(spec, ctx, *stream, &out));
  }
  TESSERA_RETURN_IF_ERROR(Continue(ctx));
  TESSERA_RETURN_IF_ERROR(Publish(spec, ctx, &out));
  v1::ReconstructionResult& result = out.result;
  result.set_backend(std::string(BackendName(backend)));
  result.set_deterministic(spec.deterministic);
  result.set_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return out;
}

}  // namespace tessera::reconstruction

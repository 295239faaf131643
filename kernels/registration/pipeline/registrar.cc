#include "kernels/registration/pipeline/registrar.h"

#include <memory>
#include <optional>
#include <thread>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/buffer.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/registration/field_ops.h"
#include "kernels/registration/grid_sampler.h"
#include "kernels/registration/pipeline/array_helpers.h"
#include "kernels/registration/pipeline/metric_mask.h"
#include "kernels/registration/pipeline/out_of_core_stage.h"
#include "kernels/registration/pipeline/registration_plan.h"
#include "kernels/registration/pipeline/run_phases.h"
#include "kernels/registration/pipeline/sharded_deformable_stage.h"
#include "kernels/registration/pipeline/space.h"
#include "kernels/registration/pipeline/transform_params.h"

namespace tessera::registration {
namespace {

absl::Status ValidateInputs(const Volume& fixed, const Volume& moving) {
  for (const auto& [v, which] : {std::pair<const Volume*, const char*>{&fixed, "fixed"}, {&moving, "moving"}}) {
    if (v->data.rank() != 3) {
      return absl::InvalidArgumentError(absl::StrCat(which, " image must be a 3-D scalar volume, got shape ",
                                                     ShapeToString(v->data.shape())));
    }
    if (v->data.memory_kind() == MemoryKind::kDevice) {
      return absl::InvalidArgumentError(absl::StrCat(which, " image must be in host memory"));
    }
  }
  const bool fixed_2d = fixed.data.dim(2) == 1, moving_2d = moving.data.dim(2) == 1;
  if (fixed_2d != moving_2d) {
    return absl::InvalidArgumentError(absl::StrCat("cannot register a 2-D image to a 3-D one (fixed ",
                                                   ShapeToString(fixed.data.shape()), ", moving ",
                                                   ShapeToString(moving.data.shape()), ")"));
  }
  return absl::OkStatus();
}

// Wall time per phase of one run, for the "timing:" log line (issue 37: where
// a whole registration's time goes). Each mark waits for the stream, so a
// phase is charged for its own queued device work, not the next one's.
class PhaseClock {
 public:
  explicit PhaseClock(absl::Time start) : last_(start) {}
  absl::Status Mark(const char* phase, const Stream* stream) {
    if (stream != nullptr) TESSERA_RETURN_IF_ERROR(stream->Synchronize());
    const absl::Time now = absl::Now();
    absl::StrAppendFormat(&line_, "%s%s %.3f s", line_.empty() ? "timing (wall, synchronised): " : ", ", phase,
                          absl::ToDoubleSeconds(now - last_));
    last_ = now;
    return absl::OkStatus();
  }
  const std::string& line() const { return line_; }

 private:
  absl::Time last_;
  std::string line_;
};

}  // namespace

absl::StatusOr<RegistrationResult> Register(const Volume& fixed, const Volume& moving, const RegistrationPlan& plan,
                                            const ProgressCallback& progress, const std::atomic<bool>* cancel,
                                            absl::Time deadline) {
  TESSERA_RETURN_IF_ERROR(ValidateInputs(fixed, moving));
  const absl::Time start = absl::Now();
  PhaseClock clock(start);
  const RegistrationOptions& options = plan.options;
  TESSERA_ASSIGN_OR_RETURN(Backend backend, ResolveBackend(options.device));
  TESSERA_RETURN_IF_ERROR(ValidateShardedOptions(options, backend));
  // Masks may be set after planning (RunRegistration adds the request's).
  TESSERA_RETURN_IF_ERROR(CheckMasks(options));
  // Sharded ranks name their GPUs; the rest of the run is on the first.
  const int ordinal = backend == Backend::kCuda && !options.gpus.empty() ? options.gpus.front() : 0;
  // The GPU's context starts on a thread while the host half of an in-core
  // set-up runs here (a fifth of a second each on a 1 mm pair; issue 37).
  std::optional<internal::HostPrepared> prepared;
  absl::StatusOr<Stream> created = absl::UnknownError("stream not created");
  {
    std::thread creating([&] { created = Stream::Create(backend, ordinal); });
    absl::Status prepare_status;
    if (backend == Backend::kCuda && internal::PrepareHostInputsEarly(options, DimsOf(fixed.data), DimsOf(moving.data))) {
      absl::StatusOr<internal::HostPrepared> p = internal::PrepareHostInputs(fixed, moving, options);
      if (p.ok()) {
        prepared = std::move(*p);
      } else {
        prepare_status = p.status();
      }
    }
    creating.join();
    TESSERA_RETURN_IF_ERROR(prepare_status);
  }
  TESSERA_RETURN_IF_ERROR(created.status());
  Stream stream = std::move(*created);
  // This registration's device memory, also charged to the caller's tracker.
  auto memory = std::make_shared<DeviceMemoryTracker>(CurrentDeviceMemoryTracker());
  ScopedDeviceMemoryCharge charge(memory);
  // Out of core (forced, a device budget, or a pair larger than the GPU's
  // free memory): every phase of the run within the limit.
  TESSERA_ASSIGN_OR_RETURN(const OutOfCoreChoice out_of_core,
                           ChooseOutOfCore(options, stream, DimsOf(fixed.data), DimsOf(moving.data)));
  if (out_of_core.shards > 0 && HasMasks(options)) {
    return absl::InvalidArgumentError(
        "masks are not supported out of core yet (this pair does not fit the device memory budget or the GPU's free "
        "memory)");
  }
  TESSERA_RETURN_IF_ERROR(clock.Mark("stream", &stream));
  // A pair that turned out not to fit runs out of core and drops the
  // preparation (PrepareHostInputsEarly keeps that case rare and small).
  if (out_of_core.shards > 0) prepared.reset();
  const internal::RunInputs in{fixed, moving, plan, stream, progress, cancel, deadline,
                               prepared ? &*prepared : nullptr};
  const std::unique_ptr<internal::RunPhases> run =
      out_of_core.shards > 0 ? internal::OutOfCorePhases(in, out_of_core) : internal::InCorePhases(in);

  RegistrationResult result;
  result.backend = std::string(BackendName(backend));
  TESSERA_ASSIGN_OR_RETURN(LinearTransform transform, run->SetUp(&result));
  TESSERA_RETURN_IF_ERROR(clock.Mark("set-up", &stream));
  if (plan.rigid) {
    TESSERA_ASSIGN_OR_RETURN(transform, run->RunLinearStage(TransformModel::kRigid, "rigid", transform,
                                                            options.rigid_iterations, &result.log));
    TESSERA_RETURN_IF_ERROR(clock.Mark("rigid", &stream));
  }
  if (plan.affine) {
    TESSERA_ASSIGN_OR_RETURN(transform, run->RunLinearStage(TransformModel::kAffine, "affine", transform,
                                                            options.affine_iterations, &result.log));
    TESSERA_RETURN_IF_ERROR(clock.Mark("affine", &stream));
  }
  result.affine_ras = transform.ToMat4();
  // The deformation, carried to full resolution.
  NDArray u;
  if (plan.deformable) {
    TESSERA_ASSIGN_OR_RETURN(u, run->RunDeformableStage(result.affine_ras, &result.log));
    TESSERA_RETURN_IF_ERROR(clock.Mark("deformable", &stream));
  }
  run->Report("output", 1, 0, 0, 0);
  TESSERA_RETURN_IF_ERROR(run->Output(std::move(u), &result));
  TESSERA_RETURN_IF_ERROR(clock.Mark("output", &stream));
  result.log.push_back(clock.line());
  result.peak_device_bytes = memory->peak_bytes();
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return result;
}

absl::StatusOr<RegistrationResult> Register(const Volume& fixed, const Volume& moving,
                                            const RegistrationOptions& options, const ProgressCallback& progress,
                                            const std::atomic<bool>* cancel, absl::Time deadline) {
  TESSERA_ASSIGN_OR_RETURN(const RegistrationPlan plan, PlanRegistration(options));
  return Register(fixed, moving, plan, progress, cancel, deadline);
}

absl::StatusOr<NDArray> WarpLabels(const Volume& moving_labels, const Volume& fixed_like,
                                   const RegistrationResult& result, const std::string& device,
                                   GridSamplerTuning sampler) {
  if (moving_labels.data.rank() != 3) return absl::InvalidArgumentError("labels must be a 3-D volume");
  TESSERA_ASSIGN_OR_RETURN(Backend backend, ResolveBackend(device));
  TESSERA_ASSIGN_OR_RETURN(Stream stream, Stream::Create(backend));
  const MemoryKind kind = MemoryKindFor(stream);
  const GridSpace fixed_space = SpaceOf(fixed_like), label_space = SpaceOf(moving_labels);
  TESSERA_ASSIGN_OR_RETURN(NDArray labels32, moving_labels.data.AsType(DType::kInt32));
  TESSERA_ASSIGN_OR_RETURN(NDArray labels_dev, labels32.CopyTo(kind, stream, stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(Affine12 a, SamplerAffineFromPhysical(result.affine_ras, fixed_space, label_space));
  float host_affine[12];
  for (int i = 0; i < 12; ++i) host_affine[i] = static_cast<float>(a[i]);
  TESSERA_ASSIGN_OR_RETURN(NDArray affine, NDArray::Allocate({12}, DType::kFloat32, kind, stream.ordinal()));
  TESSERA_RETURN_IF_ERROR(CopyBytes(affine.raw_data(), kind, host_affine, MemoryKind::kHost, sizeof(host_affine), stream));
  // u = L v for the labels' grid.
  // On the stream, in place after one copy (MixComponents: the arithmetic
  // Register's output phase uses), not in a single-threaded host loop.
  NDArray u_dev;
  if (!result.displacement_ras.empty()) {
    TESSERA_ASSIGN_OR_RETURN(Mat3 l, PhysicalToNormalizedDisplacement(result.affine_ras, label_space));
    TESSERA_ASSIGN_OR_RETURN(u_dev, result.displacement_ras.CopyTo(kind, stream, stream.ordinal()));
    TESSERA_RETURN_IF_ERROR(MixComponents(u_dev, l, stream));
  }
  GridSampleArgs args;
  args.image_dims = Dims3{labels32.dim(0), labels32.dim(1), labels32.dim(2)};
  args.affine = affine.data<float>();
  args.disp = u_dev.empty() ? nullptr : u_dev.data<float>();
  args.out_dims = Dims3{fixed_like.data.dim(0), fixed_like.data.dim(1), fixed_like.data.dim(2)};
  args.padding = Padding::kZeros;
  TESSERA_ASSIGN_OR_RETURN(NDArray out, NDArray::Allocate(fixed_like.data.shape(), DType::kInt32, kind, stream.ordinal()));
  TESSERA_RETURN_IF_ERROR(GridSampleNearest(stream, labels_dev.data<int32_t>(), args, out.data<int32_t>(), sampler));
  return out.CopyTo(MemoryKind::kHost, stream);
}

}  // namespace tessera::registration

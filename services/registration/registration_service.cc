#include "services/registration/registration_service.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/device.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/nifti_io.h"
#include "common/status.h"
#include "kernels/registration/mutual_info.h"
#include "services/common/chunked_upload.h"
#include "services/common/data_roots.h"
#include "services/jobs/job_proto.h"
#include "services/jobs/watch.h"
#include "services/registration/ants_transform_io.h"
#include "services/registration/outputs.h"
#include "services/registration/registration_job.h"
#include "services/server/call_checks.h"

namespace tessera {

using jobs::IsTerminal;
using jobs::Job;
using jobs::JobSnapshot;
using jobs::JobState;

namespace {

constexpr char kJobKind[] = "registration";
// Iteration counts beyond this are surely mistakes.
constexpr int kMaxIterations = 100000;
constexpr int kMaxScale = 64;

// One input: a file (read by the worker) or an uploaded volume (already here).
struct InputSource {
  std::string what;                 // "fixed", "moving labels", ...
  std::string path;                 // resolved, when from a file
  std::optional<Volume> volume;     // when uploaded
  std::string description() const { return volume ? "upload" : path; }
};

// The result a succeeded job keeps in memory for GetResult/DownloadResult.
struct RegistrationPayload : jobs::JobPayload {
  registration::RegistrationSummary summary;
  Geometry fixed_geometry;
  std::string affine_mat;           // 0GenericAffine.mat bytes
  NDArray inverse_warp;             // RAS mm, with options.inverse_warp and a deformable stage
  v1::RegistrationResult result;    // prebuilt (job_id set)
};

// The ITK affine file as written by WriteRegistrationOutputs, as bytes.
std::string AffineMatBytes(const registration::RegistrationSummary& summary, const Volume& fixed) {
  return registration::ItkAffineBytes(summary.result.affine_ras, registration::GridCentre(fixed));
}

}  // namespace

struct RegistrationServiceImpl::JobSpec {
  InputSource fixed, moving;
  std::optional<InputSource> fixed_labels, moving_labels;
  registration::RegistrationOptions options;
  bool inverse_warp = false;
  std::string output_dir;           // resolved; empty: no files
};

namespace registration_internal {

absl::StatusOr<registration::RegistrationOptions> ToRegistrarOptions(const v1::RegistrationOptions& proto,
                                                                     const std::string& default_device) {
  registration::RegistrationOptions o;
  if (!proto.metric().empty()) o.metric = proto.metric();
  if (o.metric != "mse" && o.metric != "lncc" && o.metric != "mi") {
    return absl::InvalidArgumentError(absl::StrCat("options.metric '", o.metric, "' is not one of mse, lncc, mi"));
  }
  if (proto.stages_size() > 0) {
    o.stages.assign(proto.stages().begin(), proto.stages().end());
    for (const std::string& s : o.stages) {
      if (s != "rigid" && s != "affine" && s != "deformable") {
        return absl::InvalidArgumentError(
            absl::StrCat("options.stages: unknown stage '", s, "'; expected rigid, affine, deformable"));
      }
    }
  }
  if (proto.scales_size() > 0) {
    o.scales.assign(proto.scales().begin(), proto.scales().end());
    for (size_t i = 0; i < o.scales.size(); ++i) {
      if (o.scales[i] < 1 || o.scales[i] > kMaxScale || (i > 0 && o.scales[i] > o.scales[i - 1])) {
        return absl::InvalidArgumentError(absl::StrCat("options.scales [", absl::StrJoin(o.scales, ", "),
                                                       "] must be in 1..", kMaxScale,
                                                       " and coarse to fine, e.g. 4, 2, 1"));
      }
    }
  }
  for (auto [field, name, target] :
       {std::tuple<const google::protobuf::RepeatedField<int32_t>*, const char*, std::vector<int>*>{
            &proto.rigid_iterations(), "rigid_iterations", &o.rigid_iterations},
        {&proto.affine_iterations(), "affine_iterations", &o.affine_iterations},
        {&proto.deformable_iterations(), "deformable_iterations", &o.deformable_iterations}}) {
    if (field->empty()) continue;
    target->assign(field->begin(), field->end());
    for (int n : *target) {
      if (n < 0 || n > kMaxIterations) {
        return absl::InvalidArgumentError(
            absl::StrCat("options.", name, " has ", n, "; iteration counts must be in 0..", kMaxIterations));
      }
    }
  }
  if (proto.lncc_window() != 0) {
    if (proto.lncc_window() < 1 || proto.lncc_window() % 2 == 0 || proto.lncc_window() > 51) {
      return absl::InvalidArgumentError(
          absl::StrCat("options.lncc_window ", proto.lncc_window(), " must be odd, in 1..51"));
    }
    o.metric_options.lncc_window = proto.lncc_window();
  }
  if (proto.mi_bins() != 0) {
    if (proto.mi_bins() < registration::kMattesMiMinBins || proto.mi_bins() > registration::kMattesMiMaxBins) {
      return absl::InvalidArgumentError(absl::StrCat("options.mi_bins ", proto.mi_bins(), " must be in ",
                                                     registration::kMattesMiMinBins, "..", registration::kMattesMiMaxBins));
    }
    o.metric_options.mi_bins = proto.mi_bins();
  }
  o.device = proto.device().empty() ? default_device : proto.device();
  if (o.device != "auto" && o.device != "cpu" && o.device != "cuda") {
    return absl::InvalidArgumentError(absl::StrCat("options.device '", o.device, "' is not one of auto, cpu, cuda"));
  }
  TESSERA_RETURN_IF_ERROR(ResolveBackend(o.device).status());
  if (proto.patience() != 0) {
    if (proto.patience() < 1 || proto.patience() > kMaxIterations) {
      return absl::InvalidArgumentError(
          absl::StrCat("options.patience ", proto.patience(), " must be in 1..", kMaxIterations));
    }
    o.patience = proto.patience();
  }
  if (proto.has_tolerance()) {
    if (!std::isfinite(proto.tolerance()) || proto.tolerance() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("options.tolerance ", proto.tolerance(), " must be finite and not negative"));
    }
    o.tolerance = proto.tolerance();
  }
  if (!proto.init().empty()) o.init = proto.init();
  if (o.init != "com" && o.init != "none") {
    return absl::InvalidArgumentError(absl::StrCat("options.init '", o.init, "' is not one of com, none"));
  }
  return o;
}

double EstimateFraction(const registration::RegistrationOptions& options,
                        const registration::RegistrationProgress& progress) {
  if (progress.stage == "init") return 0;
  if (progress.stage == "output") return 0.95;
  const auto per_scale = [](const std::vector<int>& v, size_t i) {
    return v.empty() ? 0 : std::max(0, v[std::min(i, v.size() - 1)]);
  };
  int64_t total = 0, done = 0;
  bool found = false;
  for (const char* stage : {"rigid", "affine", "deformable"}) {
    if (std::find(options.stages.begin(), options.stages.end(), stage) == options.stages.end()) continue;
    const std::vector<int>& its = std::string(stage) == "rigid"    ? options.rigid_iterations
                                  : std::string(stage) == "affine" ? options.affine_iterations
                                                                   : options.deformable_iterations;
    for (size_t si = 0; si < options.scales.size(); ++si) {
      const int n = per_scale(its, si);
      total += n;
      if (found) continue;
      if (progress.stage == stage && progress.scale == options.scales[si]) {
        done += std::min(progress.iteration, n);
        found = true;
      } else {
        done += n;
      }
    }
  }
  if (!found || total == 0) return 0;
  return 0.95 * static_cast<double>(done) / static_cast<double>(total);
}

}  // namespace registration_internal

absl::StatusOr<std::unique_ptr<RegistrationServiceImpl>> RegistrationServiceImpl::Create(
    const ServerOptions& options, RegistrationServiceOptions service_options) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> roots, CanonicalDataRoots(options.data_roots));
  if (options.max_volume_bytes <= 0) return absl::InvalidArgumentError("max_volume_bytes must be positive");
  TESSERA_RETURN_IF_ERROR(ResolveBackend(options.device).status());
  if (service_options.workers < 1) return absl::InvalidArgumentError("workers must be at least 1");
  if (service_options.max_queued_jobs < 0 || service_options.max_finished_jobs < 0) {
    return absl::InvalidArgumentError("job limits must not be negative");
  }
  if (service_options.upload_store_bytes < 0 || service_options.download_chunk_bytes <= 0) {
    return absl::InvalidArgumentError("upload store and chunk sizes must be positive");
  }
  if (service_options.upload_store_bytes == 0) {
    service_options.upload_store_bytes =
        options.max_volume_bytes > std::numeric_limits<int64_t>::max() / 4 ? std::numeric_limits<int64_t>::max()
                                                                            : 4 * options.max_volume_bytes;
  }
  return std::unique_ptr<RegistrationServiceImpl>(
      new RegistrationServiceImpl(options, std::move(roots), service_options));
}

RegistrationServiceImpl::RegistrationServiceImpl(const ServerOptions& options, std::vector<std::string> roots,
                                                 RegistrationServiceOptions service_options)
    : roots_(std::move(roots)),
      max_volume_bytes_(options.max_volume_bytes),
      max_send_message_bytes_(options.max_send_message_bytes),
      default_device_(options.device),
      service_options_(service_options),
      uploads_(VolumeStore::Options{service_options.upload_store_bytes, service_options.upload_ttl, 1024}),
      registry_(jobs::JobRegistryOptions{service_options.max_finished_jobs, service_options.finished_job_ttl}),
      pool_(service_options.workers, service_options.max_queued_jobs) {}

RegistrationServiceImpl::~RegistrationServiceImpl() {
  registry_.CancelAll();
  pool_.Shutdown();
}

// ---------------------------------------------------------------- uploads

grpc::Status RegistrationServiceImpl::UploadVolume(grpc::ServerContext* context,
                                                   grpc::ServerReader<v1::ArrayChunk>* reader,
                                                   v1::UploadedVolume* response) {
  return ToGrpcStatus(UploadVolumeImpl(*context, reader, response));
}

absl::Status RegistrationServiceImpl::UploadVolumeImpl(const grpc::ServerContext& context,
                                                       grpc::ServerReader<v1::ArrayChunk>* reader,
                                                       v1::UploadedVolume* response) {
  VolumeStore::Reservation space;
  TESSERA_ASSIGN_OR_RETURN(ReceivedArray received,
                           ReceiveChunkedArray(context, reader, max_volume_bytes_,
                                               [&](const ArrayHeader& header) -> absl::Status {
                                                 TESSERA_ASSIGN_OR_RETURN(space, uploads_.Reserve(header.nbytes));
                                                 return absl::OkStatus();
                                               }));
  Volume volume{received.data, received.header.geometry, received.header_proto.description()};
  TESSERA_ASSIGN_OR_RETURN(VolumeStore::Entry entry, uploads_.Commit(std::move(space), std::move(volume)));
  response->set_upload_id(entry.id);
  *response->mutable_header() = received.header_proto;
  response->set_nbytes(entry.nbytes);
  response->set_expires_unix_ms(absl::ToUnixMillis(entry.expires));
  TESSERA_LOG(INFO) << "registration: upload " << entry.id << " " << ShapeToString(received.header.shape) << " "
                    << DTypeName(received.header.dtype) << " (" << entry.nbytes << " bytes)";
  return absl::OkStatus();
}

// ---------------------------------------------------------------- register

absl::StatusOr<std::shared_ptr<const RegistrationServiceImpl::JobSpec>> RegistrationServiceImpl::PrepareJob(
    const v1::RegisterRequest& request) {
  auto spec = std::make_shared<JobSpec>();
  TESSERA_ASSIGN_OR_RETURN(spec->options, registration_internal::ToRegistrarOptions(request.options(), default_device_));
  spec->inverse_warp = request.options().inverse_warp();

  const auto resolve = [&](const v1::VolumeSource& source, const char* what,
                           bool required) -> absl::StatusOr<std::optional<InputSource>> {
    InputSource in;
    in.what = what;
    switch (source.source_case()) {
      case v1::VolumeSource::kPath: {
        absl::StatusOr<std::string> path = ResolveUnderRoots(source.path(), roots_);
        if (!path.ok()) return Annotate(path.status(), absl::StrCat(what));
        struct stat st;
        // Refuse files that cannot fit before decompressing them.
        if (stat(path->c_str(), &st) == 0 && st.st_size > max_volume_bytes_ + max_volume_bytes_ / 64 + (1 << 20)) {
          return absl::ResourceExhaustedError(absl::StrCat(what, ": '", source.path(), "' (", st.st_size,
                                                           " bytes) exceeds the server's volume limit of ",
                                                           max_volume_bytes_, " bytes"));
        }
        in.path = *std::move(path);
        return std::optional<InputSource>(std::move(in));
      }
      case v1::VolumeSource::kUploadId: {
        absl::StatusOr<Volume> volume = uploads_.Get(source.upload_id());
        if (!volume.ok()) return Annotate(volume.status(), what);
        in.volume = *std::move(volume);
        return std::optional<InputSource>(std::move(in));
      }
      default:
        if (required) return absl::InvalidArgumentError(absl::StrCat(what, ": set its path or upload_id"));
        return std::optional<InputSource>();
    }
  };
  TESSERA_ASSIGN_OR_RETURN(std::optional<InputSource> fixed, resolve(request.fixed(), "fixed", true));
  TESSERA_ASSIGN_OR_RETURN(std::optional<InputSource> moving, resolve(request.moving(), "moving", true));
  TESSERA_ASSIGN_OR_RETURN(spec->fixed_labels, resolve(request.fixed_labels(), "fixed labels", false));
  TESSERA_ASSIGN_OR_RETURN(spec->moving_labels, resolve(request.moving_labels(), "moving labels", false));
  spec->fixed = *std::move(fixed);
  spec->moving = *std::move(moving);

  // What can be checked of uploads now (files are read by the worker).
  for (const InputSource* in : {&spec->fixed, &spec->moving}) {
    if (in->volume && in->volume->data.rank() != 3) {
      return absl::InvalidArgumentError(absl::StrCat(in->what, " image must be a 3-D scalar volume; the upload is ",
                                                     ShapeToString(in->volume->data.shape())));
    }
  }
  if (spec->fixed.volume && spec->fixed_labels && spec->fixed_labels->volume &&
      spec->fixed_labels->volume->data.shape() != spec->fixed.volume->data.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("fixed labels ",
                                                   ShapeToString(spec->fixed_labels->volume->data.shape()),
                                                   " do not match the fixed image ",
                                                   ShapeToString(spec->fixed.volume->data.shape())));
  }
  if (!request.output_dir().empty()) {
    absl::StatusOr<std::string> dir = ResolveOutputDirUnderRoots(request.output_dir(), roots_);
    if (!dir.ok()) return Annotate(dir.status(), "output_dir");
    spec->output_dir = *std::move(dir);
  }
  return std::shared_ptr<const JobSpec>(std::move(spec));
}

grpc::Status RegistrationServiceImpl::Register(grpc::ServerContext* /*context*/, const v1::RegisterRequest* request,
                                               v1::JobStatus* response) {
  return ToGrpcStatus(RegisterImpl(*request, response));
}

absl::Status RegistrationServiceImpl::RegisterImpl(const v1::RegisterRequest& request, v1::JobStatus* response) {
  const std::string& id = request.job_id();
  if (!id.empty()) {
    TESSERA_RETURN_IF_ERROR(Annotate(jobs::JobRegistry::ValidateJobId(id), "job_id"));
    // Idempotent: a known id returns its job, whatever the rest says.
    absl::StatusOr<std::shared_ptr<Job>> existing = registry_.Get(id);
    if (existing.ok()) {
      *response = jobs::ToJobStatusProto((*existing)->Snapshot());
      return absl::OkStatus();
    }
  }
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const JobSpec> spec, PrepareJob(request));
  std::lock_guard<std::mutex> lock(submit_mu_);
  bool created = false;
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Job> job, registry_.GetOrCreate(id, kJobKind, &created));
  if (created) {
    absl::Status queued = pool_.TrySubmit([this, job, spec] { RunJob(job, spec); });
    if (!queued.ok()) {
      registry_.Remove(job->id());
      return queued;
    }
    TESSERA_LOG(INFO) << "registration: job " << job->id() << " queued: " << spec->fixed.description() << " <- "
                      << spec->moving.description() << ", " << spec->options.metric << " ["
                      << absl::StrJoin(spec->options.stages, ",") << "] scales ["
                      << absl::StrJoin(spec->options.scales, ",") << "]";
  }
  *response = jobs::ToJobStatusProto(job->Snapshot());
  return absl::OkStatus();
}

// ---------------------------------------------------------------- the worker

namespace {

absl::StatusOr<Volume> Materialize(const InputSource& in, int64_t max_bytes, bool labels) {
  Volume volume;
  if (in.volume) {
    volume = *in.volume;
  } else {
    absl::StatusOr<Volume> read = ReadNifti(in.path);
    if (!read.ok()) return Annotate(read.status(), in.what);
    volume = *std::move(read);
    if (static_cast<int64_t>(volume.data.nbytes()) > max_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(in.what, ": '", in.path, "' holds ", volume.data.nbytes(),
                                                       " bytes, more than the server's limit of ", max_bytes));
    }
  }
  if (labels) TESSERA_RETURN_IF_ERROR(registration::ToIntegerLabels(volume));
  return volume;
}

absl::StatusOr<registration::RegistrationInputs> MaterializeAll(const RegistrationServiceImpl::JobSpec& spec,
                                                                int64_t max_bytes);

}  // namespace

void RegistrationServiceImpl::RunJob(const std::shared_ptr<Job>& job, const std::shared_ptr<const JobSpec>& spec) {
  if (!job->Start()) return;  // cancelled while queued
  TESSERA_LOG(INFO) << "registration: job " << job->id() << " running";
  const registration::RegistrationOptions& options = spec->options;
  double fraction = 0;  // never goes back (e.g. with repeated scale factors)
  auto progress = [&job, &options, &fraction](const registration::RegistrationProgress& p) {
    jobs::JobProgress out;
    out.stage = p.stage;
    out.step = p.iteration;
    out.total_steps = p.max_iterations;
    fraction = std::max(fraction, registration_internal::EstimateFraction(options, p));
    out.fraction = fraction;
    out.metrics["scale"] = p.scale;
    if (p.stage != "output") out.metrics["loss"] = p.loss;
    out.message = p.stage == "output" ? "writing results"
                  : p.stage == "init" ? absl::StrFormat("initialised, loss %.6g", p.loss)
                                      : absl::StrFormat("%s x%d: iteration %d/%d, loss %.6g", p.stage, p.scale,
                                                        p.iteration, p.max_iterations, p.loss);
    job->SetProgress(std::move(out));
  };
  const auto run = [&]() -> absl::StatusOr<std::shared_ptr<const RegistrationPayload>> {
    jobs::JobProgress reading;
    reading.stage = "input";
    reading.message = "reading inputs";
    job->SetProgress(reading);
    TESSERA_ASSIGN_OR_RETURN(registration::RegistrationInputs inputs, MaterializeAll(*spec, max_volume_bytes_));
    if (job->cancel_requested()) return absl::CancelledError("registration cancelled");
    auto payload = std::make_shared<RegistrationPayload>();
    TESSERA_ASSIGN_OR_RETURN(payload->summary,
                             registration::RunRegistration(inputs, options, spec->output_dir, spec->inverse_warp,
                                                           progress, job->cancel_flag()));
    const registration::RegistrationSummary& summary = payload->summary;
    const registration::RegistrationResult& r = summary.result;
    payload->fixed_geometry = inputs.fixed.geometry;
    payload->affine_mat = AffineMatBytes(summary, inputs.fixed);
    if (spec->inverse_warp && !r.displacement_ras.empty()) {
      if (!summary.files.inverse_warp.empty()) {
        TESSERA_ASSIGN_OR_RETURN(Volume inverse, registration::ReadAntsWarp(summary.files.inverse_warp));
        payload->inverse_warp = std::move(inverse.data);
      } else {
        TESSERA_ASSIGN_OR_RETURN(payload->inverse_warp,
                                 registration::InvertDisplacement(r.displacement_ras, inputs.fixed.geometry));
      }
    }

    v1::RegistrationResult& out = payload->result;
    out.set_job_id(job->id());
    out.set_initial_loss(r.initial_loss);
    out.set_final_loss(r.final_loss);
    if (summary.dice_before) out.set_dice_before(*summary.dice_before);
    if (summary.dice_after) out.set_dice_after(*summary.dice_after);
    out.set_folded_percent(summary.folded_percent);
    if (r.jacobian.voxels > 0) out.set_min_jacobian(r.jacobian.min_det);
    out.set_seconds(r.seconds);
    out.set_peak_device_bytes(static_cast<int64_t>(r.peak_device_bytes));
    for (double v : r.affine_ras) out.add_affine_ras(v);
    out.set_backend(r.backend);
    for (const std::string& line : r.log) out.add_log(line);
    v1::RegistrationOutputFiles* files = out.mutable_files();
    files->set_warped(summary.files.warped);
    files->set_warped_labels(summary.files.warped_labels);
    files->set_affine(summary.files.affine);
    files->set_warp(summary.files.warp);
    files->set_inverse_warp(summary.files.inverse_warp);
    out.add_artifacts(v1::REGISTRATION_ARTIFACT_WARPED);
    if (!summary.warped_labels.empty()) out.add_artifacts(v1::REGISTRATION_ARTIFACT_WARPED_LABELS);
    if (!r.displacement_ras.empty()) out.add_artifacts(v1::REGISTRATION_ARTIFACT_WARP);
    if (!payload->inverse_warp.empty()) out.add_artifacts(v1::REGISTRATION_ARTIFACT_INVERSE_WARP);
    out.add_artifacts(v1::REGISTRATION_ARTIFACT_AFFINE);
    out.set_metric(options.metric);
    for (const std::string& s : options.stages) out.add_stages(s);
    for (int s : options.scales) out.add_scales(s);
    out.set_summary_json(registration::SummaryToJson(summary, options));
    return std::shared_ptr<const RegistrationPayload>(std::move(payload));
  };
  absl::StatusOr<std::shared_ptr<const RegistrationPayload>> payload = run();
  if (payload.ok()) {
    TESSERA_LOG(INFO) << "registration: job " << job->id() << " succeeded in " << (*payload)->result.seconds()
                      << " s, loss " << (*payload)->result.initial_loss() << " -> "
                      << (*payload)->result.final_loss();
    job->Succeed(*std::move(payload));
  } else {
    TESSERA_LOG(INFO) << "registration: job " << job->id() << " ended: " << payload.status();
    job->Fail(payload.status());
  }
}

namespace {

absl::StatusOr<registration::RegistrationInputs> MaterializeAll(const RegistrationServiceImpl::JobSpec& spec,
                                                                int64_t max_bytes) {
  registration::RegistrationInputs in;
  TESSERA_ASSIGN_OR_RETURN(in.fixed, Materialize(spec.fixed, max_bytes, false));
  TESSERA_ASSIGN_OR_RETURN(in.moving, Materialize(spec.moving, max_bytes, false));
  if (spec.fixed_labels) {
    TESSERA_ASSIGN_OR_RETURN(in.fixed_labels, Materialize(*spec.fixed_labels, max_bytes, true));
    if (in.fixed_labels->data.shape() != in.fixed.data.shape()) {
      return absl::InvalidArgumentError(absl::StrCat("fixed labels ", ShapeToString(in.fixed_labels->data.shape()),
                                                     " do not match the fixed image ",
                                                     ShapeToString(in.fixed.data.shape())));
    }
  }
  if (spec.moving_labels) {
    TESSERA_ASSIGN_OR_RETURN(in.moving_labels, Materialize(*spec.moving_labels, max_bytes, true));
  }
  return in;
}

}  // namespace

// ---------------------------------------------------------------- job queries

grpc::Status RegistrationServiceImpl::WatchJob(grpc::ServerContext* context, const v1::JobRequest* request,
                                               grpc::ServerWriter<v1::Progress>* writer) {
  return ToGrpcStatus(WatchJobImpl(*context, *request, writer));
}

absl::Status RegistrationServiceImpl::WatchJobImpl(const grpc::ServerContext& context, const v1::JobRequest& request,
                                                   grpc::ServerWriter<v1::Progress>* writer) {
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Job> job, registry_.Get(request.job_id()));
  return jobs::WatchJobSnapshots(context, *job, service_options_.watch_interval, [&](const JobSnapshot& s) {
    return writer->Write(jobs::ToProgressProto(s));
  });
}

grpc::Status RegistrationServiceImpl::GetJob(grpc::ServerContext* /*context*/, const v1::JobRequest* request,
                                             v1::JobStatus* response) {
  absl::StatusOr<v1::JobStatus> status = jobs::GetJobStatus(registry_, request->job_id());
  if (!status.ok()) return ToGrpcStatus(status.status());
  *response = *std::move(status);
  return grpc::Status::OK;
}

grpc::Status RegistrationServiceImpl::CancelJob(grpc::ServerContext* /*context*/, const v1::JobRequest* request,
                                                v1::JobStatus* response) {
  absl::StatusOr<v1::JobStatus> status = jobs::RequestJobCancel(registry_, request->job_id(), "registration");
  if (!status.ok()) return ToGrpcStatus(status.status());
  *response = *std::move(status);
  return grpc::Status::OK;
}

namespace {

// The payload of a succeeded job, or why there is none.
absl::StatusOr<std::shared_ptr<const RegistrationPayload>> SucceededPayload(const JobSnapshot& s) {
  switch (s.state) {
    case JobState::kQueued:
    case JobState::kRunning:
      return absl::FailedPreconditionError(absl::StrCat("job '", s.id, "' is ", jobs::JobStateName(s.state),
                                                        "; its result is ready once it has SUCCEEDED (WatchJob)"));
    case JobState::kCancelled:
      return absl::FailedPreconditionError(absl::StrCat("job '", s.id, "' was cancelled; it has no result"));
    case JobState::kFailed:
      return absl::Status(s.error.code(), absl::StrCat("job '", s.id, "' failed: ", s.error.message()));
    case JobState::kSucceeded:
      break;
  }
  auto payload = std::dynamic_pointer_cast<const RegistrationPayload>(s.result);
  if (payload == nullptr) return absl::InternalError(absl::StrCat("job '", s.id, "' has no registration result"));
  return payload;
}

}  // namespace

grpc::Status RegistrationServiceImpl::GetResult(grpc::ServerContext* /*context*/, const v1::JobRequest* request,
                                                v1::RegistrationResult* response) {
  return ToGrpcStatus(GetResultImpl(*request, response));
}

absl::Status RegistrationServiceImpl::GetResultImpl(const v1::JobRequest& request, v1::RegistrationResult* response) {
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Job> job, registry_.Get(request.job_id()));
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const RegistrationPayload> payload, SucceededPayload(job->Snapshot()));
  *response = payload->result;
  return absl::OkStatus();
}

grpc::Status RegistrationServiceImpl::DownloadResult(grpc::ServerContext* context, const v1::DownloadRequest* request,
                                                     grpc::ServerWriter<v1::ArrayChunk>* writer) {
  return ToGrpcStatus(DownloadResultImpl(*context, *request, writer));
}

absl::Status RegistrationServiceImpl::DownloadResultImpl(const grpc::ServerContext& context,
                                                         const v1::DownloadRequest& request,
                                                         grpc::ServerWriter<v1::ArrayChunk>* writer) {
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Job> job, registry_.Get(request.job_id()));
  if (request.chunk_bytes() < 0) return absl::InvalidArgumentError("chunk_bytes must not be negative");
  const int64_t largest = std::max<int64_t>(1024, int64_t{max_send_message_bytes_} - 4096);
  const int64_t chunk_bytes =
      std::clamp<int64_t>(request.chunk_bytes() > 0 ? request.chunk_bytes() : service_options_.download_chunk_bytes,
                          1, largest);
  if (request.artifact() == v1::REGISTRATION_ARTIFACT_UNSPECIFIED || !v1::RegistrationArtifact_IsValid(request.artifact())) {
    return absl::InvalidArgumentError(absl::StrCat("artifact ", static_cast<int>(request.artifact()),
                                                   " is not one of WARPED, WARPED_LABELS, WARP, INVERSE_WARP, AFFINE"));
  }
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const RegistrationPayload> payload, SucceededPayload(job->Snapshot()));
  const registration::RegistrationSummary& summary = payload->summary;
  const Geometry& geometry = payload->fixed_geometry;
  const auto send_array = [&](const NDArray& array, const char* description) {
    return SendChunkedArray(context, writer, VolumeHeaderOf(array, &geometry, description), array.raw_data(),
                            static_cast<int64_t>(array.nbytes()), chunk_bytes);
  };
  const auto missing = [&](const char* why) {
    return absl::NotFoundError(absl::StrCat("job '", job->id(), "' has no ",
                                            v1::RegistrationArtifact_Name(request.artifact()), ": ", why));
  };
  switch (request.artifact()) {
    case v1::REGISTRATION_ARTIFACT_WARPED:
      return send_array(summary.result.warped.data, "tessera warped moving image");
    case v1::REGISTRATION_ARTIFACT_WARPED_LABELS:
      if (summary.warped_labels.empty()) return missing("the request had no moving labels");
      return send_array(summary.warped_labels, "tessera warped labels");
    case v1::REGISTRATION_ARTIFACT_WARP:
      if (summary.result.displacement_ras.empty()) return missing("the registration had no deformable stage");
      return send_array(summary.result.displacement_ras, "tessera displacement (RAS mm, planar x, y, z)");
    case v1::REGISTRATION_ARTIFACT_INVERSE_WARP:
      if (payload->inverse_warp.empty()) {
        return missing(summary.result.displacement_ras.empty() ? "the registration had no deformable stage"
                                                               : "the request did not ask for options.inverse_warp");
      }
      return send_array(payload->inverse_warp, "tessera inverse displacement (RAS mm, planar x, y, z)");
    case v1::REGISTRATION_ARTIFACT_AFFINE: {
      v1::VolumeHeader header;
      header.add_dims(static_cast<int64_t>(payload->affine_mat.size()));
      header.set_dtype(v1::DTYPE_UINT8);
      header.set_description("0GenericAffine.mat (ITK MATLAB v4, fixed -> moving, LPS)");
      return SendChunkedArray(context, writer, header, payload->affine_mat.data(),
                              static_cast<int64_t>(payload->affine_mat.size()),
                              std::max<int64_t>(1, static_cast<int64_t>(payload->affine_mat.size())));
    }
    default:
      return absl::InvalidArgumentError("unknown artifact");
  }
}

}  // namespace tessera

// Demo step of the registration service: a real brain (Colin27) against a
// copy deformed by a known synthetic transform, registered back through the
// gRPC API (Register by server-side paths, WatchJob, GetResult,
// DownloadResult), with Dice over the AAL labels before and after and a
// preview PNG (fixed | moving | warped).
#include <grpcpp/client_context.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/demo_context.h"
#include "common/device.h"
#include "common/json.h"
#include "common/grpc_status.h"
#include "common/image_preview.h"
#include "common/nifti_io.h"
#include "common/png_io.h"
#include "common/status.h"
#include "services/common/chunked_upload.h"
#include "kernels/registration/pipeline/synthetic.h"
#include "tessera/v1/registration.grpc.pb.h"

namespace tessera::cli {
namespace {

constexpr char kLabels[] = "/usr/share/mricron/templates/aal.nii.gz";

std::string Absolute(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? std::string(buf) : path;
}

absl::StatusOr<NDArray> Download(v1::RegistrationService::Stub& stub, const std::string& job_id,
                                 v1::RegistrationArtifact artifact) {
  grpc::ClientContext context;
  context.set_deadline(DemoContext::RpcDeadline());
  v1::DownloadRequest request;
  request.set_job_id(job_id);
  request.set_artifact(artifact);
  auto reader = stub.DownloadResult(&context, request);
  ChunkAssembler assembler(int64_t{8} << 30);
  v1::ArrayChunk chunk;
  absl::Status added = absl::OkStatus();
  while (reader->Read(&chunk)) {
    if (added.ok()) added = assembler.Add(chunk);
  }
  TESSERA_RETURN_IF_ERROR(Annotate(FromGrpcStatus(reader->Finish()), "DownloadResult"));
  TESSERA_RETURN_IF_ERROR(added);
  return assembler.Finish();
}

}  // namespace

absl::Status DemoRegistrationStep(DemoContext& ctx) {
  // Full 1 mm resolution on a GPU; 2 mm on the CPU so the demo stays quick.
  const bool gpu = ctx.device != "cpu" && DeviceRegistry::Get().cuda_available();
  const int factor = gpu ? 1 : 2;
  TESSERA_ASSIGN_OR_RETURN(Volume brain, ReadNifti(ctx.volume_path));
  TESSERA_ASSIGN_OR_RETURN(Volume labels, ReadNifti(kLabels));
  if (labels.data.shape() != brain.data.shape()) {
    return absl::FailedPreconditionError(absl::StrCat(kLabels, " is not on the grid of ", ctx.volume_path));
  }
  Volume fixed = brain, fixed_labels = labels;
  if (factor > 1) {
    TESSERA_ASSIGN_OR_RETURN(fixed, registration::DownsampleImage(brain, factor));
    TESSERA_ASSIGN_OR_RETURN(fixed_labels, registration::DownsampleLabels(labels, factor));
  }
  registration::SyntheticOptions synth;
  synth.seed = 7;
  TESSERA_ASSIGN_OR_RETURN(registration::SyntheticPair pair, registration::MakeSyntheticPair(fixed, &fixed_labels, synth));
  const std::string dir = ctx.OutPath("registration");
  TESSERA_RETURN_IF_ERROR(ctx.EnsureDir(dir));
  const std::string fixed_path = dir + "/fixed.nii.gz", fixed_labels_path = dir + "/fixed_labels.nii.gz";
  const std::string moving_path = dir + "/moving.nii.gz", moving_labels_path = dir + "/moving_labels.nii.gz";
  TESSERA_RETURN_IF_ERROR(WriteNifti(fixed, fixed_path));
  TESSERA_RETURN_IF_ERROR(WriteNifti(fixed_labels, fixed_labels_path));
  TESSERA_RETURN_IF_ERROR(WriteNifti(pair.moving, moving_path));
  TESSERA_RETURN_IF_ERROR(WriteNifti(*pair.moving_labels, moving_labels_path));
  std::printf("[registration] Colin27 %s at %d mm vs a copy warped by a known transform (4 deg, 4 mm, 4 mm field)\n",
              ShapeToString(fixed.data.shape()).c_str(), factor);

  auto stub = v1::RegistrationService::NewStub(ctx.channel);
  v1::RegisterRequest request;
  request.mutable_fixed()->set_path(Absolute(fixed_path));
  request.mutable_moving()->set_path(Absolute(moving_path));
  request.mutable_fixed_labels()->set_path(Absolute(fixed_labels_path));
  request.mutable_moving_labels()->set_path(Absolute(moving_labels_path));
  request.mutable_options()->set_metric("lncc");
  request.mutable_options()->set_device(ctx.device);
  request.set_output_dir(Absolute(dir));
  v1::JobStatus job;
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    TESSERA_RETURN_IF_ERROR(Annotate(FromGrpcStatus(stub->Register(&context, request, &job)), "Register"));
  }
  std::printf("  job %s submitted; watching progress\n", job.job_id().c_str());
  {
    grpc::ClientContext context;
    context.set_deadline(DemoContext::RpcDeadline());
    v1::JobRef watch;
    watch.set_job_id(job.job_id());
    auto reader = stub->WatchJob(&context, watch);
    v1::Progress progress;
    std::string last_stage;
    while (reader->Read(&progress)) {
      const std::string stage = absl::StrCat(progress.stage(), " x", static_cast<int>(progress.metrics().count("scale") ? progress.metrics().at("scale") : 0));
      if (stage != last_stage && !progress.stage().empty() && progress.stage() != "input" &&
          progress.stage() != "output") {
        std::printf("  %-16s loss %.4f  (%3.0f%%)\n", stage.c_str(),
                    progress.metrics().count("loss") ? progress.metrics().at("loss") : 0.0, 100 * progress.fraction());
        last_stage = stage;
      }
    }
    TESSERA_RETURN_IF_ERROR(Annotate(FromGrpcStatus(reader->Finish()), "WatchJob"));
  }
  v1::RegistrationResult result;
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::JobRef get;
    get.set_job_id(job.job_id());
    TESSERA_RETURN_IF_ERROR(Annotate(FromGrpcStatus(stub->GetResult(&context, get, &result)), "GetResult"));
  }
  std::printf("  mean Dice over %s labels: %.3f -> %.3f   folded voxels %.4f%%   %.2f s on %s, peak device %.2f GB\n",
              "AAL", result.dice_before(), result.dice_after(), result.folded_percent(), result.seconds(),
              result.backend().c_str(), result.peak_device_bytes() / 1e9);
  std::printf("  files: %s, %s, %s, %s\n", result.files().warped().c_str(), result.files().affine().c_str(),
              result.files().warp().c_str(), result.files().warped_labels().c_str());
  if (!(result.dice_after() > result.dice_before())) {
    return absl::InternalError("registration did not improve label overlap");
  }

  // The warped image comes back over the API too; preview fixed | moving | warped.
  TESSERA_ASSIGN_OR_RETURN(NDArray warped, Download(*stub, job.job_id(), v1::REGISTRATION_ARTIFACT_WARPED));
  std::vector<Image8> views;
  for (const NDArray* image : {&fixed.data, &pair.moving.data, &warped}) {
    TESSERA_ASSIGN_OR_RETURN(NDArray f32, image->AsType(DType::kFloat32));
    SliceOptions options;
    options.axis = 1;  // coronal
    TESSERA_ASSIGN_OR_RETURN(Image8 view, RenderSlice(Volume{f32, fixed.geometry, ""}, options));
    views.push_back(std::move(view));
  }
  TESSERA_ASSIGN_OR_RETURN(Image8 tiled, TileHorizontally(views));
  const std::string png = ctx.OutPath("registration_preview.png");
  TESSERA_RETURN_IF_ERROR(WritePng(tiled, png));
  std::printf("  preview        %s (fixed | moving | warped, coronal)\n", png.c_str());
  ctx.summary.emplace_back("registration", result.summary_json().empty() ? "null" : result.summary_json());
  ctx.summary.emplace_back("registration_preview_png", JsonQuote(png));
  return absl::OkStatus();
}

}  // namespace tessera::cli

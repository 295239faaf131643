// Demo step of the reconstruction service. CT: the exact fan-beam sinogram of
// a 256^2 Shepp-Logan phantom (360 views) (line integrals of its ellipses, no projector
// of ours) and its ASTRA geometry are uploaded over gRPC and reconstructed as
// scheduler jobs with FBP and OS-SART (per-iteration progress), downloaded,
// scored against the phantom (RMSE, SSIM) and written to recon_ct.png
// (phantom | FBP | OS-SART). PET: Poisson counts of a torso phantom with
// attenuation, reconstructed with OSEM and the mu-map, written to
// recon_pet.png (activity | OSEM). MRI: exact 8-coil radial k-space of a head
// phantom (BART .cfl files), NUFFT adjoint and CG-SENSE, recon_mri.png (truth |
// adjoint | CG-SENSE). Ultrasound: point targets seen by a 128-element array
// (PICMUS HDF5, uploaded), DAS and minimum variance, recon_us.png (DAS | MV)
// with the lateral -6 dB widths.
#include <grpcpp/client_context.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/demo_context.h"
#include "common/grpc_status.h"
#include "common/image_preview.h"
#include "common/json.h"
#include "common/png_io.h"
#include "common/status.h"
#include "services/reconstruction/formats/example_geometry.h"
#include "services/reconstruction/formats/geometry_json.h"
#include "services/reconstruction/formats/recon_nifti.h"
#include "services/reconstruction/image_quality.h"
#include "services/reconstruction/formats/ultrasound_h5.h"
#include "services/reconstruction/phantoms/analytic_sinogram.h"
#include "services/reconstruction/phantoms/mri_phantom.h"
#include "services/reconstruction/phantoms/pet_phantom.h"
#include "services/reconstruction/phantoms/phantom.h"
#include "services/reconstruction/phantoms/rasterize.h"
#include "services/reconstruction/phantoms/ultrasound_phantom.h"
#include "tessera/v1/reconstruction.grpc.pb.h"

namespace tessera::cli {
namespace {

using Stub = v1::ReconstructionService::Stub;

absl::StatusOr<std::string> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

absl::StatusOr<v1::UploadedFile> UploadFile(Stub& stub, const std::string& path, const std::string& filename) {
  TESSERA_ASSIGN_OR_RETURN(std::string bytes, ReadBytes(path));
  grpc::ClientContext ctx;
  ctx.set_deadline(DemoContext::RpcDeadline());
  v1::UploadedFile out;
  auto writer = stub.UploadFile(&ctx, &out);
  constexpr size_t kChunk = 1 << 20;
  for (size_t offset = 0; offset < bytes.size(); offset += kChunk) {
    v1::FileChunk chunk;
    if (offset == 0) {
      chunk.set_filename(filename);
      chunk.set_total_bytes(static_cast<int64_t>(bytes.size()));
    }
    chunk.set_offset(static_cast<int64_t>(offset));
    chunk.set_data(bytes.substr(offset, kChunk));
    if (!writer->Write(chunk)) break;
  }
  writer->WritesDone();
  TESSERA_RETURN_IF_ERROR(FromGrpcStatus(writer->Finish()));
  return out;
}

// Submits, watches (printing each iteration) and downloads the volume.
absl::StatusOr<NDArray> Reconstruct(Stub& stub, const v1::ReconstructRequest& request,
                                    v1::ReconstructionResult* result) {
  v1::JobStatus status;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(DemoContext::RpcDeadline());
    TESSERA_RETURN_IF_ERROR(FromGrpcStatus(stub.Reconstruct(&ctx, request, &status)));
  }
  v1::JobRef job;
  job.set_job_id(status.job_id());
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(DemoContext::RpcDeadline());
    auto reader = stub.WatchJob(&ctx, job);
    v1::Progress p;
    int64_t last_step = -1;
    while (reader->Read(&p)) {
      if (p.stage() == "reconstruct" && p.step() != last_step && !p.message().empty()) {
        last_step = p.step();
        if (p.step() == 1 || p.step() == p.total_steps() || p.step() % 5 == 0) {
          std::printf("    %s\n", p.message().c_str());
        }
      }
    }
    TESSERA_RETURN_IF_ERROR(FromGrpcStatus(reader->Finish()));
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(DemoContext::RpcDeadline());
    TESSERA_RETURN_IF_ERROR(FromGrpcStatus(stub.GetResult(&ctx, job, result)));
  }
  if (result->dims_size() != 3) return absl::InternalError("the result does not give the image's dimensions");
  TESSERA_ASSIGN_OR_RETURN(NDArray volume,
                           NDArray::Allocate({result->dims(0), result->dims(1), result->dims(2)}, DType::kFloat32));
  grpc::ClientContext ctx;
  ctx.set_deadline(DemoContext::RpcDeadline());
  v1::ReconDownloadRequest download;
  download.set_job_id(status.job_id());
  auto reader = stub.DownloadResult(&ctx, download);
  v1::ArrayChunk chunk;
  std::string bytes;
  while (reader->Read(&chunk)) bytes += chunk.data();
  TESSERA_RETURN_IF_ERROR(FromGrpcStatus(reader->Finish()));
  if (bytes.size() != volume.nbytes()) {
    return absl::DataLossError(absl::StrCat("downloaded ", bytes.size(), " bytes, expected ", volume.nbytes()));
  }
  std::memcpy(volume.raw_data(), bytes.data(), bytes.size());
  return volume;
}

absl::StatusOr<Image8> Render(const NDArray& image, Window window) {
  SliceOptions options;
  options.window = window;
  return RenderSlice(image, options);
}

absl::Status CtPart(DemoContext& ctx, Stub& stub, const std::string& dir) {
  TESSERA_ASSIGN_OR_RETURN(std::string json, recon::formats::ExampleGeometryJson("fanflat", 256, 360));
  TESSERA_ASSIGN_OR_RETURN(recon::CtGeometry g, recon::formats::ParseGeometryJson(json));
  const recon::phantoms::Phantom phantom = recon::phantoms::SheppLogan2D(0.9 * 256);
  TESSERA_ASSIGN_OR_RETURN(NDArray sinogram, recon::phantoms::AnalyticSinogram(phantom, g, 2));
  TESSERA_ASSIGN_OR_RETURN(NDArray truth, recon::phantoms::Rasterize(phantom, g.volume, 4));
  TESSERA_RETURN_IF_ERROR(recon::formats::WriteGeometryJsonFile(g, dir + "/ct_geometry.json"));
  TESSERA_RETURN_IF_ERROR(recon::formats::WriteSinogram(sinogram, g.projection, dir + "/ct_sinogram.nii.gz"));
  std::printf("  CT: %s; exact sinogram of a Shepp-Logan phantom\n", recon::Describe(g).c_str());
  TESSERA_ASSIGN_OR_RETURN(v1::UploadedFile geometry_up, UploadFile(stub, dir + "/ct_geometry.json", "g.json"));
  TESSERA_ASSIGN_OR_RETURN(v1::UploadedFile sinogram_up, UploadFile(stub, dir + "/ct_sinogram.nii.gz", "s.nii.gz"));
  std::printf("  uploaded geometry (%lld bytes) and sinogram (%lld bytes, sha256 %.16s...)\n",
              static_cast<long long>(geometry_up.nbytes()), static_cast<long long>(sinogram_up.nbytes()),
              sinogram_up.sha256().c_str());
  std::vector<Image8> panels;
  const Window window{0.0, 0.45};  // brain contrast (0.2-0.3); the skull saturates
  TESSERA_ASSIGN_OR_RETURN(Image8 truth_image, Render(truth, window));
  panels.push_back(truth_image);
  std::string scores;
  for (const auto& [method, iterations, subsets] :
       std::vector<std::tuple<std::string, int, int>>{{"fbp", 0, 0}, {"os-sart", 4, 12}}) {
    v1::ReconstructRequest request;
    request.mutable_geometry()->set_upload_id(geometry_up.upload_id());
    request.mutable_sinogram()->set_upload_id(sinogram_up.upload_id());
    request.mutable_ct()->set_method(method);
    request.mutable_ct()->set_iterations(iterations);
    request.mutable_ct()->set_subsets(subsets);
    request.mutable_ct()->set_non_negative(method == "os-sart");
    request.set_device(ctx.device);
    v1::ReconstructionResult result;
    TESSERA_ASSIGN_OR_RETURN(NDArray volume, Reconstruct(stub, request, &result));
    const double rmse = reconstruction::Rmse(volume.data<float>(), truth.data<float>(), g.volume.size());
    const double ssim =
        reconstruction::Ssim(volume.data<float>(), truth.data<float>(), g.volume.nx, g.volume.ny, 1, 1.0);
    std::printf("  %-8s %.3f s on %s: RMSE %.4f, SSIM %.3f against the phantom\n", method.c_str(),
                result.seconds(), result.backend().c_str(), rmse, ssim);
    absl::StrAppend(&scores, scores.empty() ? "" : ", ", JsonQuote(method),
                    absl::StrFormat(": {\"rmse\": %.5f, \"ssim\": %.4f, \"seconds\": %.4f}", rmse, ssim,
                                    result.seconds()));
    TESSERA_ASSIGN_OR_RETURN(Image8 image, Render(volume, window));
    panels.push_back(image);
  }
  TESSERA_ASSIGN_OR_RETURN(Image8 tiled, TileHorizontally(panels, 6));
  TESSERA_RETURN_IF_ERROR(WritePng(tiled, ctx.OutPath("recon_ct.png")));
  std::printf("  wrote recon_ct.png (phantom | FBP | OS-SART)\n");
  ctx.summary.emplace_back("reconstruction_ct", absl::StrCat("{", scores, "}"));
  return absl::OkStatus();
}

// Scales `image` in place by the real s minimising ||s image - truth|| (1 for
// an all-zero image): reconstructions whose overall scale is arbitrary (OSEM's
// counts, MRI's coil normalisation) are compared and shown on the truth's.
void ScaleToTruth(NDArray& image, const float* truth) {
  float* a = image.data<float>();
  double at = 0, aa = 0;
  for (int64_t i = 0; i < image.num_elements(); ++i) at += double{a[i]} * truth[i], aa += double{a[i]} * a[i];
  const double s = aa > 0 ? at / aa : 1.0;
  for (int64_t i = 0; i < image.num_elements(); ++i) a[i] = static_cast<float>(s * a[i]);
}

absl::Status PetPart(DemoContext& ctx, Stub& stub, const std::string& dir) {
  TESSERA_ASSIGN_OR_RETURN(std::string json, recon::formats::ExampleGeometryJson("fanflat", 128));
  TESSERA_ASSIGN_OR_RETURN(recon::CtGeometry g, recon::formats::ParseGeometryJson(json));
  const recon::phantoms::PetPhantom phantom = recon::phantoms::MakePetPhantom(0.9 * 128, true);
  recon::phantoms::PetSimulationOptions sim;
  sim.total_counts = 5e6;
  TESSERA_ASSIGN_OR_RETURN(recon::phantoms::PetSinogram counts, recon::phantoms::SimulatePetSinogram(phantom, g, sim));
  TESSERA_ASSIGN_OR_RETURN(NDArray mu, recon::phantoms::Rasterize(phantom.attenuation, g.volume, 4));
  TESSERA_ASSIGN_OR_RETURN(NDArray activity, recon::phantoms::Rasterize(phantom.activity, g.volume, 4));
  TESSERA_RETURN_IF_ERROR(recon::formats::WriteGeometryJsonFile(g, dir + "/pet_geometry.json"));
  TESSERA_RETURN_IF_ERROR(recon::formats::WriteSinogram(counts.counts, g.projection, dir + "/pet_counts.nii.gz"));
  TESSERA_RETURN_IF_ERROR(recon::formats::WriteVolume(mu, g.volume, dir + "/pet_mu.nii.gz", "attenuation (1/mm)"));
  std::printf("  PET: %s; 5e6 Poisson counts of a torso phantom with attenuation\n", recon::Describe(g).c_str());
  // Files under the server's data roots (demo-out) are named by path.
  const std::string root = std::filesystem::absolute(dir).string();
  v1::ReconstructRequest request;
  request.mutable_geometry()->set_path(root + "/pet_geometry.json");
  request.mutable_sinogram()->set_path(root + "/pet_counts.nii.gz");
  request.mutable_pet()->set_method("osem");
  request.mutable_pet()->set_subsets(8);
  request.mutable_pet()->set_iterations(4);
  request.mutable_pet()->mutable_attenuation()->set_path(root + "/pet_mu.nii.gz");
  request.set_device(ctx.device);
  v1::ReconstructionResult result;
  TESSERA_ASSIGN_OR_RETURN(NDArray volume, Reconstruct(stub, request, &result));
  // OSEM estimates activity up to the scale of the counts: compare shapes.
  ScaleToTruth(volume, activity.data<float>());
  const double rmse = reconstruction::Rmse(volume.data<float>(), activity.data<float>(), g.volume.size());
  std::printf("  osem     %.3f s on %s (%d iterations x 8 subsets): RMSE %.3f against the activity (max 8)\n",
              result.seconds(), result.backend().c_str(), result.iterations(), rmse);
  const Window window{0.0, 4.0};
  TESSERA_ASSIGN_OR_RETURN(Image8 truth_image, Render(activity, window));
  TESSERA_ASSIGN_OR_RETURN(Image8 image, Render(volume, window));
  TESSERA_ASSIGN_OR_RETURN(Image8 tiled, TileHorizontally({truth_image, image}, 6));
  TESSERA_RETURN_IF_ERROR(WritePng(tiled, ctx.OutPath("recon_pet.png")));
  std::printf("  wrote recon_pet.png (activity | OSEM)\n");
  ctx.summary.emplace_back("reconstruction_pet", absl::StrFormat("{\"rmse\": %.5f, \"seconds\": %.4f}", rmse,
                                                                 result.seconds()));
  return absl::OkStatus();
}

absl::Status MriPart(DemoContext& ctx, Stub& stub, const std::string& dir) {
  recon::phantoms::MriPhantomOptions o;
  o.size = 128;
  o.spokes = 64;  // radial, undersampled by ~3
  o.coils = 8;
  TESSERA_ASSIGN_OR_RETURN(recon::phantoms::MriPhantom phantom, recon::phantoms::MakeMriPhantom(o));
  const std::string root = std::filesystem::absolute(dir).string() + "/mri";
  TESSERA_RETURN_IF_ERROR(recon::phantoms::WriteMriPhantom(phantom, root));
  std::printf("  MRI: exact k-space of a head phantom, 128^2, 64 golden-angle spokes, 8 birdcage coils (BART .cfl)\n");
  std::vector<float> truth(phantom.truth.data.size());
  for (size_t i = 0; i < truth.size(); ++i) truth[i] = phantom.truth.data[i].real();
  NDArray truth_array = NDArray::Allocate({o.size, o.size, 1}, DType::kFloat32).value();
  std::copy(truth.begin(), truth.end(), truth_array.data<float>());
  double truth_sq = 0;
  for (float t : truth) truth_sq += double{t} * t;
  const double truth_rms = std::sqrt(truth_sq / truth.size());  // NRMSE = RMSE / this
  const Window window{0.0, 0.45};
  TESSERA_ASSIGN_OR_RETURN(Image8 truth_image, Render(truth_array, window));
  std::vector<Image8> panels = {truth_image};
  std::string scores;
  for (const char* method : {"adjoint", "cgsense"}) {
    v1::ReconstructRequest request;
    v1::MriOptions* mri = request.mutable_mri();
    mri->set_method(method);
    mri->mutable_kspace()->set_path(root + "/kspace");
    mri->mutable_trajectory()->set_path(root + "/traj");
    mri->mutable_coils()->set_path(root + "/coils");
    mri->set_iterations(10);
    request.set_device(ctx.device);
    v1::ReconstructionResult result;
    TESSERA_ASSIGN_OR_RETURN(NDArray image, Reconstruct(stub, request, &result));
    ScaleToTruth(image, truth.data());  // compared and shown on the phantom's scale
    const double nrmse = reconstruction::Rmse(image.data<float>(), truth.data(), image.num_elements()) / truth_rms;
    std::printf("  %-8s %.3f s on %s: NRMSE %.3f against the phantom\n", method, result.seconds(),
                result.backend().c_str(), nrmse);
    absl::StrAppend(&scores, scores.empty() ? "" : ", ", JsonQuote(method),
                    absl::StrFormat(": {\"nrmse\": %.5f, \"seconds\": %.4f}", nrmse, result.seconds()));
    TESSERA_ASSIGN_OR_RETURN(Image8 panel, Render(image, window));
    panels.push_back(panel);
  }
  TESSERA_ASSIGN_OR_RETURN(Image8 tiled, TileHorizontally(panels, 6));
  TESSERA_RETURN_IF_ERROR(WritePng(tiled, ctx.OutPath("recon_mri.png")));
  std::printf("  wrote recon_mri.png (phantom | adjoint | CG-SENSE)\n");
  ctx.summary.emplace_back("reconstruction_mri", absl::StrCat("{", scores, "}"));
  return absl::OkStatus();
}

// Pixels within 6 dB of the brightest one on its row, near (x0, z0) mm.
double LateralWidthMm(const NDArray& db, double x_min, double dx, double z_min, double dz, double x0, double z0) {
  const int64_t nx = db.dim(0), nz = db.dim(1);
  const float* v = db.data<float>();
  int64_t best = -1;
  for (int64_t iz = 0; iz < nz; ++iz) {
    for (int64_t ix = 0; ix < nx; ++ix) {
      if (std::abs(x_min + ix * dx - x0) > 2 || std::abs(z_min + iz * dz - z0) > 2) continue;
      if (best < 0 || v[ix + nx * iz] > v[best]) best = ix + nx * iz;
    }
  }
  if (best < 0) return 0;
  const int64_t row = best / nx;
  int64_t lo = best % nx, hi = best % nx;
  while (lo > 0 && v[lo - 1 + nx * row] >= v[best] - 6) --lo;
  while (hi + 1 < nx && v[hi + 1 + nx * row] >= v[best] - 6) ++hi;
  return (hi - lo + 1) * dx;
}

absl::Status UltrasoundPart(DemoContext& ctx, Stub& stub, const std::string& dir) {
  recon::phantoms::UltrasoundPhantomOptions o;
  TESSERA_ASSIGN_OR_RETURN(recon::phantoms::UltrasoundPhantom phantom, recon::phantoms::MakeUltrasoundPhantom(o));
  const std::string path = dir + "/us_points.h5";
  TESSERA_RETURN_IF_ERROR(recon::formats::WriteUltrasoundH5(phantom.acquisition, path));
  TESSERA_ASSIGN_OR_RETURN(v1::UploadedFile upload, UploadFile(stub, path, "us_points.h5"));
  std::printf("  ultrasound: 5 point targets, 128-element array, 11 plane waves (PICMUS HDF5, %lld bytes uploaded)\n",
              static_cast<long long>(upload.nbytes()));
  constexpr double kXmin = -12, kXmax = 12, kZmin = 8, kZmax = 36;
  constexpr int kNx = 256, kNz = 256;
  std::vector<Image8> panels;
  std::string scores;
  for (const char* method : {"das", "mv"}) {
    v1::ReconstructRequest request;
    v1::UltrasoundOptions* us = request.mutable_ultrasound();
    us->set_method(method);
    us->mutable_channel_data()->set_upload_id(upload.upload_id());
    us->set_subarray(32);
    for (double x : {kXmin, kXmax}) us->add_x_mm(x);
    for (double z : {kZmin, kZmax}) us->add_z_mm(z);
    for (int p : {kNx, kNz}) us->add_pixels(p);
    request.set_device(ctx.device);
    v1::ReconstructionResult result;
    TESSERA_ASSIGN_OR_RETURN(NDArray image, Reconstruct(stub, request, &result));
    const double width = LateralWidthMm(image, kXmin, (kXmax - kXmin) / (kNx - 1), kZmin, (kZmax - kZmin) / (kNz - 1),
                                        0.0, 22.0);
    std::printf("  %-8s %.3f s on %s: lateral -6 dB width %.2f mm at the 22 mm target\n", method, result.seconds(),
                result.backend().c_str(), width);
    absl::StrAppend(&scores, scores.empty() ? "" : ", ", JsonQuote(method),
                    absl::StrFormat(": {\"lateral_width_mm\": %.4f, \"seconds\": %.4f}", width, result.seconds()));
    // RenderSlice puts row 0 at the bottom (anatomical "up"); B-modes show
    // the shallowest row at the top.
    NDArray flipped = NDArray::Allocate(image.shape(), DType::kFloat32).value();
    for (int64_t iz = 0; iz < kNz; ++iz) {
      std::copy_n(image.data<float>() + iz * kNx, kNx, flipped.data<float>() + (kNz - 1 - iz) * kNx);
    }
    SliceOptions slice;
    slice.window = Window{-60.0, 0.0};
    TESSERA_ASSIGN_OR_RETURN(Image8 panel, RenderSlice(flipped, slice));
    panels.push_back(panel);
  }
  TESSERA_ASSIGN_OR_RETURN(Image8 tiled, TileHorizontally(panels, 6));
  TESSERA_RETURN_IF_ERROR(WritePng(tiled, ctx.OutPath("recon_us.png")));
  std::printf("  wrote recon_us.png (DAS | minimum variance, 60 dB)\n");
  ctx.summary.emplace_back("reconstruction_ultrasound", absl::StrCat("{", scores, "}"));
  return absl::OkStatus();
}

}  // namespace

absl::Status DemoReconstructionStep(DemoContext& ctx) {
  std::printf("reconstruction:\n");
  const std::string dir = ctx.OutPath("reconstruction");
  TESSERA_RETURN_IF_ERROR(DemoContext::EnsureDir(dir));
  auto stub = v1::ReconstructionService::NewStub(ctx.channel);
  TESSERA_RETURN_IF_ERROR(CtPart(ctx, *stub, dir));
  TESSERA_RETURN_IF_ERROR(PetPart(ctx, *stub, dir));
  TESSERA_RETURN_IF_ERROR(MriPart(ctx, *stub, dir));
  return UltrasoundPart(ctx, *stub, dir);
}

}  // namespace tessera::cli

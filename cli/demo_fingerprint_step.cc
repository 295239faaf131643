// Demo step of the fingerprint service: FVC2002 DB1 set B impressions 2-8 of
// each finger are bulk-enrolled over gRPC (EnrollStream, into the durable
// gallery under demo-out/fingerprint-gallery; replace, so reruns are
// idempotent), then impression 1 of each finger, cropped to the ~20 minutiae
// nearest its centre (a latent-like partial print), is searched in one
// SearchBatch. Prints the candidates and whether a mate is at rank 1, then
// the rank-1 count of the same batch with the DMC matcher. Then the same
// fingers as images (demo_fingerprint_images.cc).
#include <grpcpp/client_context.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/demo_context.h"
#include "common/grpc_status.h"
#include "common/json.h"
#include "common/status.h"
#include "services/fingerprint/formats/fvc_data.h"
#include "services/fingerprint/formats/template_io.h"
#include "tessera/v1/fingerprint.grpc.pb.h"

namespace tessera::cli {
namespace {

constexpr int kCropMinutiae = 20;

// The kCropMinutiae minutiae nearest the minutia closest to the centroid.
fingerprint::Template Crop(const fingerprint::Template& full) {
  fingerprint::Template out = full;
  if (full.minutiae.size() <= kCropMinutiae) return out;
  double cx = 0, cy = 0;
  for (const auto& m : full.minutiae) {
    cx += m.x;
    cy += m.y;
  }
  cx /= full.minutiae.size();
  cy /= full.minutiae.size();
  auto d2 = [](double x, double y, const fingerprint::Minutia& m) { return (m.x - x) * (m.x - x) + (m.y - y) * (m.y - y); };
  const fingerprint::Minutia centre = *std::min_element(
      full.minutiae.begin(), full.minutiae.end(),
      [&](const fingerprint::Minutia& a, const fingerprint::Minutia& b) { return d2(cx, cy, a) < d2(cx, cy, b); });
  std::vector<fingerprint::Minutia> sorted = full.minutiae;
  std::stable_sort(sorted.begin(), sorted.end(), [&](const fingerprint::Minutia& a, const fingerprint::Minutia& b) {
    return d2(centre.x, centre.y, a) < d2(centre.x, centre.y, b);
  });
  sorted.resize(kCropMinutiae);
  out.minutiae = sorted;
  out.extended_data.clear();
  return out;
}

}  // namespace

// demo_fingerprint_images.cc: the same fingers as images.
absl::Status DemoFingerprintImages(DemoContext& ctx, v1::FingerprintService::Stub& stub,
                                   const std::vector<fingerprint::FvcImpression>& db);

absl::Status DemoFingerprintStep(DemoContext& ctx) {
  absl::StatusOr<std::string> data_dir = fingerprint::FindFingerprintDataDir();
  if (!data_dir.ok()) {
    std::printf("fingerprint: skipped (%s)\n", std::string(data_dir.status().message()).c_str());
    ctx.summary.emplace_back("fingerprint", "{\"skipped\": true}");
    return absl::OkStatus();
  }
  TESSERA_ASSIGN_OR_RETURN(std::vector<fingerprint::FvcImpression> db, fingerprint::LoadFvc2002(*data_dir, 1));
  auto stub = v1::FingerprintService::NewStub(ctx.channel);

  // Bulk enroll impressions 2-8.
  v1::EnrollStreamResponse enrolled;
  {
    grpc::ClientContext context;
    context.set_deadline(DemoContext::RpcDeadline());
    auto writer = stub->EnrollStream(&context, &enrolled);
    for (const fingerprint::FvcImpression& imp : db) {
      if (imp.impression == 1) continue;
      TESSERA_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, fingerprint::ReadFileBytes(imp.path));
      v1::EnrollRequest request;
      request.set_id(absl::StrCat(imp.finger, "_", imp.impression));
      request.mutable_record()->set_data(std::string(bytes.begin(), bytes.end()));
      request.set_replace(true);
      if (!writer->Write(request)) break;
    }
    writer->WritesDone();
    TESSERA_RETURN_IF_ERROR(Annotate(FromGrpcStatus(writer->Finish()), "EnrollStream"));
  }
  std::printf("fingerprint: enrolled %lld FVC2002 DB1 impressions (2-8 of 10 fingers) by EnrollStream in %.0f ms; "
              "gallery holds %lld\n",
              static_cast<long long>(enrolled.enrolled()), enrolled.seconds() * 1e3,
              static_cast<long long>(enrolled.gallery_size()));
  if (enrolled.failed() > 0) {
    return absl::InternalError(absl::StrCat("EnrollStream rejected ", enrolled.failed(), " DB1 templates: ",
                                            enrolled.errors(0).message()));
  }

  // Partial probes: impression 1 of each finger, cropped.
  v1::SearchBatchRequest request;
  request.set_top_k(5);
  std::vector<const fingerprint::FvcImpression*> probes;
  std::vector<size_t> full_sizes;
  for (const fingerprint::FvcImpression& imp : db) {
    if (imp.impression != 1) continue;
    TESSERA_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes,
                             fingerprint::WriteTemplateRecord(fingerprint::TemplateFormat::kIso19794, {Crop(imp.view)}));
    request.add_probes()->set_data(std::string(bytes.begin(), bytes.end()));
    probes.push_back(&imp);
    full_sizes.push_back(imp.view.minutiae.size());
  }
  v1::SearchBatchResponse response;
  {
    grpc::ClientContext context;
    context.set_deadline(DemoContext::RpcDeadline());
    TESSERA_RETURN_IF_ERROR(Annotate(FromGrpcStatus(stub->SearchBatch(&context, request, &response)), "SearchBatch"));
  }
  int rank1 = 0;
  for (size_t p = 0; p < probes.size(); ++p) {
    const auto& candidates = response.results(p).candidates();
    const std::string finger = absl::StrCat(probes[p]->finger, "_");
    const bool hit = !candidates.empty() && candidates[0].id().rfind(finger, 0) == 0;
    rank1 += hit;
    std::vector<std::string> shown;
    for (const v1::Candidate& c : candidates) shown.push_back(absl::StrFormat("%s %.3f", c.id(), c.score()));
    std::printf("  probe %d_1 (%d of %zu minutiae): %s  -> mate at rank 1: %s\n", probes[p]->finger,
                std::min<int>(kCropMinutiae, full_sizes[p]), full_sizes[p], absl::StrJoin(shown, ", ").c_str(),
                hit ? "yes" : "no");
  }
  const v1::SearchTiming& t = response.timing();
  std::printf("fingerprint: %d of %zu partial probes found their finger at rank 1 (%s %s, %.1f ms for the batch)\n",
              rank1, probes.size(), t.matcher().c_str(), t.backend().c_str(), t.total_ms());
  // The same probes with deformable minutiae clustering.
  v1::SearchBatchResponse dmc;
  {
    grpc::ClientContext context;
    context.set_deadline(DemoContext::RpcDeadline());
    request.set_matcher("dmc");
    TESSERA_RETURN_IF_ERROR(Annotate(FromGrpcStatus(stub->SearchBatch(&context, request, &dmc)), "SearchBatch dmc"));
  }
  int dmc_rank1 = 0;
  for (size_t p = 0; p < probes.size(); ++p) {
    const auto& candidates = dmc.results(p).candidates();
    dmc_rank1 += !candidates.empty() && candidates[0].id().rfind(absl::StrCat(probes[p]->finger, "_"), 0) == 0;
  }
  std::printf("fingerprint: with matcher dmc %d of %zu at rank 1 (%s, %.1f ms for the batch)\n", dmc_rank1,
              probes.size(), dmc.timing().backend().c_str(), dmc.timing().total_ms());
  ctx.summary.emplace_back(
      "fingerprint",
      absl::StrFormat("{\"gallery\": %d, \"probes\": %d, \"probe_minutiae\": %d, \"rank1\": %d, \"matcher\": %s, "
                      "\"backend\": %s, \"enroll_ms\": %.1f, \"search_ms\": %.2f, \"dmc_rank1\": %d, "
                      "\"dmc_search_ms\": %.2f}",
                      enrolled.gallery_size(), probes.size(), kCropMinutiae, rank1, JsonQuote(t.matcher()),
                      JsonQuote(t.backend()), enrolled.seconds() * 1e3, t.total_ms(), dmc_rank1,
                      dmc.timing().total_ms()));
  return DemoFingerprintImages(ctx, *stub, db);
}

}  // namespace tessera::cli

// Demo step, images part: FVC2002 DB1 set B images (TIFF) go to the service
// as they are. Impressions 2-8 are bulk-enrolled (EnrollStream, ids
// "image-<finger>_<impression>": the server extracts each template), then
// impression 1 of each finger is extracted (Extract: quality, and one overlay
// PNG written for an examiner to look at) and searched as an image
// (SearchBatch). Prints each probe's quality and whether its finger is at
// rank 1.
#include <grpcpp/client_context.h>

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/demo_context.h"
#include "common/grpc_status.h"
#include "common/json.h"
#include "common/status.h"
#include "services/fingerprint/formats/fvc_data.h"
#include "services/fingerprint/formats/template_io.h"
#include "tessera/v1/fingerprint.grpc.pb.h"

namespace tessera::cli {
namespace {

// FVC2002 DB1's scanner is 500 ppi; its TIFFs do not say so.
constexpr double kDb1Ppi = 500;

std::string ImagePath(const fingerprint::FvcImpression& imp) {
  return imp.path.substr(0, imp.path.rfind('.')) + ".tif";
}

absl::StatusOr<std::string> ReadAll(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, fingerprint::ReadFileBytes(path));
  return std::string(bytes.begin(), bytes.end());
}

// The finger an id names ("image-101_2" or "101_2" -> "101").
std::string FingerOf(const std::string& id) {
  const size_t dash = id.rfind('-');
  const std::string tail = dash == std::string::npos ? id : id.substr(dash + 1);
  return tail.substr(0, tail.find('_'));
}

}  // namespace

absl::Status DemoFingerprintImages(DemoContext& ctx, v1::FingerprintService::Stub& stub,
                                   const std::vector<fingerprint::FvcImpression>& db) {
  v1::EnrollStreamResponse enrolled;
  {
    grpc::ClientContext context;
    context.set_deadline(DemoContext::RpcDeadline());
    auto writer = stub.EnrollStream(&context, &enrolled);
    for (const fingerprint::FvcImpression& imp : db) {
      if (imp.impression == 1) continue;
      TESSERA_ASSIGN_OR_RETURN(std::string bytes, ReadAll(ImagePath(imp)));
      v1::EnrollRequest request;
      request.set_id(absl::StrCat("image-", imp.finger, "_", imp.impression));
      request.mutable_record()->mutable_image()->set_data(std::move(bytes));
      request.mutable_record()->mutable_image()->set_ppi(kDb1Ppi);
      request.set_replace(true);
      if (!writer->Write(request)) break;
    }
    writer->WritesDone();
    TESSERA_RETURN_IF_ERROR(Annotate(FromGrpcStatus(writer->Finish()), "EnrollStream (images)"));
  }
  if (enrolled.failed() > 0) {
    return absl::InternalError(absl::StrCat("EnrollStream rejected ", enrolled.failed(), " DB1 images: ",
                                            enrolled.errors(0).message()));
  }
  std::printf("fingerprint: enrolled %lld FVC2002 DB1 images (TIFF, extracted by the server) in %.0f ms\n",
              static_cast<long long>(enrolled.enrolled()), enrolled.seconds() * 1e3);

  v1::SearchBatchRequest search;
  search.set_top_k(3);
  std::vector<const fingerprint::FvcImpression*> probes;
  std::vector<int> qualities;
  std::string overlay_path;
  for (const fingerprint::FvcImpression& imp : db) {
    if (imp.impression != 1) continue;
    TESSERA_ASSIGN_OR_RETURN(std::string bytes, ReadAll(ImagePath(imp)));
    v1::ExtractRequest extract;
    extract.mutable_image()->set_data(bytes);
    extract.mutable_image()->set_ppi(kDb1Ppi);
    extract.set_overlay(overlay_path.empty());
    v1::ExtractResponse extracted;
    grpc::ClientContext context;
    context.set_deadline(DemoContext::RpcDeadline());
    TESSERA_RETURN_IF_ERROR(Annotate(FromGrpcStatus(stub.Extract(&context, extract, &extracted)), "Extract"));
    if (overlay_path.empty()) {
      overlay_path = ctx.OutPath(absl::StrCat("fingerprint-overlay-", imp.finger, "_1.png"));
      std::ofstream(overlay_path, std::ios::binary) << extracted.overlay_png();
    }
    qualities.push_back(extracted.quality());
    v1::FingerprintImage* probe = search.add_probes()->mutable_image();
    probe->set_data(std::move(bytes));
    probe->set_ppi(kDb1Ppi);
    probes.push_back(&imp);
  }
  v1::SearchBatchResponse response;
  {
    grpc::ClientContext context;
    context.set_deadline(DemoContext::RpcDeadline());
    TESSERA_RETURN_IF_ERROR(Annotate(FromGrpcStatus(stub.SearchBatch(&context, search, &response)), "SearchBatch (images)"));
  }
  int rank1 = 0;
  for (size_t p = 0; p < probes.size(); ++p) {
    const auto& candidates = response.results(p).candidates();
    const bool hit = !candidates.empty() && FingerOf(candidates[0].id()) == absl::StrCat(probes[p]->finger);
    rank1 += hit;
    std::printf("  image probe %d_1: quality %d, rank 1 %s %.3f -> mate: %s\n", probes[p]->finger, qualities[p],
                candidates.empty() ? "-" : candidates[0].id().c_str(), candidates.empty() ? 0.f : candidates[0].score(),
                hit ? "yes" : "no");
  }
  std::printf("fingerprint: %d of %zu image probes found their finger at rank 1 (%.1f ms for the batch, extraction "
              "included); overlay of the first probe: %s\n",
              rank1, probes.size(), response.timing().total_ms(), overlay_path.c_str());
  ctx.summary.emplace_back("fingerprint_images",
                           absl::StrFormat("{\"enrolled\": %d, \"probes\": %d, \"rank1\": %d, \"search_ms\": %.1f, "
                                           "\"overlay\": %s}",
                                           enrolled.enrolled(), probes.size(), rank1, response.timing().total_ms(),
                                           JsonQuote(overlay_path)));
  return absl::OkStatus();
}

}  // namespace tessera::cli

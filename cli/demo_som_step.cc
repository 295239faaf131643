// Demo step of the SOM atlas service: the genes x GO corpus (Entrez genes by
// their Gene Ontology terms, from Debian's r-bioc-org.hs.eg.db; downloaded and
// built on first use into ~/.cache/tessera/som_data: genes_go_cache.h) uploaded
// over gRPC, trained as a scheduler job into a 24x24 atlas (per-epoch progress), then
// queried: a few well-known genes projected to their cells, each cell's hit
// count and strongest features (GetCell) and its label from the downloaded
// codebook (GetCodebook), and the U-matrix written to som_umatrix.png.
// When the corpus cannot be built (no network, no apt-get), or with
// --som-corpus=synthetic, a synthetic topic corpus stands in and the step
// prints why.
#include <grpcpp/client_context.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cli/demo_context.h"
#include "common/grpc_status.h"
#include "common/json.h"
#include "common/png_io.h"
#include "common/status.h"
#include "services/common/chunked_upload.h"
#include "services/som/atlas.h"
#include "services/som/corpus.h"
#include "services/som/labels.h"
#include "services/som/render.h"
#include "services/som/synthetic.h"
#include "tools/som_data/genes_go_cache.h"
#include "tessera/v1/som.grpc.pb.h"

namespace tessera::cli {
namespace {

constexpr char kAtlasId[] = "demo-genes-go";
constexpr int kEdge = 24;
constexpr int kEpochs = 10;

struct DemoCorpus {
  std::string description;
  som::SparseBinaryMatrix matrix;
  std::vector<std::string> names;  // per feature
  std::vector<std::string> ids;    // per row
  std::vector<std::pair<std::string, std::string>> probes;  // (row id, what it is) to project
};

std::chrono::system_clock::time_point Deadline(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

// genes x GO (cached, or downloaded and built now), or a synthetic stand-in
// when that is impossible or --som-corpus=synthetic asks for it.
absl::StatusOr<DemoCorpus> LoadCorpus(const std::string& which) {
  DemoCorpus c;
  std::string why = "--som-corpus=synthetic";
  if (which == "genes-go") {
    som::GenesGoCacheOptions cache;
    cache.progress = [](const std::string& line) {
      std::printf("[som] %s\n", line.c_str());
      std::fflush(stdout);
    };
    absl::StatusOr<som::GenesGoFiles> files = som::EnsureGenesGoCorpus(cache);
    if (files.ok()) {
      TESSERA_ASSIGN_OR_RETURN(c.matrix, som::ReadCsrBinary(files->corpus));
      TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> tsv, som::ReadLines(files->features, c.matrix.cols()));
      TESSERA_ASSIGN_OR_RETURN(c.ids, som::ReadLines(files->row_ids, c.matrix.rows()));
      // "GO:0005634<TAB>CC<TAB>nucleus" -> "nucleus (GO:0005634)"
      for (const std::string& line : tsv) {
        std::vector<std::string> f = absl::StrSplit(line, '\t');
        c.names.push_back(f.size() >= 3 && !f[2].empty() ? absl::StrCat(f[2], " (", f[0], ")") : f[0]);
      }
      c.description = "genes x GO terms (Debian r-bioc-org.hs.eg.db)";
      c.probes = {{"7157", "TP53"}, {"3630", "INS"}, {"3043", "HBB"}, {"1956", "EGFR"}, {"4625", "MYH7"}};
      return c;
    }
    why = std::string(files.status().message());
  }
  std::printf("[som] using a synthetic corpus instead of genes x GO: %s\n", why.c_str());
  som::SyntheticCorpusOptions o;
  o.docs = 20000;
  o.features = 5000;
  o.topic_grid_width = 6;
  o.topic_grid_height = 6;
  c.matrix = som::GenerateSyntheticCorpus(o);
  for (int64_t v = 0; v < c.matrix.cols(); ++v) c.names.push_back(absl::StrCat("f", v));
  for (int64_t r = 0; r < c.matrix.rows(); ++r) c.ids.push_back(absl::StrCat("d", r));
  c.description = "synthetic topic corpus (genes x GO not used: " + why + ")";
  c.probes = {{"d0", "document 0"}, {"d1", "document 1"}, {"d2", "document 2"}};
  return c;
}

absl::StatusOr<v1::UploadedCorpus> Upload(v1::SomAtlasService::Stub& stub, const DemoCorpus& c) {
  grpc::ClientContext context;
  context.set_deadline(Deadline(120));
  v1::UploadedCorpus uploaded;
  auto writer = stub.UploadCorpus(&context, &uploaded);
  v1::CorpusChunk chunk;
  chunk.set_num_features(c.matrix.cols());
  size_t next_name = 0;
  // ~1 MB messages: rows in blocks, the names spread over the first chunks.
  for (int64_t r = 0; r < c.matrix.rows(); ++r) {
    v1::SparseDocument* d = chunk.add_rows();
    for (int32_t v : c.matrix.row(r)) d->add_features(v);
    d->set_id(c.ids[r]);
    if (chunk.rows_size() == 4000 || r + 1 == c.matrix.rows()) {
      for (int k = 0; k < 4000 && next_name < c.names.size(); ++k) chunk.add_feature_names(c.names[next_name++]);
      if (!writer->Write(chunk)) break;
      chunk.Clear();
    }
  }
  while (next_name < c.names.size()) {
    for (int k = 0; k < 4000 && next_name < c.names.size(); ++k) chunk.add_feature_names(c.names[next_name++]);
    if (!writer->Write(chunk)) break;
    chunk.Clear();
  }
  writer->WritesDone();
  TESSERA_RETURN_IF_ERROR(Annotate(FromGrpcStatus(writer->Finish()), "UploadCorpus"));
  return uploaded;
}

// The codebook over GetCodebook: dims [nodes, features], feature-major floats.
absl::StatusOr<std::vector<float>> DownloadCodebook(v1::SomAtlasService::Stub& stub, int64_t expected) {
  grpc::ClientContext context;
  context.set_deadline(Deadline(120));
  v1::GetCodebookRequest request;
  request.set_atlas_id(kAtlasId);
  auto reader = stub.GetCodebook(&context, request);
  ChunkAssembler assembler(int64_t{8} << 30);
  v1::ArrayChunk chunk;
  absl::Status added = absl::OkStatus();
  while (reader->Read(&chunk)) {
    if (added.ok()) added = assembler.Add(chunk);
  }
  TESSERA_RETURN_IF_ERROR(Annotate(FromGrpcStatus(reader->Finish()), "GetCodebook"));
  TESSERA_RETURN_IF_ERROR(added);
  TESSERA_ASSIGN_OR_RETURN(NDArray array, assembler.Finish());
  if (array.dtype() != DType::kFloat32 || array.num_elements() != expected) {
    return absl::InternalError(absl::StrCat("GetCodebook: ", array.num_elements(), " values, expected ", expected));
  }
  const float* p = array.data<float>();
  return std::vector<float>(p, p + expected);
}

}  // namespace

absl::Status DemoSomStep(DemoContext& ctx) {
  const auto start = std::chrono::steady_clock::now();
  TESSERA_ASSIGN_OR_RETURN(DemoCorpus corpus, LoadCorpus(ctx.som_corpus));
  auto stub = v1::SomAtlasService::NewStub(ctx.channel);
  TESSERA_ASSIGN_OR_RETURN(v1::UploadedCorpus uploaded, Upload(*stub, corpus));
  std::printf("[som] %s: %lld x %lld, %lld non-zeros, uploaded as %s\n", corpus.description.c_str(),
              static_cast<long long>(uploaded.documents()), static_cast<long long>(uploaded.features()),
              static_cast<long long>(uploaded.nonzeros()), uploaded.corpus_id().c_str());

  {  // A previous demo's atlas (reloaded at start-up) makes way for a fresh one.
    grpc::ClientContext context;
    context.set_deadline(Deadline(30));
    v1::AtlasRequest request;
    request.set_atlas_id(kAtlasId);
    v1::DeleteAtlasResponse deleted;
    const grpc::Status s = stub->DeleteAtlas(&context, request, &deleted);
    if (!s.ok() && s.error_code() != grpc::StatusCode::NOT_FOUND) {
      return Annotate(FromGrpcStatus(s), "DeleteAtlas");
    }
  }
  v1::CreateAtlasRequest create;
  create.mutable_corpus()->set_corpus_id(uploaded.corpus_id());
  create.set_atlas_id(kAtlasId);
  v1::AtlasOptions* o = create.mutable_options();
  o->set_width(kEdge);
  o->set_height(kEdge);
  o->set_epochs(kEpochs);
  o->set_radius_decay_epochs(kEpochs - 2);
  o->set_holdout_fraction(0.1);
  o->set_device(ctx.device);
  v1::CreateAtlasResponse created;
  {
    grpc::ClientContext context;
    context.set_deadline(Deadline(30));
    TESSERA_RETURN_IF_ERROR(Annotate(FromGrpcStatus(stub->CreateAtlas(&context, create, &created)), "CreateAtlas"));
  }
  std::printf("  atlas %s: %dx%d map, job %s (scheduler); watching progress\n", created.atlas_id().c_str(), kEdge,
              kEdge, created.job().job_id().c_str());
  std::set<int> watched_epochs;  // 1-based
  {
    grpc::ClientContext context;
    context.set_deadline(DemoContext::RpcDeadline());
    v1::JobRef watch;
    watch.set_job_id(created.job().job_id());
    auto reader = stub->WatchJob(&context, watch);
    v1::AtlasProgress p;
    v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
    std::string message;
    while (reader->Read(&p)) {
      if (p.stage() == "epoch") {
        std::printf("  epoch %2d/%d  radius %6.2f  QE %.4f  TE %.4f  %.2f s\n", p.epoch(), p.max_epochs(), p.radius(),
                    p.qe(), p.topographic_error(), p.epoch_seconds());
        watched_epochs.insert(p.epoch());
      }
      state = p.state();
      message = p.message();
    }
    TESSERA_RETURN_IF_ERROR(Annotate(FromGrpcStatus(reader->Finish()), "WatchJob"));
    if (state != v1::JOB_STATE_SUCCEEDED) {
      return absl::InternalError(absl::StrCat("atlas job ended ", v1::JobState_Name(state), ": ", message));
    }
  }
  v1::AtlasSummary summary;
  {
    grpc::ClientContext context;
    context.set_deadline(Deadline(30));
    v1::AtlasRequest request;
    request.set_atlas_id(kAtlasId);
    TESSERA_RETURN_IF_ERROR(Annotate(FromGrpcStatus(stub->GetAtlas(&context, request, &summary)), "GetAtlas"));
  }
  // The scheduler records a job's progress at most every 200 ms: epochs
  // faster than that were not watched live; the atlas's history has them all.
  int unseen = 0;
  for (const v1::EpochSummary& e : summary.history()) unseen += watched_epochs.count(e.epoch() + 1) == 0 ? 1 : 0;
  if (unseen > 0) {
    std::printf("  every epoch, from the atlas's history (%d ran faster than the scheduler records progress):\n",
                unseen);
    for (const v1::EpochSummary& e : summary.history()) {
      std::printf("  epoch %2d/%d  radius %6.2f  QE %.4f  TE %.4f  %.2f s\n", e.epoch() + 1, kEpochs, e.radius(),
                  e.qe(), e.topographic_error(), e.seconds());
    }
  }
  const v1::Quality& held = summary.held_out_quality();
  std::printf("  %d epochs%s; training QE %.4f; held-out (%lld genes) QE %.4f  TE %.4f  dead units %.1f%%\n",
              summary.epochs(), summary.converged() ? " (converged)" : "", summary.training_quality().qe_euclidean(),
              static_cast<long long>(held.documents()), held.qe_euclidean(), held.topographic_error(),
              100 * held.dead_unit_fraction());

  // The codebook comes back over the API; U-matrix and labels are drawn here.
  som::Atlas local;
  local.model.grid = som::GridShape{summary.width(), summary.height(),
                                    summary.toroid() ? som::Topology::kToroidal : som::Topology::kPlanar};
  local.model.features = summary.features();
  TESSERA_ASSIGN_OR_RETURN(local.model.weights_f32,
                           DownloadCodebook(*stub, local.model.features * local.model.grid.nodes()));
  local.feature_names = corpus.names;
  som::RenderOptions render;
  render.cell_pixels = 16;
  render.colour_bar = true;
  TESSERA_ASSIGN_OR_RETURN(Image8 umatrix, som::RenderUMatrix(local, render));
  const std::string png = ctx.OutPath("som_umatrix.png");
  TESSERA_RETURN_IF_ERROR(WritePng(umatrix, png));

  // Where a few genes land, and what their cells are about.
  v1::ProjectRequest project;
  project.set_atlas_id(kAtlasId);
  for (const auto& [id, what] : corpus.probes) {
    for (int64_t r = 0; r < corpus.matrix.rows(); ++r) {
      if (corpus.ids[r] != id) continue;
      v1::SparseDocument* d = project.add_documents();
      d->set_id(absl::StrCat(what, " (", id, ")"));
      for (int32_t v : corpus.matrix.row(r)) d->add_features(v);
      break;
    }
  }
  v1::ProjectResponse projected;
  {
    grpc::ClientContext context;
    context.set_deadline(Deadline(30));
    TESSERA_RETURN_IF_ERROR(Annotate(FromGrpcStatus(stub->Project(&context, project, &projected)), "Project"));
  }
  const std::vector<double> means = som::FeatureMeans(local.model);
  std::string cells_json;
  for (const v1::ProjectedDocument& doc : projected.documents()) {
    v1::GetCellRequest cell_request;
    cell_request.set_atlas_id(kAtlasId);
    cell_request.set_node(doc.node());
    cell_request.set_page_size(1);
    cell_request.set_top_features(1);
    v1::CellResponse cell;
    grpc::ClientContext context;
    context.set_deadline(Deadline(30));
    TESSERA_RETURN_IF_ERROR(Annotate(FromGrpcStatus(stub->GetCell(&context, cell_request, &cell)), "GetCell"));
    const som::CellLabel label = som::LabelCell(local, means, doc.node(), 3);
    std::printf("  %-14s -> cell (%2d,%2d), %3lld genes there; strongest: %s\n    label: %s\n", doc.id().c_str(),
                doc.x(), doc.y(), static_cast<long long>(cell.hit_count()),
                cell.top_features_size() > 0 ? cell.top_features(0).name().c_str() : "-", label.text.c_str());
    absl::StrAppend(&cells_json, cells_json.empty() ? "" : ", ", "{\"document\": ", JsonQuote(doc.id()),
                    ", \"x\": ", doc.x(), ", \"y\": ", doc.y(), ", \"hits\": ", cell.hit_count(),
                    ", \"label\": ", JsonQuote(label.text), "}");
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("  U-matrix       %s (borders between regions are bright)   %.1f s\n", png.c_str(), seconds);
  ctx.summary.emplace_back(
      "som", absl::StrCat("{\"corpus\": ", JsonQuote(corpus.description), ", \"atlas_id\": ", JsonQuote(kAtlasId),
                          ", \"map\": \"", kEdge, "x", kEdge, "\", \"epochs\": ", summary.epochs(),
                          ", \"training_qe\": ", summary.training_quality().qe_euclidean(),
                          ", \"held_out_qe\": ", held.qe_euclidean(), ", \"held_out_te\": ", held.topographic_error(),
                          ", \"cells\": [", cells_json, "], \"umatrix_png\": ", JsonQuote(png),
                          ", \"seconds\": ", seconds, "}"));
  return absl::OkStatus();
}

}  // namespace tessera::cli

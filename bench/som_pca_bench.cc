// SOM PCA initialisation, CPU vs GPU, side by side in one run (issue 16: a
// 1024 x 1024 map took 68 s to initialise on the H200 host, 2026-11-30), and
// CUDA Project with a per-call codebook upload vs the atlas's resident copy.
//
//   som_pca_bench [--edges=64,256,1024] [--fp16=true] [--corpus=PATH.csr]
//                 [--iterations=40] [--project_edge=256] [--project_docs=2000]
//                 [--project_calls=5] [--cpu=true]
//
// Corpus: genes x GO (tools/som_data/build_go_corpora.sh ->
// ~/.cache/tessera/som_data/genes_go.csr) when --corpus or that file exists,
// else a synthetic corpus of its shape (20,728 x 18,933, ~14.5 features per
// row). Per edge: CPU = InitializeModel on the host (mean, power iteration,
// host fill, norms) and the upload TrainSom then did; GPU = InitializePcaCodebook
// on a CUDA stream (mean on the host, the iteration with cuSPARSE/cuBLAS, fill
// and norms in device memory), synchronised. "components" times the power
// iteration alone on each backend. "max |dw|" compares the GPU codebook with
// the CPU one on 16 features x all nodes. Without a GPU it prints why and
// exits 0.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "common/buffer.h"
#include "common/device.h"
#include "kernels/som/half.h"
#include "kernels/som/pca.h"
#include "services/som/corpus.h"
#include "services/som/resident_codebook.h"
#include "services/som/synthetic.h"
#include "services/som/trainer.h"

ABSL_FLAG(std::string, edges, "64,256,1024", "square map edges");
ABSL_FLAG(bool, fp16, true, "fp16 codebooks (as the 68 s measurement; fp32 at 1024 needs 79 GB host + device)");
ABSL_FLAG(std::string, corpus, "", "a .csr corpus (default: genes x GO from the cache, else its synthetic shape)");
ABSL_FLAG(int, iterations, 40, "power iterations (TrainOptions::pca_iterations)");
ABSL_FLAG(int, project_edge, 256, "map edge of the Project comparison (0: skip)");
ABSL_FLAG(int64_t, project_docs, 2000, "documents per Project call");
ABSL_FLAG(int, project_calls, 5, "Project calls per variant");
ABSL_FLAG(bool, cpu, true, "also run the CPU initialisation");

namespace tessera {
namespace som {
namespace {

using bench::Clock;
using bench::SecondsSince;

void Check(const absl::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
    std::exit(1);
  }
}

SparseBinaryMatrix LoadCorpus() {
  std::string path = absl::GetFlag(FLAGS_corpus);
  if (path.empty()) {
    const char* home = std::getenv("HOME");
    const std::string cached = std::string(home != nullptr ? home : "") + "/.cache/tessera/som_data/genes_go.csr";
    if (FILE* f = std::fopen(cached.c_str(), "rb")) {
      std::fclose(f);
      path = cached;
    }
  }
  if (!path.empty()) {
    auto m = ReadCsrBinary(path);
    Check(m.status(), "reading the corpus");
    std::printf("corpus: %s, %lld x %lld, %lld non-zeros\n", path.c_str(), static_cast<long long>(m->rows()),
                static_cast<long long>(m->cols()), static_cast<long long>(m->nnz()));
    return *std::move(m);
  }
  SyntheticCorpusOptions c;
  c.docs = 20728;
  c.features = 18933;
  c.mean_nnz = 14.5;
  SparseBinaryMatrix m = GenerateSyntheticCorpus(c);
  std::printf("corpus: synthetic in the shape of genes x GO (no genes_go.csr found), %lld x %lld, %lld non-zeros\n",
              static_cast<long long>(m.rows()), static_cast<long long>(m.cols()), static_cast<long long>(m.nnz()));
  return m;
}

double Seconds(const Stream& stream, const std::function<absl::Status()>& f, const char* what) {
  Check(stream.Synchronize(), what);
  const Clock::time_point t = Clock::now();
  Check(f(), what);
  Check(stream.Synchronize(), what);
  return SecondsSince(t);
}

void BenchInit(const SparseBinaryMatrix& corpus, const Stream& gpu) {
  const WeightType type = absl::GetFlag(FLAGS_fp16) ? WeightType::kFloat16 : WeightType::kFloat32;
  std::printf("\n## PCA initialisation, %s codebook, %d power iterations (seconds)\n\n", WeightTypeName(type),
              absl::GetFlag(FLAGS_iterations));
  std::printf("| edge | GB | CPU components | GPU components | CPU init | + upload | GPU init | CPU+upload / GPU | max |dw| |\n");
  std::printf("|-----:|---:|------:|------:|------:|------:|------:|------:|------:|\n");
  PcaOptions pca;
  pca.iterations = absl::GetFlag(FLAGS_iterations);
  const Stream cpu = Stream::Cpu();
  const double cpu_components = absl::GetFlag(FLAGS_cpu) ? Seconds(cpu, [&] {
    return LeadingComponents(cpu, corpus.view(), pca).status();
  }, "CPU components") : NAN;
  const double gpu_components = Seconds(gpu, [&] { return LeadingComponents(gpu, corpus.view(), pca).status(); },
                                        "GPU components");
  for (absl::string_view e : absl::StrSplit(absl::GetFlag(FLAGS_edges), ',', absl::SkipEmpty())) {
    int edge = 0;
    if (!absl::SimpleAtoi(e, &edge) || edge < 1) Check(absl::InvalidArgumentError("bad --edges"), "flags");
    TrainOptions o;
    o.grid = GridShape{edge, edge, Topology::kPlanar};
    o.weight_type = type;
    o.pca_iterations = pca.iterations;
    const int64_t m = o.grid.nodes();
    const size_t bytes = static_cast<size_t>(WeightBytes(type)) * m * corpus.cols();
    auto weights = Buffer::Allocate(MemoryKind::kDevice, bytes, gpu.ordinal());
    auto norms = Buffer::Allocate(MemoryKind::kDevice, 4 * m, gpu.ordinal());
    Check(weights.status(), "device codebook");
    Check(norms.status(), "device norms");
    CodebookView device;
    device.nodes = m;
    device.features = corpus.cols();
    device.type = type;
    device.weights = (*weights)->data();
    device.sq_norms = static_cast<float*>((*norms)->data());
    const double gpu_init = Seconds(gpu, [&] { return InitializePcaCodebook(gpu, corpus, o, device); }, "GPU init");
    double cpu_init = NAN, upload = NAN, max_dw = NAN;
    if (absl::GetFlag(FLAGS_cpu)) {
      Clock::time_point t = Clock::now();
      auto host = InitializeModel(corpus, o);
      Check(host.status(), "CPU init");
      cpu_init = SecondsSince(t);
      upload = Seconds(gpu, [&] {
        return CopyBytes(device.weights, MemoryKind::kDevice, host->view().weights, MemoryKind::kHost, bytes, gpu);
      }, "upload");
      // The upload overwrote the GPU codebook: fill it again, then compare.
      Check(InitializePcaCodebook(gpu, corpus, o, device), "GPU init");
      const int64_t features = std::min<int64_t>(16, corpus.cols());
      std::vector<uint8_t> part(static_cast<size_t>(WeightBytes(type)) * features * m);
      Check(CopyBytes(part.data(), MemoryKind::kHost, device.weights, MemoryKind::kDevice, part.size(), gpu), "download");
      Check(gpu.Synchronize(), "download");
      max_dw = 0;
      for (int64_t k = 0; k < features * m; ++k) {
        const double a = type == WeightType::kFloat32 ? reinterpret_cast<const float*>(part.data())[k]
                                                      : HalfToFloat(reinterpret_cast<const uint16_t*>(part.data())[k]);
        max_dw = std::max(max_dw, std::abs(a - host->Weight(k / m, k % m)));
      }
    }
    std::printf("| %d | %.1f | %.3f | %.3f | %.2f | %.2f | %.3f | %.0fx | %.2g |\n", edge, bytes / 1e9, cpu_components,
                gpu_components, cpu_init, upload, gpu_init, (cpu_init + upload) / gpu_init, max_dw);
    std::fflush(stdout);
  }
}

void BenchProject(const SparseBinaryMatrix& corpus) {
  const int edge = absl::GetFlag(FLAGS_project_edge);
  if (edge <= 0) return;
  TrainOptions o;
  o.grid = GridShape{edge, edge, Topology::kPlanar};
  o.backend = Backend::kCuda;  // PCA on the device, copied back
  auto model = InitializeModel(corpus, o);
  Check(model.status(), "model for Project");
  const int64_t n = std::min<int64_t>(absl::GetFlag(FLAGS_project_docs), corpus.rows());
  std::vector<int64_t> rows(n);
  for (int64_t k = 0; k < n; ++k) rows[k] = k * corpus.rows() / n;
  const SparseBinaryMatrix docs = SelectRows(corpus, rows);
  const int calls = std::max(1, absl::GetFlag(FLAGS_project_calls));
  std::vector<double> upload_each, resident_each;
  std::vector<int32_t> a, b;
  ResidentCodebook resident(*model);
  for (int c = 0; c < calls; ++c) {
    Clock::time_point t = Clock::now();
    auto p = ProjectDocuments(*model, docs, Backend::kCuda);
    Check(p.status(), "ProjectDocuments");
    upload_each.push_back(SecondsSince(t));
    t = Clock::now();
    auto q = resident.Project(docs);
    Check(q.status(), "ResidentCodebook::Project");
    resident_each.push_back(SecondsSince(t));
    a = p->bmu;
    b = q->bmu;
  }
  std::printf("\n## CUDA Project, %dx%d fp32 map (%.2f GB), %lld documents per call, %d calls (seconds per call)\n\n",
              edge, edge, 4.0 * o.grid.nodes() * corpus.cols() / 1e9, static_cast<long long>(n), calls);
  std::printf("| variant | first call | median call | uploads |\n|---|---:|---:|---:|\n");
  std::printf("| upload per call (ProjectDocuments) | %.4f | %.4f | %d |\n", upload_each[0], bench::Median(upload_each), calls);
  std::printf("| resident codebook | %.4f | %.4f | %lld |\n", resident_each[0], bench::Median(resident_each),
              static_cast<long long>(resident.uploads()));
  std::printf("median ratio %.1fx; same BMUs: %s\n", bench::Median(upload_each) / bench::Median(resident_each), a == b ? "yes" : "NO");
}

}  // namespace
}  // namespace som
}  // namespace tessera

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  using namespace tessera;
  if (!DeviceRegistry::Get().cuda_available()) {
    std::printf("som_pca_bench: no GPU (%s); nothing to compare\n", DeviceRegistry::Get().cuda_unavailable_reason().c_str());
    return 0;
  }
  auto stream = Stream::Create(Backend::kCuda);
  som::Check(stream.status(), "CUDA stream");
  const som::SparseBinaryMatrix corpus = som::LoadCorpus();
  som::BenchInit(corpus, *stream);
  som::BenchProject(corpus);
  return 0;
}

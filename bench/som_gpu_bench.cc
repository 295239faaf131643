// SOM BMU search on the GPU: the feature-major tiled kernel against the
// node-major layout baseline (the same kernel reading W[i*V + v]) and cuSPARSE
// SpMM in both dense orders (with a separate top-2 pass), at map edges
// 32..1024 on a synthetic MEDLINE-shape corpus (30,766 features, ~11 per
// document, Zipf-like frequencies, topics); then an end-to-end converged 64x64
// training on the full 29.9 M-document corpus.
//
//   som_gpu_bench [--edges=32,64,128,256,512,1024] [--budget=68719476736]
//                 [--max_docs=1000000] [--reps=3] [--no_train]
//                 [--train_docs=29900000] [--train_edge=64] [--train_fp16]
//                 [--train_bmu=cusparse-row] [--depths=1,4,16] [--groups=256,2048] [--lanes=8] [--no_bmu]
//                 [--train_epochs=N] [--issue16] [--fixed_costs] [--cpu_check_docs=2000]
//                 [--span_rows=4:8:0,2:8:256]
//                 [--train_variants=host-quality,device-quality,screened[:dN:wN:gN:sN:rN:auto:gbound[N]:gall]]
//
// Per edge the corpus prefix has min(max_docs, budget / nodes) documents (so
// each variant does about the same work at every edge); times are the median
// of --reps CUDA-synchronised runs after a warm-up (one run when the warm-up
// takes over 2 s), also scaled to one epoch of 29.9 M documents. Codebooks are
// reproducible random fills (FillRandomCodebook, scaled by twice each
// feature's frequency). "peak" is the tracked device memory high-water mark
// during the search (codebook, documents and tiles, outputs, scratch);
// "scratch" the part allocated by the search itself. "agree" is the fraction
// of BMUs equal to the feature-major result of the same precision (cuSPARSE
// sums in another order, so near-ties may differ). A variant that would not
// fit in free device memory is reported as skipped.
// Issue-16 rows (same bits as feature-major): "sorted" visits documents in the
// order of their previous BMUs (BmuTuning::order_by_previous_bmu, the
// trainer's default; the previous BMUs are those of the feature-major row, one
// pass over the same codebook, and the timed pass includes the sort). Per edge
// the ratio of cusparse-row to each is printed.
// A random codebook scatters similar documents over the map, unlike a trained
// one, so the "trained" rows use a trained-like codebook: the random fill
// after one batch update (kernels/som/batch_update.h) with each document's BMU
// set to a node in its topic's patch of the map (the synthetic corpus's topic
// grid scaled to the map, blur radius one patch): documents of a topic then
// map near each other, as after training. Their agreement column compares with
// the "trained feature-major fp32" row (cuSPARSE's time does not depend on the
// weights, so the ratios use the cusparse-row row of the random codebook).
// Register-span rows (issue 16, BmuTuning::warp_register_spans / warp_doc_rounds,
// "spansS rR [gG]"): S 16-byte spans of accumulators per lane, R documents per
// warp, G nodes per group. Each codebook is built once per edge and every row
// of it searches the same one; "bits" compares BMU, second and score of every
// document with the reference row of the same codebook (its default form,
// unsorted: "ref"), which is itself checked against the CPU backend on the
// first --cpu_check_docs documents where the codebook fits in 16 GiB (a line
// per edge says so). --issue16 runs only cusparse-row, the fp32 reference
// and the trained-like rows (about 2 minutes at edges 64,256,1024).
// Without a GPU it prints why and exits 0.
#include <algorithm>
#include <array>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "common/buffer.h"
#include "common/device.h"
#include "kernels/som/batch_update.h"
#include "kernels/som/bmu.h"
#include "kernels/som/codebook.h"
#include "kernels/som/documents.h"
#include "kernels/som/parallel.h"
#include "kernels/som/staged_copy.h"
#include "services/som/corpus.h"
#include "services/som/synthetic.h"
#include "services/som/trainer.h"

namespace tessera {
namespace som {
namespace {

using bench::Clock;
using bench::SecondsSince;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr int64_t kMedlineDocs = 29900000;

struct Args {
  std::vector<int> edges = {32, 64, 128, 256, 512, 1024};
  int64_t budget = int64_t{1} << 36;  // documents x nodes per measurement
  int64_t max_docs = 1000000;
  int reps = 3;
  bool train = true;
  // --train_cpu: only the trainings of --train_variants, on the CPU backend
  // (no GPU needed).
  bool train_cpu = false;
  int64_t train_docs = kMedlineDocs;
  int train_edge = 64;
  bool train_fp16 = false;
  bool train_cusparse = false;  // --train_bmu=cusparse-row
  std::vector<int> depths;      // --depths=1,4,16 (tiled kernel)
  std::vector<int64_t> groups;  // --groups=256,2048 (warp kernel)
  std::vector<int> lanes;       // --lanes=8 (warp kernel)
  bool bmu = true;              // --no_bmu: training only
  int train_epochs = 40;        // --train_epochs=N
  // --train_variants=host-quality,device-quality,screened,screened-grouped[:dN:wN:gN:sN:rN:auto:gbound[N]:gall]:
  // trainings run one after the other on the same corpus (BenchTraining, ApplyTrainVariant).
  std::vector<std::string> train_variants = {"host-quality", "device-quality", "screened"};
  bool issue16_only = false;    // --issue16: only the rows issue 16 compares
  bool fixed_costs = false;     // --fixed_costs: the exact kernel on empty documents (BenchFixedCosts)
  int64_t cpu_check_docs = 2000;  // --cpu_check_docs=N: reference rows against the CPU backend (0: off)
  // --span_rows=S:R:G,...: the trained register-span rows (spans, documents
  // per warp, group nodes or 0 for the default), for both precisions, instead
  // of the built-in lists.
  // Optional 4th and 5th fields: warps per block
  // (BmuTuning::warp_block_warps), 1 or 2 to sort by (previous BMU, rarest
  // feature) (BmuHints::document_key) instead of the previous BMU alone.
  std::vector<std::array<int64_t, 5>> span_rows;
};

// A --train_variants entry: a name (host-quality: QE/TE downloaded and
// measured on the host, exact kernel; device-quality: on the device;
// screened / screened-grouped: the screened BMU search, whole map / 1024-
// position groups) and options after colons: dN radius_decay_epochs N, wN
// warp_block_warps, gN warp_group_nodes, sN warp_register_spans, rN
// warp_doc_rounds, auto the default
// screen_auto_max_nodes (the named variants set 0), gbound[N] the group
// bounds (N nodes per group), gall bounds from the second epoch.
// False when malformed.
bool ApplyTrainVariant(const std::string& variant, TrainOptions& v) {
  const std::vector<std::string> parts = absl::StrSplit(variant, ':');
  const std::string& name = parts[0];
  if (name != "host-quality" && name != "device-quality" && name != "screened" && name != "screened-grouped") {
    return false;
  }
  v.quality_on_device = name != "host-quality";
  v.bmu_tuning.screen_fp16 = name == "screened" || name == "screened-grouped";
  // host-quality / device-quality: the exact kernel, whatever the map size;
  // "auto" (option): the trainer's default choice by map size.
  v.bmu_tuning.screen_auto_max_nodes = 0;
  if (name == "screened-grouped") v.bmu_tuning.screen_group_positions = 1024;
  for (size_t k = 1; k < parts.size(); ++k) {
    const std::string& opt = parts[k];
    if (opt == "auto") {
      v.bmu_tuning.screen_auto_max_nodes = BmuTuning().screen_auto_max_nodes;
      continue;
    }
    // gbound[N]: TrainOptions::group_bounds with N nodes per group (default
    // 16); gall: bounded from the second epoch on (max_radius unbounded).
    if (opt.rfind("gbound", 0) == 0) {
      v.group_bounds.enabled = true;
      if (opt.size() > 6 && (!absl::SimpleAtoi(opt.substr(6), &v.group_bounds.strip_nodes) ||
                             v.group_bounds.strip_nodes < 1)) {
        return false;
      }
      continue;
    }
    if (opt == "gall") {
      v.group_bounds.max_radius = 1e30;
      continue;
    }
    int x = 0;
    if (opt.size() < 2 || !absl::SimpleAtoi(opt.substr(1), &x) || x < 1) return false;
    switch (opt[0]) {
      case 'd':
        v.radius_decay_epochs = x;
        break;
      case 'w':
        v.bmu_tuning.warp_block_warps = x;
        break;
      case 'g':
        v.bmu_tuning.warp_group_nodes = x;
        break;
      case 's':
        v.bmu_tuning.warp_register_spans = x;
        break;
      case 'r':
        v.bmu_tuning.warp_doc_rounds = x;
        break;
      default:
        return false;
    }
  }
  return true;
}

bool Parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* name) { return tessera::bench::FlagValue(argv[i], name); };
    if (const char* v = value("--edges")) {
      a.edges.clear();
      for (absl::string_view e : absl::StrSplit(v, ',')) {
        int x;
        if (!absl::SimpleAtoi(e, &x) || x < 1) return false;
        a.edges.push_back(x);
      }
    } else if (const char* v = value("--depths")) {
      for (absl::string_view e : absl::StrSplit(v, ',')) {
        int x;
        if (!absl::SimpleAtoi(e, &x) || (x != 1 && x != 4 && x != 8 && x != 16)) return false;
        a.depths.push_back(x);
      }
    } else if (const char* v = value("--lanes")) {
      for (absl::string_view e : absl::StrSplit(v, ',')) {
        int x;
        if (!absl::SimpleAtoi(e, &x) || (x != 4 && x != 8)) return false;
        a.lanes.push_back(x);
      }
    } else if (const char* v = value("--groups")) {
      for (absl::string_view e : absl::StrSplit(v, ',')) {
        int64_t x;
        if (!absl::SimpleAtoi(e, &x) || x < 128 || x % 128 != 0) return false;
        a.groups.push_back(x);
      }
    } else if (const char* v = value("--budget")) {
      if (!absl::SimpleAtoi(v, &a.budget) || a.budget < 1) return false;
    } else if (const char* v = value("--max_docs")) {
      if (!absl::SimpleAtoi(v, &a.max_docs) || a.max_docs < 1) return false;
    } else if (const char* v = value("--reps")) {
      if (!absl::SimpleAtoi(v, &a.reps) || a.reps < 1) return false;
    } else if (const char* v = value("--train_docs")) {
      if (!absl::SimpleAtoi(v, &a.train_docs) || a.train_docs < 1) return false;
    } else if (const char* v = value("--train_edge")) {
      if (!absl::SimpleAtoi(v, &a.train_edge) || a.train_edge < 1) return false;
    } else if (arg == "--no_bmu") {
      a.bmu = false;
    } else if (const char* v = value("--train_epochs")) {
      if (!absl::SimpleAtoi(v, &a.train_epochs) || a.train_epochs < 1) return false;
    } else if (const char* v = value("--train_variants")) {
      a.train_variants.clear();
      for (absl::string_view e : absl::StrSplit(v, ',')) {
        TrainOptions probe;
        if (!ApplyTrainVariant(std::string(e), probe)) return false;
        a.train_variants.emplace_back(e);
      }
    } else if (arg == "--issue16") {
      a.issue16_only = true;
    } else if (arg == "--fixed_costs") {
      a.fixed_costs = true;
    } else if (const char* v = value("--cpu_check_docs")) {
      if (!absl::SimpleAtoi(v, &a.cpu_check_docs) || a.cpu_check_docs < 0) return false;
    } else if (const char* v = value("--span_rows")) {
      for (absl::string_view e : absl::StrSplit(v, ',')) {
        const std::vector<absl::string_view> f = absl::StrSplit(e, ':');
        std::array<int64_t, 5> row{0, 0, 0, 8, 0};
        if (f.size() < 3 || f.size() > 5 || !absl::SimpleAtoi(f[0], &row[0]) || !absl::SimpleAtoi(f[1], &row[1]) ||
            !absl::SimpleAtoi(f[2], &row[2]) || (row[0] != 1 && row[0] != 2 && row[0] != 4) || row[1] < 1 ||
            row[1] > 64 || row[2] < 0) {
          return false;
        }
        if (f.size() >= 4 && (!absl::SimpleAtoi(f[3], &row[3]) ||
                              (row[3] != 8 && row[3] != 16 && row[3] != 24 && row[3] != 32))) {
          return false;
        }
        if (f.size() >= 5 && (!absl::SimpleAtoi(f[4], &row[4]) || row[4] < 0 || row[4] > 2)) return false;
        a.span_rows.push_back(row);
      }
    } else if (arg == "--no_train") {
      a.train = false;
    } else if (arg == "--train_bmu=cusparse-row") {
      a.train_cusparse = true;
    } else if (arg == "--train_fp16") {
      a.train_fp16 = true;
    } else if (arg == "--train_cpu") {
      a.train_cpu = true;
    } else {
      return false;
    }
  }
  return true;
}

#define CHECK_OK(expr)                                                                        \
  do {                                                                                        \
    absl::Status s_ = (expr);                                                                 \
    if (!s_.ok()) {                                                                           \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, std::string(s_.message()).c_str()); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

template <typename T>
std::shared_ptr<Buffer> Upload(const std::vector<T>& v, const Stream& stream) {
  auto b = UploadVector(v, stream);
  CHECK_OK(b.status());
  return *b;
}

struct Variant {
  std::string name;
  BmuAlgorithm algorithm;
  WeightType type;
  int depth = 0;         // tiled kernel: loads in flight per thread (BmuTuning::tiled_load_depth); 0 = default
  bool tiled = false;    // the tiled (shared-memory) kernel instead of the warp kernel
  int64_t group = 0;     // warp kernel: nodes per group (BmuTuning::warp_group_nodes); 0 = default
  int lanes = 0;         // warp kernel: nodes per lane (BmuTuning::warp_lane_nodes); 0 = default
  bool sorted = false;   // documents ordered by their previous BMU (BmuTuning::order_by_previous_bmu)
  bool trained = false;  // the trained-like codebook instead of the random fill
  int spans = 0;         // register-span form (BmuTuning::warp_register_spans); 0 = the default form
  int rounds = 1;        // register-span form: documents per warp (BmuTuning::warp_doc_rounds)
  bool screen = false;   // screened search (BmuTuning::screen_fp16)
  int slots = 4;         // screened search: candidates per lane (BmuTuning::screen_slots)
  int64_t screen_group = 0;  // screened search: positions per group (BmuTuning::screen_group_positions)
  int block_warps = 8;   // register-span form: warps per block (BmuTuning::warp_block_warps)
  bool doc_key = false;  // sorted by (previous BMU, rarest feature) (BmuHints::document_key)

  BmuTuning tuning() const {
    BmuTuning t;
    t.tiled_kernel = tiled;
    if (depth > 0) t.tiled_load_depth = depth;
    if (group > 0) t.warp_group_nodes = group;
    if (lanes > 0) t.warp_lane_nodes = lanes;
    t.order_by_previous_bmu = sorted;
    t.warp_register_spans = spans;
    t.warp_doc_rounds = rounds;
    t.screen_fp16 = screen;
    t.screen_auto_max_nodes = 0;  // each row names its search
    t.screen_slots = slots;
    t.screen_group_positions = screen_group;
    t.warp_block_warps = block_warps;
    return t;
  }
  // The feature-major default (unsorted, untuned) of its precision and
  // codebook: the row the others of that codebook are compared with.
  bool reference() const {
    return algorithm == BmuAlgorithm::kFeatureMajor && depth == 0 && !tiled && group == 0 && lanes == 0 && !sorted &&
           spans == 0 && !screen;
  }
  // Rows compared with the same reference: precision and codebook.
  int reference_key() const { return static_cast<int>(type) + (trained ? 2 : 0); }
  // Rows that search the same stored codebook (built once per edge).
  int codebook_key() const { return reference_key() + (LayoutFor(algorithm) == CodebookLayout::kNodeMajor ? 4 : 0); }
};

struct Measurement {
  bool ran = false;
  std::string note;
  double seconds = 0;
  double peak_gib = 0, scratch_gib = 0;
  double agree = -1;
  std::string bits = "-";  // BMU, second and score against the reference row, every document
  int64_t rescans = -1;    // screened rows: documents the exact kernel searched again (BmuOutput::exact_rescans)
};

// Empty when `need` bytes fit 95% of the GPU's free memory, else the row's
// "skipped: <what> X GiB, Y GiB free" note.
std::string SkipNoteUnlessFree(size_t need, const char* what, int ordinal) {
  auto mem = QueryGpuMemory(ordinal);
  CHECK_OK(mem.status());
  if (need <= mem->free_bytes * 0.95) return "";
  char note[96];
  std::snprintf(note, sizeof note, "skipped: %s %.1f GiB, %.1f GiB free", what, need / kGiB, mem->free_bytes / kGiB);
  return note;
}

using bench::Median;

// Per document, a node in its topic's patch of an edge x edge map (the topic
// grid scaled to the map; a reproducible position inside the patch).
std::vector<int32_t> TopicNodes(const std::vector<int32_t>& topics, int64_t n, int topic_width, int topic_height,
                                int edge) {
  std::vector<int32_t> node(n);
  for (int64_t d = 0; d < n; ++d) {
    const int tx = topics[d] % topic_width, ty = topics[d] / topic_width;
    const uint64_t h = static_cast<uint64_t>(d) * 0x9E3779B97F4A7C15ull;
    const double jx = static_cast<double>((h >> 11) & 0xffff) / 65536.0, jy = static_cast<double>(h >> 48) / 65536.0;
    const int x = std::min(edge - 1, static_cast<int>((tx + jx) * edge / topic_width));
    const int y = std::min(edge - 1, static_cast<int>((ty + jy) * edge / topic_height));
    node[d] = x + edge * y;
  }
  return node;
}

// Results of one search copied to the host.
struct HostResult {
  std::vector<int32_t> bmu, second;
  std::vector<float> score;
};

HostResult ToHost(const BmuOutput& out, int64_t n, const Stream& stream) {
  HostResult r;
  r.bmu.resize(n);
  r.second.resize(n);
  r.score.resize(n);
  CHECK_OK(CopyBytes(r.bmu.data(), MemoryKind::kHost, out.bmu, MemoryKind::kDevice, 4 * n, stream));
  CHECK_OK(CopyBytes(r.second.data(), MemoryKind::kHost, out.second, MemoryKind::kDevice, 4 * n, stream));
  CHECK_OK(CopyBytes(r.score.data(), MemoryKind::kHost, out.score, MemoryKind::kDevice, 4 * n, stream));
  return r;
}

// Documents [0, n) whose BMU, second or score bits differ.
int64_t CountDifferent(const HostResult& a, const HostResult& b, int64_t n) {
  int64_t diff = 0;
  for (int64_t d = 0; d < n; ++d) {
    diff += a.bmu[d] != b.bmu[d] || a.second[d] != b.second[d] ||
            std::memcmp(&a.score[d], &b.score[d], sizeof(float)) != 0;
  }
  return diff;
}

// The CPU backend on the first `count` documents with the device codebook
// copied to the host, against the device result: documents that differ in
// any bit (BMU, second, score).
int64_t CpuCheck(const SparseBinaryMatrix& corpus, int64_t count, const CodebookView& device_cb,
                 const HostResult& gpu, const Stream& stream) {
  const size_t weight_bytes = static_cast<size_t>(WeightBytes(device_cb.type)) * device_cb.nodes * device_cb.features;
  std::vector<char> weights(weight_bytes);
  std::vector<float> norms(device_cb.nodes);
  CHECK_OK(CopyBytes(weights.data(), MemoryKind::kHost, device_cb.weights, MemoryKind::kDevice, weight_bytes, stream));
  CHECK_OK(CopyBytes(norms.data(), MemoryKind::kHost, device_cb.sq_norms, MemoryKind::kDevice, 4 * norms.size(),
                     stream));
  CodebookView cb = device_cb;
  cb.weights = weights.data();
  cb.sq_norms = norms.data();
  CsrView prefix = corpus.view();
  prefix.rows = count;
  HostResult cpu_result;
  cpu_result.bmu.resize(count);
  cpu_result.second.resize(count);
  cpu_result.score.resize(count);
  cpu::FindBmus(prefix, cb, BmuOutput{cpu_result.bmu.data(), cpu_result.second.data(), cpu_result.score.data()});
  return CountDifferent(cpu_result, gpu, count);
}

std::vector<Variant> BmuVariants(const Args& a) {
  std::vector<Variant> variants = {
      {"feature-major fp32", BmuAlgorithm::kFeatureMajor, WeightType::kFloat32},
      {"cusparse-row fp32", BmuAlgorithm::kCusparseRowOrder, WeightType::kFloat32},
  };
  if (!a.issue16_only) {
    variants.push_back({"feature-major fp16", BmuAlgorithm::kFeatureMajor, WeightType::kFloat16});
    variants.push_back({"node-major fp32", BmuAlgorithm::kNodeMajor, WeightType::kFloat32});
    variants.push_back({"node-major fp16", BmuAlgorithm::kNodeMajor, WeightType::kFloat16});
    variants.push_back({"cusparse-col fp32", BmuAlgorithm::kCusparseColOrder, WeightType::kFloat32});
    // Issue 16: documents sorted by previous BMU on the random codebook.
    for (WeightType type : {WeightType::kFloat32, WeightType::kFloat16}) {
      Variant v{std::string("feature-major ") + (type == WeightType::kFloat32 ? "fp32" : "fp16") + " sorted",
                BmuAlgorithm::kFeatureMajor, type};
      v.sorted = true;
      variants.push_back(v);
    }
  }
  // Issue 16, register-span form on the random codebook (no previous BMUs).
  {
    Variant v{"feature-major fp32 spans4 r8", BmuAlgorithm::kFeatureMajor, WeightType::kFloat32};
    v.spans = 4;
    v.rounds = 8;
    variants.push_back(v);
  }
  // Issue 37, the screened search (fp16 bounds, exact candidates) on the
  // random codebook, unsorted, against the row above.
  for (int rounds : {4, 8}) {
    Variant v{"feature-major fp32 screen r" + std::to_string(rounds), BmuAlgorithm::kFeatureMajor,
              WeightType::kFloat32};
    v.spans = 4;
    v.rounds = rounds;
    v.screen = true;
    variants.push_back(v);
  }
  // The trained-like codebook: the default form unsorted (the reference and
  // the previous BMUs), sorted (the trainer's default), and the register-span
  // variants, all sorted: {spans, rounds, group}.
  struct SpanRow {
    int spans, rounds;
    int64_t group;
    int block_warps = 8;
    bool doc_key = false;
  };
  for (WeightType type : {WeightType::kFloat32, WeightType::kFloat16}) {
    const std::string t = type == WeightType::kFloat32 ? "fp32" : "fp16";
    for (bool sorted : {false, true}) {
      Variant v{"trained feature-major " + t + (sorted ? " sorted" : ""), BmuAlgorithm::kFeatureMajor, type};
      v.sorted = sorted;
      v.trained = true;
      variants.push_back(v);
    }
    std::vector<SpanRow> rows =
        type == WeightType::kFloat32
            ? std::vector<SpanRow>{{4, 1, 0}, {4, 8, 0}, {4, 32, 0}, {2, 8, 256}, {2, 8, 0}, {1, 8, 128}}
            : std::vector<SpanRow>{{2, 1, 0}, {2, 8, 0}, {1, 8, 256}};
    if (!a.span_rows.empty()) {
      rows.clear();
      for (const auto& r : a.span_rows) {
        // fp16 takes at most 2 spans (BmuTuning::warp_register_spans).
        const int spans = type == WeightType::kFloat16 ? std::min<int>(2, r[0]) : static_cast<int>(r[0]);
        const SpanRow row{spans, static_cast<int>(r[1]), r[2], static_cast<int>(r[3]), r[4] != 0};
        if (std::none_of(rows.begin(), rows.end(), [&](const SpanRow& x) {
              return x.spans == row.spans && x.rounds == row.rounds && x.group == row.group &&
                     x.block_warps == row.block_warps && x.doc_key == row.doc_key;
            })) {
          rows.push_back(row);
        }
      }
    }
    for (const SpanRow& row : rows) {
      Variant v{"trained " + t + (row.doc_key ? " keyed" : " sorted") + " spans" + std::to_string(row.spans) + " r" +
                    std::to_string(row.rounds) + (row.group > 0 ? " g" + std::to_string(row.group) : "") +
                    (row.block_warps != 8 ? " w" + std::to_string(row.block_warps) : ""),
                BmuAlgorithm::kFeatureMajor, type};
      v.sorted = true;
      v.trained = true;
      v.spans = row.spans;
      v.rounds = row.rounds;
      v.group = row.group;
      v.block_warps = row.block_warps;
      v.doc_key = row.doc_key;
      variants.push_back(v);
    }
    // Issue 37: the screened search on the trained-like codebook, sorted as
    // in training (fp32 codebooks only; the exact kernel otherwise).
    if (type == WeightType::kFloat32) {
      for (int rounds : {1, 4, 8, -8}) {  // -8: 8 rounds, 8 slots
        Variant v{"trained fp32 sorted screen r" + std::to_string(std::abs(rounds)) + (rounds < 0 ? " s8" : ""),
                  BmuAlgorithm::kFeatureMajor, type};
        v.sorted = true;
        v.trained = true;
        v.spans = 4;
        v.rounds = std::abs(rounds);
        v.slots = rounds < 0 ? 8 : 4;
        v.screen = true;
        variants.push_back(v);
      }
      // Issue 37: the whole-map form in one 24-warp block per SM, 32
      // documents per warp, documents also ordered by their rarest feature.
      for (bool keyed : {false, true}) {
        Variant v{std::string("trained fp32 ") + (keyed ? "keyed" : "sorted") + " screen r32 w24",
                  BmuAlgorithm::kFeatureMajor, type};
        v.sorted = true;
        v.trained = true;
        v.spans = 4;
        v.rounds = 32;
        v.block_warps = 24;
        v.doc_key = keyed;
        v.screen = true;
        variants.push_back(v);
      }
      // The grouped form: blocks of one position group run together.
      for (int64_t group : {1024, 2048}) {
        Variant v{"trained fp32 sorted screen r8 g" + std::to_string(group), BmuAlgorithm::kFeatureMajor, type};
        v.sorted = true;
        v.trained = true;
        v.spans = 4;
        v.rounds = 8;
        v.screen = true;
        v.screen_group = group;
        variants.push_back(v);
      }
    }
  }
  if (a.issue16_only) return variants;
  // The other CUDA kernel for the same layouts, and tuning sweeps.
  for (WeightType type : {WeightType::kFloat32, WeightType::kFloat16}) {
    const std::string t = type == WeightType::kFloat32 ? "fp32" : "fp16";
    variants.push_back({"feature-major " + t + " tiled", BmuAlgorithm::kFeatureMajor, type, 0, true});
    for (int depth : a.depths) {
      variants.push_back({"feature-major " + t + " tiled d" + std::to_string(depth), BmuAlgorithm::kFeatureMajor, type,
                          depth, true});
    }
    for (int lanes : a.lanes) {
      variants.push_back({"feature-major " + t + " l" + std::to_string(lanes), BmuAlgorithm::kFeatureMajor, type, 0,
                          false, 0, lanes});
    }
    for (int64_t group : a.groups) {
      variants.push_back({"feature-major " + t + " g" + std::to_string(group), BmuAlgorithm::kFeatureMajor, type, 0,
                          false, group});
    }
  }
  return variants;
}

constexpr char kFixedCostsHeader[] =
    "\nCost split of the exact kernel (random fp32 codebook, default tuning): empty documents, then copies of one "
    "document\n";

std::string FixedCostRows(const Args& a, const Stream& stream, const SparseBinaryMatrix& corpus, const CodebookView& cb,
                          int edge);

void BenchBmu(const Args& a, const Stream& stream, const SparseBinaryMatrix& corpus, const float* d_scale,
              const std::vector<int32_t>& topics) {
  const SyntheticCorpusOptions shape = MedlineShape(corpus.rows());
  const std::vector<Variant> variants = BmuVariants(a);
  // Run order: by codebook (each built once per edge), references first, so
  // every other row has its reference and previous BMUs; printed as listed.
  std::vector<size_t> run_order(variants.size());
  for (size_t k = 0; k < variants.size(); ++k) run_order[k] = k;
  std::stable_sort(run_order.begin(), run_order.end(), [&](size_t x, size_t y) {
    const Variant &p = variants[x], &q = variants[y];
    const int kp = p.codebook_key() % 4 * 2 + p.codebook_key() / 4, kq = q.codebook_key() % 4 * 2 + q.codebook_key() / 4;
    return kp != kq ? kp < kq : p.reference() > q.reference();
  });
  std::map<int64_t, std::unique_ptr<DocumentSet>> doc_sets;  // by document count
  std::string fixed_costs;  // --fixed_costs rows, on the first random fp32 feature-major codebook of each edge
  std::printf("\nBMU search (exact Euclidean, fused top-2), V = %lld features\n",
              static_cast<long long>(corpus.cols()));
  std::printf("%-6s %-9s %-38s %10s %12s %14s %9s %9s %8s %10s\n", "edge", "docs", "variant", "ms", "ms/1M docs",
              "s/epoch 29.9M", "peak GiB", "scratch", "agree", "bits");
  for (int edge : a.edges) {
    const int64_t m = int64_t{edge} * edge;
    const int64_t n = std::max<int64_t>(4096, std::min<int64_t>({a.max_docs, corpus.rows(), a.budget / m}));
    if (doc_sets.count(n) == 0) {
      CsrView prefix = corpus.view();
      prefix.rows = n;
      auto set = DocumentSet::Create(prefix, stream, DocumentParts{true, true});
      CHECK_OK(set.status());
      doc_sets[n] = std::make_unique<DocumentSet>(std::move(*set));
    }
    const DocumentSet& docs = *doc_sets[n];
    auto bmu = Buffer::Allocate(MemoryKind::kDevice, 4 * n).value();
    auto second = Buffer::Allocate(MemoryKind::kDevice, 4 * n).value();
    auto score = Buffer::Allocate(MemoryKind::kDevice, 4 * n).value();
    const BmuOutput out{static_cast<int32_t*>(bmu->data()), static_cast<int32_t*>(second->data()),
                        static_cast<float*>(score->data())};
    int fixed_costs_edge = -1;
    std::map<int, HostResult> reference;  // by reference_key(): the reference row's results
    std::map<int, std::string> cpu_check;  // by reference_key(): the CPU check of the reference
    std::shared_ptr<Buffer> topic_bmu;     // trained-like codebook: each document's topic node
    std::shared_ptr<Buffer> previous;      // the reference BMUs on the device (sorted rows)
    std::shared_ptr<Buffer> doc_keys;         // each document's rarest feature (keyed rows)
    int previous_key = -1;
    // The codebook searched now (one at a time: at edge 1024 fp32 it takes 120 GiB).
    std::shared_ptr<Buffer> weights, norms;
    int codebook_key = -1;
    CodebookView cb;
    std::map<std::string, Measurement> results;
    for (size_t index : run_order) {
      const Variant& var = variants[index];
      Measurement& r = results[var.name];
      const size_t weight_bytes = static_cast<size_t>(WeightBytes(var.type)) * m * corpus.cols();
      if (codebook_key != var.codebook_key()) {
        weights.reset();
        norms.reset();
        codebook_key = -1;
        r.note = SkipNoteUnlessFree(weight_bytes + 4 * m, "needs", stream.ordinal());
        if (!r.note.empty()) continue;
        auto w = Buffer::Allocate(MemoryKind::kDevice, weight_bytes, stream.ordinal());
        if (!w.ok()) {
          r.note = "skipped: " + std::string(w.status().message());
          continue;
        }
        weights = *w;
        norms = Buffer::Allocate(MemoryKind::kDevice, 4 * m, stream.ordinal()).value();
        cb = CodebookView();
        cb.nodes = m;
        cb.features = corpus.cols();
        cb.type = var.type;
        cb.layout = LayoutFor(var.algorithm);
        cb.weights = weights->data();
        cb.sq_norms = static_cast<float*>(norms->data());
        CHECK_OK(FillRandomCodebook(stream, cb, /*seed=*/2026, d_scale));
        CHECK_OK(stream.Synchronize());
        if (a.fixed_costs && fixed_costs_edge != edge && cb.type == WeightType::kFloat32 &&
            cb.layout == CodebookLayout::kFeatureMajor) {
          fixed_costs += FixedCostRows(a, stream, corpus, cb, edge);  // before a trained update changes it
          fixed_costs_edge = edge;
        }
        if (var.trained) {
          // One batch update with every document at its topic's patch.
          if (topic_bmu == nullptr) {
            topic_bmu = Upload(TopicNodes(topics, n, shape.topic_grid_width, shape.topic_grid_height, edge), stream);
          }
          const GridShape grid{edge, edge, Topology::kPlanar};
          const double patch = std::max(1.0, static_cast<double>(edge) / shape.topic_grid_width);
          CHECK_OK(BatchUpdate(stream, docs.csc(), static_cast<const int32_t*>(topic_bmu->data()), grid,
                               BoxBlurForRadius(patch), cb));
          CHECK_OK(stream.Synchronize());
        }
        codebook_key = var.codebook_key();
      }
      if (var.algorithm == BmuAlgorithm::kCusparseRowOrder || var.algorithm == BmuAlgorithm::kCusparseColOrder) {
        const size_t need = (size_t{1} << 30) + 64 * static_cast<size_t>(n) + (size_t{256} << 20);
        r.note = SkipNoteUnlessFree(need, "scratch needs", stream.ordinal());
        if (!r.note.empty()) continue;
      }
      SomWorkspace ws;
      const BmuTuning tuning = var.tuning();
      const int key = var.reference_key();
      BmuHints hints;
      if (var.sorted) {
        if (reference.count(key) == 0) {
          r.note = "skipped: no feature-major BMUs to sort by";
          continue;
        }
        if (previous_key != key) {
          previous = Upload(reference[key].bmu, stream);
          previous_key = key;
        }
        hints.previous_bmu = static_cast<const int32_t*>(previous->data());
        if (var.doc_key) {
          if (doc_keys == nullptr) {
            doc_keys = Buffer::Allocate(MemoryKind::kDevice, 4 * n).value();
            CHECK_OK(RarestFeatureKeys(stream, docs, static_cast<int32_t*>(doc_keys->data())));
          }
          hints.document_key = static_cast<const int32_t*>(doc_keys->data());
        }
      }
      ResetDevicePeak(stream.ordinal());
      const size_t before = GetDeviceMemoryStats(stream.ordinal()).current_bytes;
      Clock::time_point t = Clock::now();
      absl::Status st = FindBmus(stream, var.algorithm, docs, cb, out, &ws, tuning, hints);
      if (st.ok()) st = stream.Synchronize();
      const double warm = SecondsSince(t);
      if (!st.ok()) {
        r.note = "failed: " + std::string(st.message());
        continue;
      }
      std::vector<double> times;
      const int reps = warm > 2.0 ? 1 : a.reps;
      BmuOutput timed_out = out;
      if (var.screen) timed_out.exact_rescans = &r.rescans;
      for (int k = 0; k < reps; ++k) {
        t = Clock::now();
        CHECK_OK(FindBmus(stream, var.algorithm, docs, cb, timed_out, &ws, tuning, hints));
        CHECK_OK(stream.Synchronize());
        times.push_back(SecondsSince(t));
      }
      const DeviceMemoryStats stats = GetDeviceMemoryStats(stream.ordinal());
      r.ran = true;
      r.seconds = Median(times);
      r.peak_gib = stats.peak_bytes / kGiB;
      r.scratch_gib = (stats.peak_bytes - before) / kGiB;
      HostResult host = ToHost(out, n, stream);
      if (var.reference()) {
        r.agree = 1.0;
        r.bits = "ref";
        // The reference against the CPU backend on a prefix (the codebook is
        // copied to the host: only where it fits comfortably).
        const int64_t count = std::min(n, a.cpu_check_docs);
        if (count > 0 && weight_bytes <= (size_t{16} << 30)) {
          Clock::time_point c = Clock::now();
          const int64_t diff = CpuCheck(corpus, count, cb, host, stream);
          char line[160];
          std::snprintf(line, sizeof line, "%s vs the CPU backend, first %lld documents: %s (%.1f s)",
                        var.name.c_str(), static_cast<long long>(count),
                        diff == 0 ? "bit-identical" : (std::to_string(diff) + " differ").c_str(), SecondsSince(c));
          cpu_check[key] = line;
          if (diff != 0) r.bits = "ref, CPU!";
        }
        reference[key] = std::move(host);
      } else if (reference.count(key) != 0) {
        const HostResult& ref = reference[key];
        int64_t same = 0;
        for (int64_t d = 0; d < n; ++d) same += host.bmu[d] == ref.bmu[d];
        r.agree = static_cast<double>(same) / n;
        if (var.algorithm == BmuAlgorithm::kFeatureMajor || var.algorithm == BmuAlgorithm::kNodeMajor) {
          const int64_t diff = CountDifferent(host, ref, n);
          r.bits = diff == 0 ? "same" : std::to_string(diff) + " diff";
        }
      }
    }
    weights.reset();
    norms.reset();
    for (const Variant& var : variants) {
      const Measurement& r = results[var.name];
      if (!r.ran) {
        std::printf("%-6d %-9lld %-38s %s\n", edge, static_cast<long long>(n), var.name.c_str(), r.note.c_str());
        continue;
      }
      char agree[16] = "-";
      if (r.agree >= 0) std::snprintf(agree, sizeof agree, "%.4f", r.agree);
      char rescans[48] = "";
      if (r.rescans >= 0) std::snprintf(rescans, sizeof rescans, "  exact rescans %.2f%%", 100.0 * r.rescans / n);
      std::printf("%-6d %-9lld %-38s %10.2f %12.2f %14.2f %9.2f %9.3f %8s %10s%s\n", edge, static_cast<long long>(n),
                  var.name.c_str(), 1e3 * r.seconds, 1e3 * r.seconds * 1e6 / n, r.seconds * kMedlineDocs / n,
                  r.peak_gib, r.scratch_gib, agree, r.bits.c_str(), rescans);
    }
    for (const auto& [key, line] : cpu_check) std::printf("  edge %d: %s\n", edge, line.c_str());
    auto ratio = [&](const char* slow, const char* fast) {
      const Measurement &s = results[slow], &f = results[fast];
      return s.ran && f.ran ? s.seconds / f.seconds : 0.0;
    };
    if (!a.issue16_only) {
      std::printf("  edge %d speed-ups of feature-major: %.2fx over node-major (fp32), %.2fx (fp16); "
                  "%.2fx over cusparse-row, %.2fx over cusparse-col (fp32); fp16 vs fp32 feature-major %.2fx\n",
                  edge, ratio("node-major fp32", "feature-major fp32"), ratio("node-major fp16", "feature-major fp16"),
                  ratio("cusparse-row fp32", "feature-major fp32"), ratio("cusparse-col fp32", "feature-major fp32"),
                  ratio("feature-major fp32", "feature-major fp16"));
      std::printf("  edge %d: fp16 feature-major %.2fx over cusparse-row (fp32, the only precision it takes); "
                  "warp kernel %.2fx over the tiled kernel (fp32)\n",
                  edge, ratio("cusparse-row fp32", "feature-major fp16"),
                  ratio("feature-major fp32 tiled", "feature-major fp32"));
    }
    // Issue 16: every warp-kernel row against cusparse-row (goal: >= 1.5x
    // from edge 64, >= 2.6x at 256; cuSPARSE's time does not depend on the
    // weights, so trained rows use the random codebook's cusparse-row), and
    // against the default form on the same codebook and document order
    // (trained rows: sorted, the trainer's default).
    std::printf("  edge %d issue 16 (>= 1.5x cusparse-row from 64, >= 2.6x at 256):\n", edge);
    std::printf("    %-38s %12s %14s %16s %10s\n", "variant", "ms/1M docs", "vs cusparse", "vs default form",
                "bits");
    double best = 0;
    std::string best_name = "-";
    for (const Variant& var : variants) {
      if (var.algorithm != BmuAlgorithm::kFeatureMajor || var.tiled || var.depth > 0 || var.lanes > 0 ||
          (var.group > 0 && var.spans == 0)) {
        continue;
      }
      const Measurement& r = results[var.name];
      if (!r.ran) continue;
      const double x = ratio("cusparse-row fp32", var.name.c_str());
      // Against the default form on the same codebook and document order.
      const std::string t = var.type == WeightType::kFloat32 ? "fp32" : "fp16";
      const std::string base = var.trained ? "trained feature-major " + t + " sorted" : "feature-major " + t;
      const double y = ratio(base.c_str(), var.name.c_str());
      std::printf("    %-38s %12.2f %13.2fx %15.2fx %10s\n", var.name.c_str(), 1e3 * r.seconds * 1e6 / n, x, y,
                  r.bits.c_str());
      if (x > best && r.bits != "ref, CPU!" && r.bits.find("diff") == std::string::npos) {
        best = x;
        best_name = var.name;
      }
    }
    std::printf("  edge %d best bit-identical: %s %.2fx over cusparse-row\n", edge, best_name.c_str(), best);
    std::fflush(stdout);
  }
  if (a.fixed_costs) {
    std::printf("%s%-6s %-9s %-72s %12s\n%s", kFixedCostsHeader, "edge", "docs", "variant", "ms/1M docs",
                fixed_costs.empty() ? "  (no fp32 feature-major row ran)\n" : fixed_costs.c_str());
    std::fflush(stdout);
  }
}

// Issue 37 diagnostic (--fixed_costs): what the register-span kernel (the
// trainer's defaults) spends per (document, node group) apart from the
// feature sums — the header loads (order -> offsets), scoring the group's
// nodes from their norms, the warp's top-2 merge, the partials and their
// merge — timed on as many empty documents as the BMU rows search (random
// fp32 codebook). Visited in a random order (as documents in training:
// scattered offsets) or in storage order (sequential offsets). Then the
// same number of copies of one corpus document with the mean feature count:
// the sums with every column slice in L1 (perfect locality). A BMU row's time
// minus the first is what its sums cost; minus the second, what its cache
// misses cost.
// The --fixed_costs rows of one edge on `cb` (the random fp32 feature-major
// codebook of that edge), as text.
std::string FixedCostRows(const Args& a, const Stream& stream, const SparseBinaryMatrix& corpus, const CodebookView& cb,
                          int edge) {
  std::string text;
  auto print = [&text](const char* format, auto... args) {
    char line[256];
    std::snprintf(line, sizeof line, format, args...);
    text += line;
  };
  const int64_t m = int64_t{edge} * edge;
  const int64_t n = std::max<int64_t>(4096, std::min<int64_t>({a.max_docs, corpus.rows(), a.budget / m}));
  // Empty documents, and copies of the first document with the mean count.
  const int64_t mean = (corpus.nnz() + corpus.rows() / 2) / std::max<int64_t>(1, corpus.rows());
  int64_t pick = 0;
  while (pick + 1 < corpus.rows() && corpus.offsets()[pick + 1] - corpus.offsets()[pick] != mean) ++pick;
  const int64_t k = corpus.offsets()[pick + 1] - corpus.offsets()[pick];
  std::vector<int64_t> offsets(n + 1, 0), copy_offsets(n + 1, 0);
  std::vector<int32_t> copy_indices(std::max<int64_t>(1, n * k), 0);
  for (int64_t d = 0; d < n; ++d) {
    copy_offsets[d + 1] = (d + 1) * k;
    for (int64_t j = 0; j < k; ++j) copy_indices[d * k + j] = corpus.indices()[corpus.offsets()[pick] + j];
  }
  DocumentParts parts;
  parts.tiles = false;
  parts.host_offsets = false;
  CsrView view;
  view.rows = n;
  view.cols = corpus.cols();
  view.offsets = offsets.data();
  view.indices = copy_indices.data();
  auto empty_docs = DocumentSet::Create(view, stream, parts);
  CHECK_OK(empty_docs.status());
  view.offsets = copy_offsets.data();
  auto copy_docs = DocumentSet::Create(view, stream, parts);
  CHECK_OK(copy_docs.status());
  // "Previous BMUs" that scatter the visiting order over the documents.
  std::vector<int32_t> scatter(n);
  for (int64_t d = 0; d < n; ++d) scatter[d] = static_cast<int32_t>((static_cast<uint64_t>(d) * 2654435761u) % m);
  auto previous = Upload(scatter, stream);
  auto bmu = Buffer::Allocate(MemoryKind::kDevice, 4 * n).value();
  auto second = Buffer::Allocate(MemoryKind::kDevice, 4 * n).value();
  auto score = Buffer::Allocate(MemoryKind::kDevice, 4 * n).value();
  const BmuOutput out{static_cast<int32_t*>(bmu->data()), static_cast<int32_t*>(second->data()),
                      static_cast<float*>(score->data())};
  for (int form : {0, 1, 2}) {  // empty in random order, empty in storage order, copies in random order
    const bool random_order = form != 1;
    const DocumentSet& docs = form == 2 ? *copy_docs : *empty_docs;
    BmuHints hints;
    if (random_order) hints.previous_bmu = static_cast<const int32_t*>(previous->data());
    SomWorkspace ws;
    std::vector<double> times;
    for (int rep = 0; rep <= a.reps; ++rep) {  // the first: warm-up
      Clock::time_point t = Clock::now();
      CHECK_OK(FindBmus(stream, BmuAlgorithm::kFeatureMajor, docs, cb, out, &ws, BmuTuning(), hints));
      CHECK_OK(stream.Synchronize());
      if (rep > 0) times.push_back(SecondsSince(t));
    }
    const std::string name = (form == 2 ? "copies of a " + std::to_string(k) + "-feature document, " : std::string()) +
                             (random_order ? "random order (sort included)" : "storage order");
    print("%-6d %-9lld %-72s %12.2f\n", edge, static_cast<long long>(n), name.c_str(), 1e3 * Median(times) * 1e6 / n);
  }
  return text;
}

// --fixed_costs without the BMU rows: the random fp32 codebook built here
// (with the BMU rows, BenchBmu hands over the one it builds).
void BenchFixedCosts(const Args& a, const Stream& stream, const SparseBinaryMatrix& corpus, const float* d_scale) {
  std::printf("%s%-6s %-9s %-72s %12s\n", kFixedCostsHeader, "edge", "docs", "variant", "ms/1M docs");
  for (int edge : a.edges) {
    const int64_t m = int64_t{edge} * edge;
    auto weights = Buffer::Allocate(MemoryKind::kDevice, sizeof(float) * m * corpus.cols(), stream.ordinal());
    if (!weights.ok()) {
      std::printf("%-6d skipped: %s\n", edge, std::string(weights.status().message()).c_str());
      continue;
    }
    auto norms = Buffer::Allocate(MemoryKind::kDevice, 4 * m, stream.ordinal()).value();
    CodebookView cb;
    cb.nodes = m;
    cb.features = corpus.cols();
    cb.type = WeightType::kFloat32;
    cb.layout = CodebookLayout::kFeatureMajor;
    cb.weights = (*weights)->data();
    cb.sq_norms = static_cast<float*>(norms->data());
    CHECK_OK(FillRandomCodebook(stream, cb, /*seed=*/2026, d_scale));
    std::printf("%s", FixedCostRows(a, stream, corpus, cb, edge).c_str());
    std::fflush(stdout);
  }
}

// One end-to-end training of the corpus with `o`, printed per epoch and per
// phase.
void TrainOnce(const SparseBinaryMatrix& corpus, const std::string& label, TrainOptions o) {
  const bool screened = o.bmu_tuning.screen_fp16 || (o.bmu_tuning.screen_auto_max_nodes > 0 &&
                                                     o.grid.nodes() <= o.bmu_tuning.screen_auto_max_nodes);
  std::printf("\n  [%s] quality on %s, BMU %s\n", label.c_str(), o.quality_on_device ? "the device" : "the host",
              screened ? "screened (fp16 bounds + exact candidates)" : "exact kernel");
  if (o.group_bounds.enabled) {
    std::printf("  [%s] group bounds: %d nodes per group, bounded from radius %.3g on (<= 0: the small radius)\n",
                label.c_str(), o.group_bounds.strip_nodes, o.group_bounds.max_radius);
  }
  // Process CPU time (all threads) between progress calls: an epoch's BMU
  // search, quality and update (the first also the set-up); on the CPU
  // backend a load-independent measure of each epoch's work.
  auto last_cpu = std::make_shared<std::clock_t>(std::clock());
  o.progress = [&corpus, last_cpu](const EpochReport& r) {
    const std::clock_t now = std::clock();
    const double epoch_cpu = static_cast<double>(now - *last_cpu) / CLOCKS_PER_SEC;
    *last_cpu = now;
    char bounds[128] = "";
    if (r.bmu_bound_mode != 0) {
      std::snprintf(bounds, sizeof bounds, "  %s: pairs searched %.2f%% docs skipped %.2f%%",
                    r.bmu_bound_mode == 1 ? "bounds set" : "bounded",
                    r.bmu_pairs > 0 ? 100.0 * r.bmu_pairs_searched / r.bmu_pairs : 100.0,
                    100.0 * r.bmu_documents_skipped / corpus.rows());
    }
    std::printf("  epoch %2d radius %5.2f (box %2d)  QE %.4f (%.1e)  TE %.3f  BMU %.3fs quality %.3fs update %.3fs "
                "epoch %.3fs (process CPU %.3fs)  exact rescans %.2f%%%s\n",
                r.epoch, r.radius, r.box_half_width, r.qe, r.qe_relative_change, r.topographic_error, r.bmu_seconds,
                r.quality_seconds, r.update_seconds, r.seconds, epoch_cpu, 100.0 * r.bmu_exact_rescans / corpus.rows(),
                bounds);
    std::fflush(stdout);
  };
  const bool cuda = o.backend == Backend::kCuda;
  if (cuda) ResetDevicePeak(0);
  const std::clock_t cpu0 = std::clock();
  auto result = TrainSom(corpus, o);
  const double cpu_seconds = static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
  CHECK_OK(result.status());
  double epochs = 0, bmu = 0, quality = 0, update = 0;
  for (const EpochReport& r : result->history) {
    epochs += r.seconds;
    bmu += r.bmu_seconds;
    quality += r.quality_seconds;
    update += r.update_seconds;
  }
  std::printf("  [%s] %s after %d epochs: total %.2f s = init (PCA) %.2f + setup (upload, CSC) %.2f + epochs %.2f "
              "(BMU %.2f, quality %.2f, update %.2f, other %.2f) + final pass and download %.2f; final QE %.4f, "
              "TE %.4f, dead units %.3f; peak device memory %.2f GiB\n",
              label.c_str(), result->converged ? "converged" : "stopped at max_epochs", result->epochs,
              result->total_seconds, result->init_seconds, result->setup_seconds, epochs, bmu, quality, update,
              epochs - bmu - quality - update, result->final_seconds, result->final_quality.qe_euclidean,
              result->final_quality.topographic_error, result->final_quality.dead_unit_fraction,
              cuda ? GetDeviceMemoryStats(0).peak_bytes / kGiB : 0.0);
  std::printf("  [%s] process CPU time %.2f s\n", label.c_str(), cpu_seconds);
  // Bit-level comparison between variants (tunings must not change a bit):
  // FNV-1a of the codebook and norms, QE and TE in full.
  uint64_t hash = 1469598103934665603ull;
  auto mix = [&hash](const void* p, size_t bytes) {
    for (size_t k = 0; k < bytes; ++k) hash = (hash ^ static_cast<const unsigned char*>(p)[k]) * 1099511628211ull;
  };
  const SomModel& model = result->model;
  mix(model.weights_f32.data(), 4 * model.weights_f32.size());
  mix(model.weights_f16.data(), 2 * model.weights_f16.size());
  mix(model.sq_norms.data(), 4 * model.sq_norms.size());
  std::printf("  [%s] codebook fnv1a %016llx, final QE %.17g, TE %.17g, epochs %d\n", label.c_str(),
              static_cast<unsigned long long>(hash), result->final_quality.qe_euclidean,
              result->final_quality.topographic_error, result->epochs);
  std::fflush(stdout);
}

// --train_cpu: the --train_variants trainings on the CPU backend.
void BenchTrainingCpu(const Args& a) {
  std::printf("\nEnd-to-end training on the CPU backend (%d threads): %dx%d planar, fp32, synthetic MEDLINE shape, "
              "%lld documents\n",
              CpuThreads(), a.train_edge, a.train_edge, static_cast<long long>(a.train_docs));
  SparseBinaryMatrix corpus = GenerateSyntheticCorpus(MedlineShape(a.train_docs));
  std::printf("  corpus: %lld x %lld, %lld non-zeros\n", static_cast<long long>(corpus.rows()),
              static_cast<long long>(corpus.cols()), static_cast<long long>(corpus.nnz()));
  TrainOptions o;
  o.grid = GridShape{a.train_edge, a.train_edge, Topology::kPlanar};
  o.backend = Backend::kCpu;
  o.max_epochs = a.train_epochs;
  o.radius_decay_epochs = std::min(10, a.train_epochs);
  for (const std::string& variant : a.train_variants) {
    TrainOptions v = o;
    ApplyTrainVariant(variant, v);
    v.quality_on_device = false;
    TrainOnce(corpus, variant, v);
  }
}

void BenchTraining(const Args& a) {
  std::printf("\nEnd-to-end training: %dx%d planar, %s codebook, %s BMU, synthetic MEDLINE shape, %lld documents\n",
              a.train_edge, a.train_edge, a.train_fp16 ? "fp16" : "fp32",
              a.train_cusparse ? "cusparse-row" : "feature-major", static_cast<long long>(a.train_docs));
  Clock::time_point t = Clock::now();
  SparseBinaryMatrix corpus = GenerateSyntheticCorpus(MedlineShape(a.train_docs));
  std::printf("  corpus generated on the host in %.1f s: %lld x %lld, %lld non-zeros (not counted below)\n", SecondsSince(t),
              static_cast<long long>(corpus.rows()), static_cast<long long>(corpus.cols()),
              static_cast<long long>(corpus.nnz()));
  TrainOptions o;
  o.grid = GridShape{a.train_edge, a.train_edge, Topology::kPlanar};
  o.backend = Backend::kCuda;
  o.weight_type = a.train_fp16 ? WeightType::kFloat16 : WeightType::kFloat32;
  if (a.train_cusparse) o.bmu_algorithm = BmuAlgorithm::kCusparseRowOrder;
  o.max_epochs = a.train_epochs;
  o.radius_decay_epochs = std::min(10, a.train_epochs);
  // One-time costs (cuBLAS opened for the PCA, CUDA modules loaded, pools
  // grown) paid by a short training first, so the variants below compare
  // like with like; printed, since a cold process pays them once.
  {
    Clock::time_point w = Clock::now();
    SparseBinaryMatrix small = GenerateSyntheticCorpus(MedlineShape(100000));
    TrainOptions warm = o;
    warm.max_epochs = 2;
    warm.radius_decay_epochs = 2;
    const double generated = SecondsSince(w);
    w = Clock::now();
    auto r = TrainSom(small, warm);
    CHECK_OK(r.status());
    std::printf("  warm-up: 2 epochs on 100000 documents in %.2f s (init %.2f, setup %.2f; corpus %.2f s not counted)\n",
                SecondsSince(w), r->init_seconds, r->setup_seconds, generated);
  }
  // The set-up's parts: the CSR upload alone, then with the device CSC.
  {
    auto stream = Stream::Create(Backend::kCuda, 0);
    CHECK_OK(stream.status());
    for (bool csc : {false, true}) {
      Clock::time_point w = Clock::now();
      auto set = DocumentSet::Create(corpus.view(), *stream, DocumentParts{false, csc, /*host_offsets=*/false});
      CHECK_OK(set.status());
      std::printf("  set-up parts: DocumentSet::Create (CSR upload%s) %.3f s\n", csc ? " + device CSC" : "",
                  SecondsSince(w));
    }
    // The CSR indices (1.3 GB) from pageable memory: one cudaMemcpy against
    // the pinned double-buffered copy the set-up uses now (staged_copy.h).
    const size_t bytes = sizeof(int32_t) * static_cast<size_t>(corpus.nnz());
    auto dst = Buffer::Allocate(MemoryKind::kDevice, std::max<size_t>(4, bytes));
    CHECK_OK(dst.status());
    {
      Clock::time_point w = Clock::now();
      CHECK_OK(CopyBytes((*dst)->data(), MemoryKind::kDevice, corpus.indices().data(), MemoryKind::kHost, bytes,
                         *stream));
      const double direct = SecondsSince(w);
      w = Clock::now();
      CHECK_OK(StagedCopyToDevice((*dst)->data(), corpus.indices().data(), bytes, *stream));
      const double staged = SecondsSince(w);
      std::vector<int32_t> back(static_cast<size_t>(corpus.nnz()));
      w = Clock::now();
      CHECK_OK(StagedCopyToHost(back.data(), (*dst)->data(), bytes, *stream));
      const double down = SecondsSince(w);
      std::printf("  set-up parts: %.2f GB of indices to the device: cudaMemcpy (pageable) %.3f s, staged %.3f s; "
                  "back to the host (staged) %.3f s, %s\n",
                  bytes / 1e9, direct, staged, down, back == corpus.indices() ? "same bytes" : "BYTES DIFFER");
    }
  }
  // Issue 37, side by side on the same corpus: "host-quality" is the trainer
  // before it (QE/TE downloaded and measured on the host, exact BMU kernel),
  // "device-quality" measures QE/TE on the device, "screened" adds the
  // screened BMU search, "screened-grouped" its grouped form (1024 positions);
  // options after colons change the radius decay or the BMU tuning
  // (ApplyTrainVariant): compare final QE and TE with the others'.
  for (const std::string& variant : a.train_variants) {
    TrainOptions v = o;
    ApplyTrainVariant(variant, v);
    TrainOnce(corpus, variant, v);
  }
}

}  // namespace
}  // namespace som
}  // namespace tessera

int main(int argc, char** argv) {
  using namespace tessera;
  using namespace tessera::som;
  Args a;
  if (!Parse(argc, argv, a)) {
    std::fprintf(stderr,
                 "usage: som_gpu_bench [--edges=32,...] [--budget=N] [--max_docs=N] [--reps=N] [--no_train] "
                 "[--train_docs=N] [--train_edge=E] [--train_fp16] [--train_bmu=cusparse-row] [--depths=1,4,8,16] [--groups=256,2048] [--lanes=8] [--no_bmu] [--train_epochs=N] "
                 "[--issue16] [--fixed_costs] [--cpu_check_docs=N] [--train_cpu] [--span_rows=S:R:G[:W[:K]],...] "
                 "[--train_variants=host-quality,device-quality,screened[:dN:wN:gN:sN:rN:auto:gbound[N]:gall],...]\n");
    return 2;
  }
  if (a.train_cpu) {
    BenchTrainingCpu(a);
    return 0;
  }
  const DeviceRegistry& reg = DeviceRegistry::Get();
  if (!reg.cuda_available()) {
    std::printf("som_gpu_bench: no GPU (%s); nothing to measure.\n", reg.cuda_unavailable_reason().c_str());
    return 0;
  }
  std::printf("device: %s\n", reg.Describe().c_str());
  auto stream = Stream::Create(Backend::kCuda, 0);
  CHECK_OK(stream.status());
  Clock::time_point t = Clock::now();
  std::vector<int32_t> topics;
  SparseBinaryMatrix corpus = GenerateSyntheticCorpus(MedlineShape(a.max_docs), &topics);
  std::printf("benchmark corpus: %lld x %lld, %lld non-zeros (%.2f per document), generated in %.1f s\n",
              static_cast<long long>(corpus.rows()), static_cast<long long>(corpus.cols()),
              static_cast<long long>(corpus.nnz()), static_cast<double>(corpus.nnz()) / corpus.rows(), SecondsSince(t));
  std::vector<int64_t> df = FeatureCounts(corpus);
  std::vector<float> scale(corpus.cols());
  for (size_t v = 0; v < scale.size(); ++v) scale[v] = static_cast<float>(2.0 * df[v] / corpus.rows());
  // Uploaded once: BenchBmu's random codebooks and BenchFixedCosts' (which,
  // with the BMU rows, reuses BenchBmu's instead of filling its own).
  auto d_scale = Upload(scale, *stream);
  if (a.bmu) BenchBmu(a, *stream, corpus, static_cast<const float*>(d_scale->data()), topics);
  if (a.fixed_costs && !a.bmu) BenchFixedCosts(a, *stream, corpus, static_cast<const float*>(d_scale->data()));
  if (a.train) BenchTraining(a);
  return 0;
}

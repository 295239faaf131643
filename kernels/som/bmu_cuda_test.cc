// CUDA BMU search against the CPU backend and the brute force.
//
// Tolerances: the tiled CUDA kernels (feature-major and node-major) sum x.w in
// the same order as the CPU backend, so BMU, second-best and score must be
// identical on random fp32 and fp16 weights. The cuSPARSE baselines sum in
// their own order: on dyadic weights (exact arithmetic) they must agree
// exactly, ties included; on random weights the chosen node's exact distance
// must equal the brute-force minimum within 1e-4 relative.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "common/buffer.h"
#include "common/testing/gpu_test.h"
#include "kernels/som/bmu.h"
#include "kernels/som/codebook.h"
#include "kernels/som/device_test_util.h"
#include "kernels/som/test_util.h"

namespace tessera {
namespace som {
namespace {

using testutil::HostCodebook;
using testutil::ToDevice;
using testutil::ToHost;
using testutil::HostDocs;

struct Result {
  std::vector<int32_t> bmu, second;
  std::vector<float> score;
};

Result RunCpu(const HostDocs& docs, HostCodebook& cb) {
  Result r;
  r.bmu.resize(docs.rows());
  r.second.resize(docs.rows());
  r.score.resize(docs.rows());
  cpu::FindBmus(docs.view(), cb.view(), BmuOutput{r.bmu.data(), r.second.data(), r.score.data()});
  return r;
}

// A host codebook on the device: its buffers and the view over them.
struct DeviceCodebook {
  std::shared_ptr<Buffer> weights, norms;
  CodebookView view;
};

DeviceCodebook UploadCodebook(const HostCodebook& cb, const Stream& stream) {
  DeviceCodebook d;
  d.weights = cb.type == WeightType::kFloat32 ? ToDevice(cb.f32, stream) : ToDevice(cb.f16, stream);
  d.norms = ToDevice(cb.norms, stream);
  d.view.nodes = cb.nodes;
  d.view.features = cb.features;
  d.view.type = cb.type;
  d.view.layout = cb.layout;
  d.view.weights = d.weights->data();
  d.view.sq_norms = static_cast<float*>(d.norms->data());
  return d;
}

// previous: per document, BMUs handed to the search as BmuHints::previous_bmu
// (null: none); alias: in the output bmu buffer itself, as the trainer does.
// rescans: BmuOutput::exact_rescans (may be null). keys: BmuHints::document_key
// (null: none).
Result RunCuda(const HostDocs& docs, const HostCodebook& cb, BmuAlgorithm algo, const Stream& stream,
               BmuTuning tuning = BmuTuning(), const std::vector<int32_t>* previous = nullptr, bool alias = false,
               int64_t* rescans = nullptr, const std::vector<int32_t>* keys = nullptr) {
  auto set = DocumentSet::Create(docs.view(), stream);
  EXPECT_TRUE(set.ok()) << set.status();
  const DeviceCodebook device_cb = UploadCodebook(cb, stream);
  const CodebookView& view = device_cb.view;
  const size_t n = docs.rows();
  auto bmu = Buffer::Allocate(MemoryKind::kDevice, 4 * n).value();
  auto second = Buffer::Allocate(MemoryKind::kDevice, 4 * n).value();
  auto score = Buffer::Allocate(MemoryKind::kDevice, 4 * n).value();
  BmuHints hints;
  std::shared_ptr<Buffer> previous_buffer;
  if (previous != nullptr) {
    previous_buffer = alias ? bmu : ToDevice(*previous, stream);
    if (alias) {
      EXPECT_TRUE(
          CopyBytes(bmu->data(), MemoryKind::kDevice, previous->data(), MemoryKind::kHost, 4 * n, stream).ok());
    }
    hints.previous_bmu = static_cast<const int32_t*>(previous_buffer->data());
  }
  std::shared_ptr<Buffer> key_buffer;
  if (keys != nullptr) {
    key_buffer = ToDevice(*keys, stream);
    hints.document_key = static_cast<const int32_t*>(key_buffer->data());
  }
  SomWorkspace ws;
  absl::Status st = FindBmus(stream, algo, *set, view,
                             BmuOutput{static_cast<int32_t*>(bmu->data()), static_cast<int32_t*>(second->data()),
                                       static_cast<float*>(score->data()), rescans},
                             &ws, tuning, hints);
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_TRUE(stream.Synchronize().ok());
  Result r;
  r.bmu = ToHost<int32_t>(bmu, n, stream);
  r.second = ToHost<int32_t>(second, n, stream);
  r.score = ToHost<float>(score, n, stream);
  return r;
}

void ExpectSame(const Result& got, const Result& ref) {
  ASSERT_EQ(got.bmu.size(), ref.bmu.size());
  for (size_t d = 0; d < ref.bmu.size(); ++d) {
    ASSERT_EQ(got.bmu[d], ref.bmu[d]) << "doc " << d;
    ASSERT_EQ(got.second[d], ref.second[d]) << "doc " << d;
    ASSERT_EQ(got.score[d], ref.score[d]) << "doc " << d;
  }
}

// Both CUDA kernels (warp: register accumulators per node group; tiled:
// shared-memory accumulators per 32-document tile), map sizes around the
// 128-node warp span and 512-node chunk (sizes not divisible by 4 take the
// scalar load path), several warp group sizes (several groups per map), more
// documents than one tile, documents longer than 32 features, empty ones.
TEST(BmuCudaParity, TiledKernelsMatchCpuBitForBit) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  std::mt19937 rng(21);
  // 0: warp kernel, 4 nodes per lane, 512-node groups; 1: 128-node groups;
  // 2: tiled kernel; 3: warp kernel, 8 nodes per lane, 256-node groups;
  // 4: tiled kernel loading 16 tile entries ahead.
  for (int kernel = 0; kernel < 5; ++kernel) {
    BmuTuning tuning;
    tuning.tiled_kernel = kernel == 2 || kernel == 4;
    tuning.tiled_load_depth = kernel == 4 ? 16 : 8;
    tuning.warp_group_nodes = kernel == 0 ? 512 : kernel == 3 ? 256 : 128;
    tuning.warp_lane_nodes = kernel == 3 ? 8 : 4;
    for (int64_t nodes : {1, 7, 512, 513, 1028, 1030, 4096}) {
      for (int max_nnz : {12, 300}) {
        SCOPED_TRACE(testing::Message() << "kernel " << kernel << " nodes " << nodes << " max_nnz " << max_nnz);
        HostDocs docs = testutil::RandomDocs(333, 700, max_nnz, rng);
        HostCodebook fm = testutil::RandomCodebook(nodes, 700, rng, 0.0f, 0.3f);
        Result ref = RunCpu(docs, fm);
        ExpectSame(RunCuda(docs, fm, BmuAlgorithm::kFeatureMajor, stream, tuning), ref);
        HostCodebook nm = testutil::WithLayout(fm, CodebookLayout::kNodeMajor);
        ExpectSame(RunCuda(docs, nm, BmuAlgorithm::kNodeMajor, stream, tuning), ref);
        HostCodebook half = testutil::ToHalf(fm);
        Result href = RunCpu(docs, half);
        ExpectSame(RunCuda(docs, half, BmuAlgorithm::kFeatureMajor, stream, tuning), href);
        HostCodebook half_nm = testutil::WithLayout(half, CodebookLayout::kNodeMajor);
        ExpectSame(RunCuda(docs, half_nm, BmuAlgorithm::kNodeMajor, stream, tuning), href);
      }
    }
  }
}

// The warp kernel visiting documents in the order of their previous BMUs
// (issue 16; the trainer's default) against the CPU backend, bit for bit:
// previous BMUs some out of range (sorted last), in a separate buffer and
// aliased with the output. Text-like documents (Zipf features, topics, some
// empty, some over 32 features), random non-zero weights, maps of 7x7 .. 64x64
// nodes (most not multiples of 512; 23x23 and 45x45 not multiples of 4: the
// scalar load path), fp32 and fp16, 128- and 512-node groups, 4 and 8 nodes
// per lane, feature-major and node-major.
TEST(BmuCudaParity, OrderedWarpKernelMatchesCpuBitForBit) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  std::mt19937 rng(16);
  for (int edge : {7, 23, 30, 45, 64}) {
    const int64_t nodes = int64_t{edge} * edge;
    HostDocs docs = testutil::ZipfTopicDocs(1001, 900, 12, 11, rng);
    HostCodebook fm = testutil::RandomCodebook(nodes, 900, rng, 0.01f, 0.3f);
    // Previous BMUs: the CPU answer for a perturbed codebook (what a previous
    // epoch looks like), with a few invalid entries.
    HostCodebook earlier = testutil::RandomCodebook(nodes, 900, rng, 0.01f, 0.3f);
    for (size_t k = 0; k < fm.f32.size(); ++k) earlier.f32[k] = 0.5f * (earlier.f32[k] + fm.f32[k]);
    earlier.UpdateNorms();
    std::vector<int32_t> previous = RunCpu(docs, earlier).bmu;
    for (size_t d = 0; d < previous.size(); d += 97) previous[d] = d % 2 == 0 ? -1 : static_cast<int32_t>(nodes + d);
    const HostCodebook half = testutil::ToHalf(fm);
    const Result ref = RunCpu(docs, fm);
    HostCodebook half_copy = half;
    const Result href = RunCpu(docs, half_copy);
    for (int lane_nodes : {4, 8}) {
      for (int64_t group : {128, 512}) {
        SCOPED_TRACE(testing::Message() << "edge " << edge << " lane_nodes " << lane_nodes << " group " << group);
        BmuTuning tuning;
        tuning.order_by_previous_bmu = true;
        tuning.warp_lane_nodes = lane_nodes;
        tuning.warp_group_nodes = group;
        ExpectSame(RunCuda(docs, fm, BmuAlgorithm::kFeatureMajor, stream, tuning, &previous), ref);
        ExpectSame(RunCuda(docs, fm, BmuAlgorithm::kFeatureMajor, stream, tuning, &previous, /*alias=*/true), ref);
        ExpectSame(RunCuda(docs, half, BmuAlgorithm::kFeatureMajor, stream, tuning, &previous), href);
        if (group == 128) {
          HostCodebook nm = testutil::WithLayout(fm, CodebookLayout::kNodeMajor);
          ExpectSame(RunCuda(docs, nm, BmuAlgorithm::kNodeMajor, stream, tuning, &previous), ref);
        }
      }
    }
    // Without previous BMUs the ordered tuning visits documents as stored.
    BmuTuning ordered;
    ordered.order_by_previous_bmu = true;
    ExpectSame(RunCuda(docs, fm, BmuAlgorithm::kFeatureMajor, stream, ordered), ref);
  }
}

// The register-span form of the warp kernel (BmuTuning::warp_register_spans,
// issue 16) against the CPU backend, bit for bit (BMU, second, score): 1, 2
// and 4 spans; 1 and 3 documents per warp; groups of one pass and of several
// (128 rounds up to a pass); visiting documents as stored and sorted by
// previous BMUs (aliased with the output, some invalid); fp32 and fp16. Maps
// of 7x7 .. 64x64 nodes: 49, 529 and 2025 are odd (scalar loads), 900 is a
// multiple of 4 but not of 8 (fp32 16-byte loads, fp16 scalar ones), 400 and
// 4096 multiples of 8 (16-byte loads; 400 ends in a partial pass). Text-like
// documents (Zipf features, topics, some empty, some over 32 features),
// random non-zero weights; then dyadic weights (exact sums, many ties) for
// the tie rule of the lane-local top-2.
TEST(BmuCudaParity, RegisterSpanWarpKernelMatchesCpuBitForBit) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  std::mt19937 rng(1616);
  for (int edge : {7, 20, 23, 30, 45, 64}) {
    const int64_t nodes = int64_t{edge} * edge;
    HostDocs docs = testutil::ZipfTopicDocs(777, 900, 12, 11, rng);
    HostCodebook fm = testutil::RandomCodebook(nodes, 900, rng, 0.01f, 0.3f);
    const HostCodebook half = testutil::ToHalf(fm);
    const Result ref = RunCpu(docs, fm);
    HostCodebook half_copy = half;
    const Result href = RunCpu(docs, half_copy);
    std::vector<int32_t> previous = ref.bmu;
    std::shuffle(previous.begin(), previous.end(), rng);  // an order unlike the stored one
    for (size_t d = 0; d < previous.size(); d += 53) previous[d] = d % 2 == 0 ? -1 : static_cast<int32_t>(nodes + d);
    for (int spans : {1, 2, 4}) {
      for (int rounds : {1, 3}) {
        for (int64_t group : {128, 1024}) {
          SCOPED_TRACE(testing::Message() << "edge " << edge << " spans " << spans << " rounds " << rounds << " group "
                                          << group);
          BmuTuning tuning;
          tuning.warp_register_spans = spans;
          tuning.warp_doc_rounds = rounds;
          tuning.warp_group_nodes = group;
          ExpectSame(RunCuda(docs, fm, BmuAlgorithm::kFeatureMajor, stream, tuning), ref);
          ExpectSame(RunCuda(docs, half, BmuAlgorithm::kFeatureMajor, stream, tuning), href);
          ExpectSame(RunCuda(docs, fm, BmuAlgorithm::kFeatureMajor, stream, tuning, &previous, /*alias=*/true), ref);
          ExpectSame(RunCuda(docs, half, BmuAlgorithm::kFeatureMajor, stream, tuning, &previous), href);
        }
      }
    }
  }
  for (int64_t nodes : {3, 600, 2048}) {
    SCOPED_TRACE(testing::Message() << "dyadic, nodes " << nodes);
    HostDocs docs = testutil::RandomDocs(700, 300, 20, rng);
    HostCodebook fm = testutil::DyadicCodebook(nodes, 300, rng, 3);
    const Result ref = RunCpu(docs, fm);
    for (int spans : {1, 4}) {
      BmuTuning tuning;
      tuning.warp_register_spans = spans;
      tuning.warp_doc_rounds = 2;
      ExpectSame(RunCuda(docs, fm, BmuAlgorithm::kFeatureMajor, stream, tuning), ref);
    }
  }
}

// Issue 37: the register-span kernel in blocks of 16, 24 and 32 warps
// (BmuTuning::warp_block_warps), documents visited by previous BMU (aliased
// with the output as in training, some invalid) and by (previous BMU,
// document key) or the key alone (BmuHints::document_key, some out of range),
// and with 40 rounds per warp (a partial block of rounds), against the CPU
// bit for bit; maps whose node count is a multiple of 4 (16-byte loads: the
// larger blocks) and not (the scalar path keeps 8 warps); the screened search
// with each of them.
TEST(BmuCudaParity, LargerBlocksAndOrdersMatchCpuBitForBit) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  std::mt19937 rng(3738);
  for (int edge : {23, 30, 64}) {
    const int64_t nodes = int64_t{edge} * edge;
    HostDocs docs = testutil::ZipfTopicDocs(2001, 900, 12, 11, rng);
    HostCodebook fm = testutil::RandomCodebook(nodes, 900, rng, 0.01f, 0.3f);
    const HostCodebook half = testutil::ToHalf(fm);
    const Result ref = RunCpu(docs, fm);
    HostCodebook half_copy = half;
    const Result href = RunCpu(docs, half_copy);
    // Previous BMUs in an order unlike the stored one, a few invalid.
    std::vector<int32_t> previous = ref.bmu;
    std::shuffle(previous.begin(), previous.end(), rng);
    for (size_t d = 0; d < previous.size(); d += 89) previous[d] = -1;
    // Document keys: random features, some out of range (sorted last).
    std::vector<int32_t> keys(previous.size());
    for (size_t d = 0; d < keys.size(); ++d) keys[d] = static_cast<int32_t>(rng() % 900);
    for (size_t d = 0; d < keys.size(); d += 71) keys[d] = d % 2 == 0 ? -5 : 900 + static_cast<int32_t>(d);
    for (int block_warps : {8, 16, 24, 32}) {
      for (int spans : {1, 2, 4}) {
        for (int form : {0, 1, 2}) {  // 0: by previous BMU, 1: + document key, 2: + 40 rounds per warp
          const std::vector<int32_t>* key = form >= 1 ? &keys : nullptr;
          SCOPED_TRACE(testing::Message() << "edge " << edge << " block warps " << block_warps << " spans " << spans
                                          << " form " << form);
          BmuTuning tuning;
          tuning.warp_block_warps = block_warps;
          tuning.warp_register_spans = spans;
          tuning.warp_doc_rounds = form == 2 ? 40 : 3;
          tuning.warp_group_nodes = spans == 1 ? 256 : 512;
          tuning.order_by_previous_bmu = true;
          // Previous BMUs aliased with the output, as the trainer hands them over.
          const auto run = [&](const HostCodebook& cb, const BmuTuning& t, const std::vector<int32_t>* prev) {
            return RunCuda(docs, cb, BmuAlgorithm::kFeatureMajor, stream, t, prev, /*alias=*/prev != nullptr,
                           /*rescans=*/nullptr, key);
          };
          ExpectSame(run(fm, tuning, &previous), ref);
          ExpectSame(run(half, tuning, &previous), href);
          if (form >= 1) {  // by the key alone (no previous BMUs: the first epoch)
            ExpectSame(run(fm, tuning, nullptr), ref);
          }
          if (form == 2) {  // the identity order, with 40 rounds and with 1
            BmuTuning plain = tuning;
            plain.order_by_previous_bmu = false;
            ExpectSame(RunCuda(docs, fm, BmuAlgorithm::kFeatureMajor, stream, plain), ref);
            plain.warp_doc_rounds = 1;
            ExpectSame(RunCuda(docs, half, BmuAlgorithm::kFeatureMajor, stream, plain), href);
          }
          if (spans == 4) {  // the screened search with the same block size and order
            BmuTuning screen = tuning;
            screen.screen_fp16 = true;
            ExpectSame(run(fm, screen, &previous), ref);
          }
        }
      }
    }
  }
}

// RarestFeatureKeys on the device equals the CPU backend's (the rarest
// feature per document, ties to the lowest index, `features` when empty).
TEST(BmuCudaParity, RarestFeatureKeysMatchCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  std::mt19937 rng(3739);
  HostDocs docs = testutil::ZipfTopicDocs(3001, 700, 10, 11, rng);
  DocumentParts parts;
  parts.csc = true;
  auto cpu_set = DocumentSet::Create(docs.view(), Stream::Cpu(), parts);
  auto gpu_set = DocumentSet::Create(docs.view(), stream, parts);
  ASSERT_TRUE(cpu_set.ok() && gpu_set.ok());
  std::vector<int32_t> cpu_keys(docs.rows(), -7);
  ASSERT_TRUE(RarestFeatureKeys(Stream::Cpu(), *cpu_set, cpu_keys.data()).ok());
  auto keys = Buffer::Allocate(MemoryKind::kDevice, 4 * docs.rows()).value();
  ASSERT_TRUE(RarestFeatureKeys(stream, *gpu_set, static_cast<int32_t*>(keys->data())).ok());
  EXPECT_EQ(ToHost<int32_t>(keys, docs.rows(), stream), cpu_keys);
  for (int64_t d = 0; d < docs.rows(); ++d) {
    if (docs.offsets[d + 1] == docs.offsets[d]) {
      EXPECT_EQ(cpu_keys[d], 700);
    } else {
      EXPECT_GE(cpu_keys[d], 0);
      EXPECT_LT(cpu_keys[d], 700);
    }
  }
}

// The screened search (BmuTuning::screen_fp16: fp16 bounds, exact scores of
// the candidates; 4 and 8 slots per lane) must give the exact kernels' bits: BMU, second and score
// equal to the CPU backend on every document. Random non-negative weights
// (most documents screened: exact_rescans < n), maps of 7x7 .. 64x64 (one or
// several 1024-position passes, a partial last one), documents visited in a
// shuffled previous-BMU order aliased with the output; then codebooks that
// force the exact kernel on some or all documents (near-identical nodes: too
// many candidates; dyadic weights: exact ties; negative weights; documents
// over 64 features), which must still match bit for bit.
TEST(BmuCudaParity, ScreenedSearchMatchesCpuBitForBit) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  std::mt19937 rng(3737);
  BmuTuning screen;
  screen.screen_fp16 = true;
  for (int edge : {7, 20, 45, 64}) {
    const int64_t nodes = int64_t{edge} * edge;
    SCOPED_TRACE(testing::Message() << "edge " << edge);
    HostDocs docs = testutil::ZipfTopicDocs(777, 900, 12, 11, rng);
    HostCodebook fm = testutil::RandomCodebook(nodes, 900, rng, 0.01f, 0.3f);
    const Result ref = RunCpu(docs, fm);
    std::vector<int32_t> previous = ref.bmu;
    std::shuffle(previous.begin(), previous.end(), rng);
    for (int rounds : {1, 3}) {
      BmuTuning tuning = screen;
      tuning.warp_doc_rounds = rounds;
      tuning.screen_slots = rounds == 1 ? 4 : 8;
      int64_t rescans = -1;
      ExpectSame(RunCuda(docs, fm, BmuAlgorithm::kFeatureMajor, stream, tuning, nullptr, false, &rescans), ref);
      EXPECT_GE(rescans, 0);
      EXPECT_LT(rescans, docs.rows()) << "nothing was screened";
      ExpectSame(RunCuda(docs, fm, BmuAlgorithm::kFeatureMajor, stream, tuning, &previous, /*alias=*/true), ref);
      // Grouped form: 1024-position groups (45x45 and 64x64: 2 and 4 groups).
      tuning.screen_group_positions = 1024;
      rescans = -1;
      ExpectSame(RunCuda(docs, fm, BmuAlgorithm::kFeatureMajor, stream, tuning, &previous, false, &rescans), ref);
      EXPECT_LT(rescans, docs.rows()) << "nothing was screened (grouped)";
    }
  }
  {
    // More documents than the probe (65536), so the rest skip screening.
    SCOPED_TRACE("near-identical nodes");
    HostDocs docs = testutil::ZipfTopicDocs(70000, 400, 8, 11, rng);
    HostCodebook fm = testutil::RandomCodebook(600, 400, rng, 0.1f, 0.3f);
    std::uniform_real_distribution<float> tiny(0.0f, 1e-5f);
    for (int64_t v = 0; v < fm.features; ++v) {
      for (int64_t i = 1; i < fm.nodes; ++i) fm.f32[v * fm.nodes + i] = fm.f32[v * fm.nodes] + tiny(rng);
    }
    fm.UpdateNorms();
    int64_t rescans = -1;
    ExpectSame(RunCuda(docs, fm, BmuAlgorithm::kFeatureMajor, stream, screen, nullptr, false, &rescans), RunCpu(docs, fm));
    EXPECT_GT(rescans, docs.rows() / 2);
  }
  for (int64_t nodes : {3, 600, 2048}) {
    SCOPED_TRACE(testing::Message() << "dyadic, nodes " << nodes);
    HostDocs docs = testutil::RandomDocs(700, 300, 20, rng);
    HostCodebook fm = testutil::DyadicCodebook(nodes, 300, rng, 3);
    ExpectSame(RunCuda(docs, fm, BmuAlgorithm::kFeatureMajor, stream, screen), RunCpu(docs, fm));
  }
  {
    SCOPED_TRACE("negative weights");
    HostDocs docs = testutil::RandomDocs(400, 300, 20, rng);
    HostCodebook fm = testutil::RandomCodebook(900, 300, rng, -0.1f, 0.3f);
    int64_t rescans = -1;
    ExpectSame(RunCuda(docs, fm, BmuAlgorithm::kFeatureMajor, stream, screen, nullptr, false, &rescans), RunCpu(docs, fm));
    EXPECT_EQ(rescans, docs.rows());
  }
  {
    SCOPED_TRACE("documents over 64 features");
    HostDocs docs = testutil::RandomDocs(400, 300, 120, rng);
    HostCodebook fm = testutil::RandomCodebook(900, 300, rng, 0.0f, 0.3f);
    int64_t long_docs = 0;
    for (int64_t d = 0; d < docs.rows(); ++d) long_docs += docs.offsets[d + 1] - docs.offsets[d] > 64;
    ASSERT_GT(long_docs, 0);
    int64_t rescans = -1;
    ExpectSame(RunCuda(docs, fm, BmuAlgorithm::kFeatureMajor, stream, screen, nullptr, false, &rescans), RunCpu(docs, fm));
    EXPECT_GE(rescans, long_docs);
    BmuTuning grouped = screen;
    grouped.screen_group_positions = 1024;
    rescans = -1;
    ExpectSame(RunCuda(docs, fm, BmuAlgorithm::kFeatureMajor, stream, grouped, nullptr, false, &rescans),
               RunCpu(docs, fm));
    EXPECT_GE(rescans, long_docs);
  }
}

TEST(BmuCudaParity, CusparseExactOnDyadicWeightsWithTies) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  std::mt19937 rng(4);
  for (int64_t nodes : {3, 600, 2049}) {
    SCOPED_TRACE(testing::Message() << "nodes " << nodes);
    HostDocs docs = testutil::RandomDocs(1200, 300, 20, rng);
    HostCodebook fm = testutil::DyadicCodebook(nodes, 300, rng, 3);
    Result ref = RunCpu(docs, fm);
    std::vector<int32_t> bf(docs.rows()), bf2(docs.rows());
    cpu::BruteForceBmus(docs.view(), fm.view(), bf.data(), bf2.data(), nullptr);
    EXPECT_EQ(ref.bmu, bf);
    EXPECT_EQ(ref.second, bf2);
    ExpectSame(RunCuda(docs, fm, BmuAlgorithm::kCusparseRowOrder, stream), ref);
    HostCodebook nm = testutil::WithLayout(fm, CodebookLayout::kNodeMajor);
    ExpectSame(RunCuda(docs, nm, BmuAlgorithm::kCusparseColOrder, stream), ref);
  }
}

TEST(BmuCudaParity, CusparseChoosesTheTrueMinimumOnRandomWeights) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  std::mt19937 rng(9);
  HostDocs docs = testutil::RandomDocs(500, 400, 25, rng);
  HostCodebook fm = testutil::RandomCodebook(1500, 400, rng, 0.0f, 0.3f);
  std::vector<double> best(docs.rows());
  std::vector<int32_t> bf(docs.rows());
  cpu::BruteForceBmus(docs.view(), fm.view(), bf.data(), nullptr, best.data());
  HostCodebook nm = testutil::WithLayout(fm, CodebookLayout::kNodeMajor);
  for (BmuAlgorithm algo : {BmuAlgorithm::kCusparseRowOrder, BmuAlgorithm::kCusparseColOrder}) {
    Result got = RunCuda(docs, algo == BmuAlgorithm::kCusparseRowOrder ? fm : nm, algo, stream);
    for (int64_t d = 0; d < docs.rows(); ++d) {
      const double chosen = testutil::Dist2(docs, d, fm, got.bmu[d]);
      ASSERT_NEAR(chosen, best[d], 1e-4 * (1 + best[d])) << BmuAlgorithmName(algo) << " doc " << d;
      ASSERT_NE(got.second[d], got.bmu[d]);
    }
  }
}

TEST(BmuCudaParity, SqNormsMatchCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  std::mt19937 rng(6);
  HostCodebook fm = testutil::RandomCodebook(777, 901, rng);
  for (HostCodebook cb : {fm, testutil::WithLayout(fm, CodebookLayout::kNodeMajor), testutil::ToHalf(fm)}) {
    cb.UpdateNorms();
    auto weights = cb.type == WeightType::kFloat32 ? ToDevice(cb.f32, stream) : ToDevice(cb.f16, stream);
    auto norms = Buffer::Allocate(MemoryKind::kDevice, 4 * cb.nodes).value();
    CodebookView view = cb.view();
    view.weights = weights->data();
    view.sq_norms = static_cast<float*>(norms->data());
    ASSERT_TRUE(ComputeSqNorms(stream, view).ok());
    ASSERT_TRUE(stream.Synchronize().ok());
    EXPECT_EQ(ToHost<float>(norms, cb.nodes, stream), cb.norms);
  }
}

TEST(CodebookCudaParity, RandomFillMatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  std::vector<float> scale(301);
  for (int v = 0; v < 301; ++v) scale[v] = 0.01f * (v % 17 + 1);
  auto dscale = ToDevice(scale, stream);
  for (WeightType type : {WeightType::kFloat32, WeightType::kFloat16}) {
    for (CodebookLayout layout : {CodebookLayout::kFeatureMajor, CodebookLayout::kNodeMajor}) {
      HostCodebook cb;
      cb.nodes = 1025;
      cb.features = 301;
      cb.type = type;
      cb.layout = layout;
      cb.f32.resize(type == WeightType::kFloat32 ? 1025 * 301 : 0);
      cb.f16.resize(type == WeightType::kFloat16 ? 1025 * 301 : 0);
      cb.norms.resize(1025);
      ASSERT_TRUE(FillRandomCodebook(Stream::Cpu(), cb.view(), 7, scale.data()).ok());
      const size_t bytes = static_cast<size_t>(WeightBytes(type)) * 1025 * 301;
      auto w = Buffer::Allocate(MemoryKind::kDevice, bytes).value();
      auto norms = Buffer::Allocate(MemoryKind::kDevice, 4 * 1025).value();
      CodebookView view = cb.view();
      view.weights = w->data();
      view.sq_norms = static_cast<float*>(norms->data());
      ASSERT_TRUE(FillRandomCodebook(stream, view, 7, static_cast<float*>(dscale->data())).ok());
      ASSERT_TRUE(stream.Synchronize().ok());
      if (type == WeightType::kFloat32) {
        EXPECT_EQ(ToHost<float>(w, cb.f32.size(), stream), cb.f32);
      } else {
        EXPECT_EQ(ToHost<uint16_t>(w, cb.f16.size(), stream), cb.f16);
      }
      EXPECT_EQ(ToHost<float>(norms, 1025, stream), cb.norms);
    }
  }
}

}  // namespace
}  // namespace som
}  // namespace tessera

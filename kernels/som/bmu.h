// Best-matching-unit (BMU) search for sparse binary documents against a SOM
// codebook, by exact Euclidean distance (types.h: minimise
// s_i = ||w_i||^2 - 2 x.w_i, ties to the lowest node index), returning the BMU,
// the second-best unit (for the topographic error) and the BMU's score
// (||x - w_bmu||^2 = nnz(x) + score).
//
// Algorithms (all exact; they differ in memory traffic, not in the answer):
//   kFeatureMajor     the main kernel. Feature-major codebook W[v*M + i]. On
//                     CUDA by default one warp per (document, 512-node group)
//                     with register accumulators and a fused top-2 (no N x M
//                     score matrix); BmuTuning picks the variants (documents
//                     sorted by their previous BMU, the register-span form,
//                     the shared-memory tiled kernel). All give the same bits. On the CPU: node
//                     chunks that stay in L1, tiles of documents so columns
//                     are reused from cache, all threads.
//   kNodeMajor        layout baseline: the same tiled kernel reading a
//                     node-major codebook W[i*V + v] (gathers instead of
//                     coalesced column reads). CPU: per document and node.
//   kCusparseRowOrder cuSPARSE SpMM X (CSR) x W, dense B and C row-major
//                     (feature-major codebook, C[d*M + i]), in document
//                     batches, then a separate top-2 pass over
//                     ||w||^2 - 2 C. CUDA only, fp32 only.
//   kCusparseColOrder the same with B and C column-major (node-major codebook,
//                     C[i*Nb + d]).
// Precision: x.w is accumulated in fp32 in ascending feature order starting
// from 0 by kFeatureMajor and kNodeMajor on both backends, so their scores are
// bit-identical between CPU and CUDA; cuSPARSE sums in its own order. fp16
// codebooks (kFeatureMajor, kNodeMajor) are converted to fp32 on load.
#ifndef TESSERA_KERNELS_SOM_BMU_H_
#define TESSERA_KERNELS_SOM_BMU_H_

#include <cstdint>

#include "absl/status/status.h"
#include "common/device.h"
#include "kernels/som/documents.h"
#include "kernels/som/types.h"
#include "kernels/som/workspace.h"

namespace tessera {
namespace som {

enum class BmuAlgorithm { kFeatureMajor, kNodeMajor, kCusparseRowOrder, kCusparseColOrder };
const char* BmuAlgorithmName(BmuAlgorithm algorithm);
// The codebook layout an algorithm reads.
CodebookLayout LayoutFor(BmuAlgorithm algorithm);

// Per document; `second` and `score` may be null. With a single node the
// second-best index is -1.
struct BmuOutput {
  int32_t* bmu = nullptr;
  int32_t* second = nullptr;
  float* score = nullptr;
  // Host; may be null. The screened search (BmuTuning::screen_fp16) stores
  // how many documents it searched again with the exact kernel (all of them
  // when the codebook cannot be screened); other searches store 0.
  int64_t* exact_rescans = nullptr;
};

// How the CUDA kernels behind kFeatureMajor/kNodeMajor run; passed by value
// with every call (no process-wide setting), so concurrent searches may use
// different tunings. Every tuning gives the same bits, only the speed differs
// (bmu_cuda_test checks each against the CPU). The CPU backend and the
// cuSPARSE baselines ignore it.
struct BmuTuning {
  // false: the warp kernel (register accumulators, one warp per document and
  // node group; the default). true: the tiled kernel (shared-memory
  // accumulators, one block per 32 documents and 512 nodes), which needs
  // docs.tiles() (DocumentParts::tiles).
  bool tiled_kernel = false;
  // Warp kernel: nodes per group, rounded down to a multiple of 32 x
  // warp_lane_nodes (at least one such span).
  int64_t warp_group_nodes = 512;
  // Warp kernel: nodes per lane, 4 or 8 (any other value means 4).
  int warp_lane_nodes = 4;
  // Tiled kernel: tile entries whose weights are loaded before any is
  // applied, 1, 4, 8 or 16 (any other value means 8).
  int tiled_load_depth = 8;
  // Warp kernel: visit documents sorted by BmuHints::previous_bmu when it is
  // given (a stable radix sort on the device), so documents with similar
  // features run side by side on an SM and reuse codebook columns from L1/L2;
  // by (previous BMU, BmuHints::document_key) when a key is given too, and by
  // the key alone before any BMU is known (the first epoch): documents that
  // share their rarest feature (RarestFeatureKeys) share topical vocabulary,
  // so neighbouring positions reuse columns even where one BMU holds
  // documents of many topics (the smooth maps of the first epochs). The key
  // order trained the 64x64 map on 29.9 M documents in 11.81 s against 13.55
  // (BMU 10.29 vs 11.96 s), same map (H100, 2026-12-07,
  // bench/results/2026-12-07-h100-issue37-round6.md).
  // Results are still written per document in the original order (same bits).
  // On by default: on the H200 a trained-like codebook searched 1.27x faster
  // at edge 256 (329 vs 416 ms per 1M documents) and 1.16x at 1024; a random
  // codebook was neutral. Without hints (e.g. the first epoch) nothing is sorted.
  bool order_by_previous_bmu = true;
  // Warp kernel, register-span form (issue 16; 0 keeps the form above): 1, 2
  // or 4. Feature-major only (node-major ignores it). Each lane keeps this
  // many spans of accumulators, a span being one 16-byte load (4 fp32 / 8 fp16
  // nodes; a warp's load covers 512 contiguous bytes: 128 / 256 nodes), 128 /
  // 256 nodes apart. A feature's index shuffle and column address are done
  // once for all spans (the form above repeats them per 128 nodes), and the
  // norms are read 16 bytes at a time. warp_group_nodes is rounded down to a
  // multiple of the spans' nodes (at least one pass). fp16 takes at most 2
  // (4 would spill: 32 accumulators). Same bits. The default since the H200
  // run of 2026-12-02 (som_gpu_bench --issue16, 1M documents, trained map,
  // sorted): 4 spans, 8 rounds searched edge 256 in 210.5 ms against the
  // form above's 329.5 and cuSPARSE's 676.9 (3.22x), edge 64 in 13.4 ms
  // against 20.8 and 33.6 (2.51x), bit for bit.
  int warp_register_spans = 4;
  // Register-span form: documents each warp takes in turn (1..64). The
  // block's 8 warps take 8 neighbouring positions of the visiting order per
  // round, so with documents sorted by previous BMU the columns the next
  // round shares with this one are re-read from this SM's L1, not from L2
  // (blocks of neighbouring documents otherwise run on different SMs).
  // 32 since issue 37 (with warp_block_warps 24): 12.32 against 14.09 ms per
  // 1M documents on the trained 64x64 map, 48.7 against 55.0 at 128x128
  // (H100, 2026-12-07, bench/results/2026-12-07-h100-som-h37.md).
  int warp_doc_rounds = 32;
  // Register-span form: warps per block, 8, 16, 24 or 32 (others: 8). Resident
  // blocks of one SM hold positions far apart in the visiting order (blocks
  // are spread over the SMs), so with 8-warp blocks an SM's L1 serves the
  // columns of ~3 unrelated stretches of sorted documents; one larger block
  // keeps all of an SM's warps on neighbouring positions (issue 37). Same bits.
  // 24 (one block of the 24 warps the 16-accumulator forms fit per SM) since
  // issue 37: 12.84 against 14.09 ms per 1M documents at 8 rounds (64x64,
  // trained map, sorted), 51.1 vs 55.0 at 128x128, 205.9 vs 221.2 at 256x256.
  int warp_block_warps = 24;
  // (Document headers loaded a batch of 32 rounds ahead, warp_prefetch_documents,
  // were removed after no end-to-end gain on the H100, 2026-12-07 round 7: 64x64 on
  // 29.9 M documents 12.01 vs 11.98 s; BMU rows -2 % .. +5 %.)
  // (Visit by (previous BMU, previous second-best) and pipelined feature loads
  // were removed after losing on the H100, 2026-12-07: 13.94 vs 14.09 and 16.5
  // vs 14.1 ms per 1M documents at 64x64, bench/results/2026-12-07-h100-som-h37.md.)
  // Screened search (issue 37; fp32 feature-major codebooks on CUDA; others
  // ignore it): a first pass sums an fp16 copy of the codebook with half2
  // adds (8 nodes per 16-byte load, 2 per add: half the bytes and a third of
  // the instructions of the exact pass), bounds each node's fp32 score from
  // it (the rounding of the fp16 copy and of the fp16 sums, bounded per node
  // and document), keeps every node whose lower bound is not above the
  // second-smallest upper bound (the true best and second-best always are),
  // and scores those exactly as the exact kernels do (fp32, ascending
  // features, from 0). So BMU, second and score keep their bits. Documents
  // whose candidates do not fit (screen_slots per lane) or with over 64 features, and
  // codebooks with negative, huge or non-finite weights, go through the exact
  // kernel (BmuOutput::exact_rescans counts them). Nodes are permuted in the
  // copy so that map neighbours (close scores) fall on different lanes.
  bool screen_fp16 = false;
  // The screened search chosen by map size (issue 37): with screen_fp16
  // false it is still used for fp32 feature-major codebooks of at most this
  // many nodes (0: never). On a trained map it won 1.24x at 64x64 against the
  // 8-warp exact kernel and lost (0.33-0.44x) at 256x256 on the H100, where
  // smooth maps leave too many near-equal candidates
  // (bench/results/2026-12-07-h100-som-issue37.md); against the exact kernel
  // in 24-warp blocks with 32 rounds it only tied at 64x64 (12.32 ms per 1M
  // documents each) and lost at 32x32 (4.3 vs 3.2), so the default is 0
  // (bench/results/2026-12-07-h100-som-h37.md).
  int64_t screen_auto_max_nodes = 0;
  // Screened search: candidates kept per lane, 4 or 8 (any other value means
  // 4); more slots send fewer documents to the exact kernel on smooth maps.
  int screen_slots = 4;
  // Screened search: positions of the fp16 copy per group (rounded down to
  // whole 1024-position passes; 0 or at least the map: one group). With
  // several groups, blocks of one group run together (documents fastest), as
  // the exact kernel's node groups, so the group's column slices stay in
  // L1/L2; a second kernel combines the groups' bounds and candidates.
  int64_t screen_group_positions = 0;
};

// Data about the documents the CUDA warp kernel may use to schedule its work;
// it never changes the results (ignored by the CPU backend, the tiled kernel
// and the cuSPARSE baselines).
struct BmuHints {
  // Per document, the BMU of an earlier search (e.g. the previous epoch) in
  // the stream's backend memory; may alias BmuOutput::bmu (read before the
  // search writes). Values outside [0, nodes) are allowed (sorted last).
  // Used when BmuTuning::order_by_previous_bmu is set.
  const int32_t* previous_bmu = nullptr;
  // Per document, a content key in [0, features] (e.g. RarestFeatureKeys;
  // values outside are allowed): the visiting order's second key (see
  // BmuTuning::order_by_previous_bmu).
  const int32_t* document_key = nullptr;
};

// Per document (keys: docs.rows() entries in the stream's backend memory),
// its rarest feature: the one in the fewest documents (ties: the lowest
// index), `features` for an empty document; from docs.csc()
// (DocumentParts::csc). Documents sharing it share topical vocabulary
// (BmuHints::document_key).
absl::Status RarestFeatureKeys(const Stream& stream, const DocumentSet& docs, int32_t* keys);

// Documents and outputs live in the stream's backend memory. The CUDA tiled
// kernel (BmuTuning::tiled_kernel) needs docs.tiles() (DocumentParts::tiles);
// the cuSPARSE baselines need docs.host_offsets() (DocumentParts::host_offsets).
absl::Status FindBmus(const Stream& stream, BmuAlgorithm algorithm, const DocumentSet& docs,
                      const CodebookView& codebook, const BmuOutput& out, SomWorkspace* workspace = nullptr,
                      BmuTuning tuning = BmuTuning(), const BmuHints& hints = BmuHints());

// sq_norms[i] = ||w_i||^2 of the stored weights: double accumulation over the
// features in ascending order, rounded to float (identical on both backends).
absl::Status ComputeSqNorms(const Stream& stream, const CodebookView& codebook);

// Argument checks shared by the backends.
absl::Status CheckCodebook(const CodebookView& codebook, const char* who);

namespace cpu {
// Plain reference: dense double-precision ||x - w_i||^2 over *all* features
// for every node (O(N M V): tests only). dist2 (may be null) gets the BMU's
// squared distance; second is -1 with a single node.
void BruteForceBmus(const CsrView& docs, const CodebookView& codebook, int32_t* bmu, int32_t* second,
                    double* dist2);
// The CPU backend (multi-threaded): feature-major tiled sweep, or the node-major
// baseline, per codebook.layout.
void FindBmus(const CsrView& docs, const CodebookView& codebook, const BmuOutput& out);
void ComputeSqNorms(const CodebookView& codebook);
// fp16 bits -> float for every value (a 64K-entry table).
const float* HalfTable();
}  // namespace cpu

namespace cuda {
absl::Status FindBmus(const Stream& stream, BmuAlgorithm algorithm, const DocumentSet& docs,
                      const CodebookView& codebook, const BmuOutput& out, SomWorkspace* workspace,
                      BmuTuning tuning, const BmuHints& hints);
absl::Status ComputeSqNorms(const Stream& stream, const CodebookView& codebook);
absl::Status RarestFeatureKeys(const Stream& stream, const DocumentSet& docs, int32_t* keys);
}  // namespace cuda

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_KERNELS_SOM_BMU_H_

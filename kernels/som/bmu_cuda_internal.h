// Pieces of the CUDA BMU search shared between its .cu files (bmu.cu: the
// warp kernel, tiled kernel and cuSPARSE baselines; bmu_order.cu: documents
// sorted by their previous BMU). Internal to kernels/som.
#ifndef TESSERA_KERNELS_SOM_BMU_CUDA_INTERNAL_H_
#define TESSERA_KERNELS_SOM_BMU_CUDA_INTERNAL_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/som/bmu.h"
#include "kernels/som/documents.h"
#include "kernels/som/types.h"
#include "kernels/som/workspace.h"

namespace tessera {
namespace som {
namespace cuda {
namespace internal {

constexpr int kBmuThreads = 256;
// Workspace slot and per-launch budget of the warp kernels' per-(group,
// document) top-2 partials.
constexpr int kWarpPartialsSlot = 3;
constexpr size_t kWarpPartialsBytes = size_t{256} << 20;
// Slots of the document order (kept clear of the batch update's 0..5).
constexpr int kOrderKeysSlot = 8;
constexpr int kOrderKeysSortedSlot = 9;
constexpr int kOrderIdsSlot = 10;
constexpr int kOrderSlot = 11;
constexpr int kOrderTempSlot = 12;

// Screened search (BmuTuning::screen_fp16, bmu_screen.cu): the fp16 copy of
// the codebook, its permuted norms, position -> node, flags and counters,
// documents sent to the exact kernel.
constexpr int kScreenShadowSlot = 13;
constexpr int kScreenNormsSlot = 14;
constexpr int kScreenNodesSlot = 15;
constexpr int kScreenCountersSlot = 16;
constexpr int kScreenListSlot = 17;
constexpr int kScreenRescanSlot = 20;  // 18, 19: the device quality pass (quality_device.cu)
constexpr int kScreenTempSlot = 21;
constexpr int kScreenGroupSlot = 22;

// The screened search of every document (visited through `order` when it is
// not null), writing out.exact_rescans when given (bmu_screen.cu).
absl::Status ScreenedBmus(const Stream& stream, const DocumentSet& docs, const CodebookView& cb, const BmuOutput& out,
                          SomWorkspace& ws, const BmuTuning& tuning, const int32_t* order);

// The exact register-span kernel (bmu.cu) on documents order[0, n) (0..n-1
// when order is null); device memory.
absl::Status ExactBmusAt(const Stream& stream, const DocumentSet& docs, const CodebookView& cb, const BmuOutput& out,
                         SomWorkspace& ws, BmuTuning tuning, const int32_t* order, int64_t n);

// Positions -> documents: the n documents stably sorted by previous_bmu, or
// by (previous_bmu, secondary) when secondary is not null (previous_bmu may
// then be null: by secondary alone). Values outside [0, nodes) / [0,
// secondary_range) sort last. Device memory; lives in `ws` until the order
// slots are next used.
absl::StatusOr<const int32_t*> OrderByPreviousBmu(const Stream& stream, const int32_t* previous_bmu,
                                                  const int32_t* secondary, int64_t secondary_range, int64_t n,
                                                  int64_t nodes, SomWorkspace& ws);

}  // namespace internal
}  // namespace cuda
}  // namespace som
}  // namespace tessera

#endif  // TESSERA_KERNELS_SOM_BMU_CUDA_INTERNAL_H_

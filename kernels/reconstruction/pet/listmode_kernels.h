// Backend kernels of list-mode OSEM's data term
//   out = sum over events e of w_e a_e / (a_e . image),
// returning sum_e w_e log(a_e . image) (events with a_e . image > 0), where
// a_e is the TOF row of A for (view, col, row, TOF bin) times its LOR's
// attenuation factor. Pointers are in the backend's memory.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_PET_LISTMODE_KERNELS_H_
#define TESSERA_KERNELS_RECONSTRUCTION_PET_LISTMODE_KERNELS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/buffer.h"
#include "common/device.h"
#include "kernels/reconstruction/pet/listmode_file.h"
#include "kernels/reconstruction/pet/lor_math.h"

namespace tessera {
namespace recon {
namespace pet {

// The bucketing key of an event: subset, TOF bin, view, row, col, most
// significant first:  ((((s * K + k) * V + view) * rows + row) * cols + col.
struct BucketKeyShape {
  int64_t subsets, bins, views, rows, cols;
  uint64_t size() const { return static_cast<uint64_t>(subsets * bins * views * rows * cols); }
};

// Events sorted by key with duplicates merged: unique keys and their summed
// weights, and where each subset's keys start (subsets + 1 entries).
struct EventBuckets {
  std::shared_ptr<Buffer> keys;  // uint64_t per unique key
  std::shared_ptr<Buffer> mult;  // uint32_t per unique key
  int64_t unique = 0;
  std::vector<int64_t> subset_starts;
};

namespace cpu {
// Reference: per event, forward then back along the same TOF row; threads
// take contiguous event ranges into their own volumes, summed in thread order.
double ListModeDataTerm(const ProjectorParams& p, const ListModeEvent* events, int64_t n, const float* image,
                        float* out);
}  // namespace cpu

namespace cuda {
// Naive: one thread per event walks its TOF row twice (forward value, then
// atomicAdd of its back projection). out is zeroed first.
absl::StatusOr<double> NaiveDataTerm(const Stream& stream, const ProjectorParams& p, const ListModeEvent* events,
                                     int64_t n, const float* image, float* out);
// Uploads host events (weights > 0), sorts them by key on the GPU (cub radix
// sort) and merges duplicates (cub reduce-by-key).
absl::StatusOr<EventBuckets> BuildBuckets(const Stream& stream, const ListModeEvent* events, int64_t n,
                                          const BucketKeyShape& shape);
// Bucketed, first half: the forward value of each unique (LOR, TOF bin) of
// `subset` (sorted, so neighbouring threads walk neighbouring rays) gives
// ratio = multiplicity / value in the subset's dense compact TOF sinogram
// (zero elsewhere; RangeSize(p, range) floats); returns the log term. The
// caller turns ratio into the data term with the sinogram projector's back
// projection (PetProjector::Back: float or fixed-point scatter, or gather).
absl::StatusOr<double> BucketedRatio(const Stream& stream, const ProjectorParams& p, const EventBuckets& buckets,
                                     const BucketKeyShape& shape, int subset, const ViewRange& range,
                                     const float* image, float* ratio);
}  // namespace cuda

}  // namespace pet
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_PET_LISTMODE_KERNELS_H_

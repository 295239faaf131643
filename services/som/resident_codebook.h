// A loaded atlas's codebook kept in GPU memory for CUDA projections: uploaded
// on the first Project, reused by every later one, freed with this object
// (the service's atlas entry, so when the atlas is unloaded, deleted or
// replaced and the last call using it has finished). Before, every CUDA
// Project copied the whole codebook (126 MB for 32x32 x 30,766 features,
// 4 GB at 256x256) to the device and back out of scope.
//
// Thread-safe: concurrent Project calls share the one device copy (the first
// uploads it under a mutex, the rest wait for it and then only read); each
// call has its own stream, documents and outputs. Results are the
// feature-major BMU search's, bit-identical to the CPU backend's.
#ifndef TESSERA_SERVICES_SOM_RESIDENT_CODEBOOK_H_
#define TESSERA_SERVICES_SOM_RESIDENT_CODEBOOK_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "absl/status/statusor.h"
#include "common/buffer.h"
#include "kernels/som/quality.h"
#include "kernels/som/types.h"
#include "services/som/corpus.h"
#include "services/som/trainer.h"

namespace tessera {
namespace som {

class ResidentCodebook {
 public:
  // `model` (host codebook and norms) must outlive this object and not change.
  explicit ResidentCodebook(const SomModel& model, int gpu_ordinal = 0) : model_(model), ordinal_(gpu_ordinal) {}
  ResidentCodebook(const ResidentCodebook&) = delete;
  ResidentCodebook& operator=(const ResidentCodebook&) = delete;

  // BMU, second-best unit, score and quality of each document on the GPU.
  // INVALID_ARGUMENT when the documents' feature count is not the map's;
  // FAILED_PRECONDITION (with the reason) without a usable GPU.
  absl::StatusOr<Projection> Project(const SparseBinaryMatrix& docs, Adjacency adjacency = Adjacency::kFour);

  // How many times the codebook was copied to the device (the seam tests
  // count: 1 after any number of successful calls).
  int64_t uploads() const { return uploads_.load(); }
  // Device memory held for the codebook (0 before the first call).
  size_t device_bytes() const;

 private:
  // The device copy, uploaded on first use.
  absl::StatusOr<CodebookView> DeviceCodebook();

  const SomModel& model_;
  const int ordinal_;
  mutable std::mutex mu_;
  std::shared_ptr<Buffer> weights_, norms_;  // set once under mu_, then read-only
  std::atomic<int64_t> uploads_{0};
};

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_SERVICES_SOM_RESIDENT_CODEBOOK_H_

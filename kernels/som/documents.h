// Preparing sparse binary documents for the SOM kernels:
// - document tiles for the tiled CUDA BMU kernels: up to kTileDocs consecutive
//   documents per tile, with the tile's *distinct* features (ascending) and, per
//   feature, a bit mask of the tile's documents that contain it, so a kernel
//   reads each feature column once per tile and reuses it for every document;
// - the transpose (CSC: documents by feature) for the batch update;
// - DocumentSet: all of it in one backend's memory (host or device), owning
//   tracked Buffers.
#ifndef TESSERA_KERNELS_SOM_DOCUMENTS_H_
#define TESSERA_KERNELS_SOM_DOCUMENTS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/buffer.h"
#include "common/device.h"
#include "kernels/som/types.h"

namespace tessera {
namespace som {

// Documents per tile (one bit each in a uint32 mask).
constexpr int kTileDocs = 32;

struct DocTilesView {
  int64_t num_tiles = 0;
  int64_t num_entries = 0;
  const int64_t* doc_begin = nullptr;    // num_tiles + 1: tile t has docs [doc_begin[t], doc_begin[t+1])
  const int64_t* entry_begin = nullptr;  // num_tiles + 1: its entries [entry_begin[t], entry_begin[t+1])
  const int32_t* features = nullptr;     // per entry: a feature, ascending within a tile
  const uint32_t* masks = nullptr;       // per entry: bit j set if doc doc_begin[t] + j has it
};

struct HostDocTiles {
  std::vector<int64_t> doc_begin{0};
  std::vector<int64_t> entry_begin{0};
  std::vector<int32_t> features;
  std::vector<uint32_t> masks;
  DocTilesView view() const;
};

// Tiles of `tile_docs` (1..32) consecutive documents; multi-threaded.
HostDocTiles BuildDocTiles(const CsrView& docs, int tile_docs = kTileDocs);

struct HostCsc {
  std::vector<int64_t> offsets;
  std::vector<int32_t> doc_ids;
  CscView view(int64_t docs) const;
};

// The transpose of `docs` (counting sort; doc ids ascending per feature).
HostCsc BuildCsc(const CsrView& docs);

// What to prepare in a DocumentSet.
struct DocumentParts {
  bool tiles = true;  // needed by the tiled CUDA BMU kernels
  bool csc = false;   // needed by BatchUpdate
  bool host_offsets = true;  // DocumentSet::host_offsets (the cuSPARSE baselines); 240 MB at 29.9 M documents
};

// Documents in one backend's memory (host Buffers for the CPU backend, device
// Buffers for CUDA). Copies the input; movable, not copyable.
class DocumentSet {
 public:
  static absl::StatusOr<DocumentSet> Create(const CsrView& host_docs, const Stream& stream,
                                            DocumentParts parts = DocumentParts());

  DocumentSet() = default;
  CsrView csr() const { return csr_; }
  DocTilesView tiles() const { return tiles_; }  // empty unless parts.tiles
  CscView csc() const { return csc_; }           // empty unless parts.csc
  int64_t rows() const { return csr_.rows; }
  // Host copy of the row offsets (the CUDA cuSPARSE baseline plans batches
  // with it); empty unless parts.host_offsets.
  const std::vector<int64_t>& host_offsets() const { return host_offsets_; }
  size_t bytes() const;  // backend memory held

 private:
  CsrView csr_;
  DocTilesView tiles_;
  CscView csc_;
  std::vector<int64_t> host_offsets_;
  std::vector<std::shared_ptr<Buffer>> buffers_;
};

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_KERNELS_SOM_DOCUMENTS_H_

#include "kernels/som/documents.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/som/csc_device.h"
#include "kernels/som/parallel.h"
#include "kernels/som/staged_copy.h"

namespace tessera {
namespace som {

const char* WeightTypeName(WeightType type) { return type == WeightType::kFloat32 ? "fp32" : "fp16"; }
const char* CodebookLayoutName(CodebookLayout layout) {
  return layout == CodebookLayout::kFeatureMajor ? "feature-major" : "node-major";
}
const char* TopologyName(Topology topology) { return topology == Topology::kPlanar ? "planar" : "toroidal"; }
std::string GridToString(const GridShape& grid) {
  return absl::StrCat(grid.width, "x", grid.height, " ", TopologyName(grid.topology));
}

DocTilesView HostDocTiles::view() const {
  DocTilesView v;
  v.num_tiles = static_cast<int64_t>(doc_begin.size()) - 1;
  v.num_entries = static_cast<int64_t>(features.size());
  v.doc_begin = doc_begin.data();
  v.entry_begin = entry_begin.data();
  v.features = features.data();
  v.masks = masks.data();
  return v;
}

HostDocTiles BuildDocTiles(const CsrView& docs, int tile_docs) {
  tile_docs = std::max(1, std::min(tile_docs, kTileDocs));
  HostDocTiles out;
  const int64_t num_tiles = (docs.rows + tile_docs - 1) / tile_docs;
  out.doc_begin.resize(num_tiles + 1);
  for (int64_t t = 0; t <= num_tiles; ++t) out.doc_begin[t] = std::min(docs.rows, t * tile_docs);
  out.entry_begin.assign(num_tiles + 1, 0);
  if (num_tiles == 0) return out;

  // Each worker builds the entries of a contiguous range of tiles; the ranges
  // are then concatenated in order.
  struct Part {
    std::vector<int32_t> features;
    std::vector<uint32_t> masks;
  };
  std::vector<Part> parts(CpuThreads());
  const int used = ParallelFor(num_tiles, [&](int64_t t0, int64_t t1, int chunk) {
    Part& part = parts[chunk];
    std::vector<std::pair<int32_t, int32_t>> pairs;  // (feature, doc in tile)
    for (int64_t t = t0; t < t1; ++t) {
      pairs.clear();
      const int64_t d0 = out.doc_begin[t], d1 = out.doc_begin[t + 1];
      for (int64_t d = d0; d < d1; ++d) {
        for (int64_t k = docs.offsets[d]; k < docs.offsets[d + 1]; ++k) {
          pairs.emplace_back(docs.indices[k], static_cast<int32_t>(d - d0));
        }
      }
      std::sort(pairs.begin(), pairs.end());
      int64_t count = 0;
      for (size_t k = 0; k < pairs.size(); ++k) {
        if (k == 0 || pairs[k].first != pairs[k - 1].first) {
          part.features.push_back(pairs[k].first);
          part.masks.push_back(0);
          ++count;
        }
        part.masks.back() |= 1u << pairs[k].second;
      }
      out.entry_begin[t + 1] = count;  // a count for now; prefix-summed below
    }
  });
  size_t total = 0;
  for (int c = 0; c < used; ++c) total += parts[c].features.size();
  out.features.reserve(total);
  out.masks.reserve(total);
  for (int c = 0; c < used; ++c) {
    out.features.insert(out.features.end(), parts[c].features.begin(), parts[c].features.end());
    out.masks.insert(out.masks.end(), parts[c].masks.begin(), parts[c].masks.end());
    parts[c] = Part();
  }
  for (int64_t t = 0; t < num_tiles; ++t) out.entry_begin[t + 1] += out.entry_begin[t];
  return out;
}

CscView HostCsc::view(int64_t docs) const {
  CscView v;
  v.features = static_cast<int64_t>(offsets.size()) - 1;
  v.docs = docs;
  v.offsets = offsets.data();
  v.doc_ids = doc_ids.data();
  return v;
}

HostCsc BuildCsc(const CsrView& docs) {
  HostCsc out;
  out.offsets.assign(docs.cols + 1, 0);
  const int64_t nnz = docs.nnz();
  for (int64_t k = 0; k < nnz; ++k) ++out.offsets[docs.indices[k] + 1];
  for (int64_t v = 0; v < docs.cols; ++v) out.offsets[v + 1] += out.offsets[v];
  out.doc_ids.resize(nnz);
  std::vector<int64_t> cursor(out.offsets.begin(), out.offsets.end() - 1);
  for (int64_t d = 0; d < docs.rows; ++d) {
    for (int64_t k = docs.offsets[d]; k < docs.offsets[d + 1]; ++k) {
      out.doc_ids[cursor[docs.indices[k]]++] = static_cast<int32_t>(d);
    }
  }
  return out;
}

namespace {

// Copies `count` items of host data into a new Buffer of the stream's backend
// (large arrays through pinned staging buffers: staged_copy.h).
template <typename T>
absl::StatusOr<const T*> Upload(const T* data, size_t count, const Stream& stream,
                                std::vector<std::shared_ptr<Buffer>>& keep) {
  const MemoryKind kind = MemoryKindFor(stream);
  const size_t bytes = std::max<size_t>(count * sizeof(T), sizeof(T));  // never a null pointer
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> buffer, Buffer::Allocate(kind, bytes, stream.ordinal()));
  if (count > 0) TESSERA_RETURN_IF_ERROR(StagedCopyToDevice(buffer->data(), data, count * sizeof(T), stream));
  keep.push_back(buffer);
  return static_cast<const T*>(buffer->data());
}

}  // namespace

absl::StatusOr<DocumentSet> DocumentSet::Create(const CsrView& docs, const Stream& stream, DocumentParts parts) {
  if (docs.rows < 0 || docs.cols < 0) return absl::InvalidArgumentError("documents: negative shape");
  if (docs.rows >= (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(absl::StrCat("documents: ", docs.rows, " rows exceed the 2^31 - 1 limit"));
  }
  if (docs.cols >= (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(absl::StrCat("documents: ", docs.cols, " features exceed the 2^31 - 1 limit"));
  }
  if (docs.offsets == nullptr) return absl::InvalidArgumentError("documents: null offsets");
  DocumentSet set;
  if (parts.host_offsets) set.host_offsets_.assign(docs.offsets, docs.offsets + docs.rows + 1);
  const int64_t nnz = docs.nnz();
  set.csr_.rows = docs.rows;
  set.csr_.cols = docs.cols;
  TESSERA_ASSIGN_OR_RETURN(set.csr_.offsets, Upload(docs.offsets, docs.rows + 1, stream, set.buffers_));
  TESSERA_ASSIGN_OR_RETURN(set.csr_.indices, Upload(docs.indices, nnz, stream, set.buffers_));
  if (parts.tiles) {
    HostDocTiles tiles = BuildDocTiles(docs);
    set.tiles_.num_tiles = static_cast<int64_t>(tiles.doc_begin.size()) - 1;
    set.tiles_.num_entries = static_cast<int64_t>(tiles.features.size());
    TESSERA_ASSIGN_OR_RETURN(set.tiles_.doc_begin,
                             Upload(tiles.doc_begin.data(), tiles.doc_begin.size(), stream, set.buffers_));
    TESSERA_ASSIGN_OR_RETURN(set.tiles_.entry_begin,
                             Upload(tiles.entry_begin.data(), tiles.entry_begin.size(), stream, set.buffers_));
    TESSERA_ASSIGN_OR_RETURN(set.tiles_.features,
                             Upload(tiles.features.data(), tiles.features.size(), stream, set.buffers_));
    TESSERA_ASSIGN_OR_RETURN(set.tiles_.masks, Upload(tiles.masks.data(), tiles.masks.size(), stream, set.buffers_));
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());  // the host vectors die here
  }
  if (parts.csc) {
    set.csc_.features = docs.cols;
    set.csc_.docs = docs.rows;
    if (stream.backend() == Backend::kCuda && nnz < (int64_t{1} << 31)) {
      // On the device: a radix sort instead of a host scatter + upload.
      TESSERA_ASSIGN_OR_RETURN(
          std::shared_ptr<Buffer> offsets,
          Buffer::Allocate(MemoryKind::kDevice, sizeof(int64_t) * (docs.cols + 1), stream.ordinal()));
      TESSERA_ASSIGN_OR_RETURN(
          std::shared_ptr<Buffer> doc_ids,
          Buffer::Allocate(MemoryKind::kDevice, sizeof(int32_t) * std::max<int64_t>(1, nnz), stream.ordinal()));
      set.buffers_.push_back(offsets);
      set.buffers_.push_back(doc_ids);
      TESSERA_RETURN_IF_ERROR(cuda::TransposeCsr(stream, docs.rows, docs.cols, nnz, set.csr_.offsets,
                                                 set.csr_.indices, static_cast<int64_t*>(offsets->data()),
                                                 static_cast<int32_t*>(doc_ids->data())));
      set.csc_.offsets = static_cast<const int64_t*>(offsets->data());
      set.csc_.doc_ids = static_cast<const int32_t*>(doc_ids->data());
    } else {
      HostCsc csc = BuildCsc(docs);
      TESSERA_ASSIGN_OR_RETURN(set.csc_.offsets,
                               Upload(csc.offsets.data(), csc.offsets.size(), stream, set.buffers_));
      TESSERA_ASSIGN_OR_RETURN(set.csc_.doc_ids,
                               Upload(csc.doc_ids.data(), csc.doc_ids.size(), stream, set.buffers_));
      TESSERA_RETURN_IF_ERROR(stream.Synchronize());
    }
  }
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return set;
}

size_t DocumentSet::bytes() const {
  size_t total = 0;
  for (const auto& b : buffers_) total += b->size();
  return total;
}

}  // namespace som
}  // namespace tessera

#include "services/som/resident_codebook.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/som/bmu.h"
#include "kernels/som/documents.h"

namespace tessera {
namespace som {

size_t ResidentCodebook::device_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return (weights_ ? weights_->size() : 0) + (norms_ ? norms_->size() : 0);
}

absl::StatusOr<CodebookView> ResidentCodebook::DeviceCodebook() {
  // The model only gives a non-const view; nothing here writes through it.
  CodebookView view = const_cast<SomModel&>(model_).view();
  std::lock_guard<std::mutex> lock(mu_);
  if (!weights_) {
    TESSERA_ASSIGN_OR_RETURN(Stream stream, Stream::Create(Backend::kCuda, ordinal_));
    const size_t bytes = static_cast<size_t>(WeightBytes(view.type)) * view.features * view.nodes;
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> weights,
                             Buffer::Allocate(MemoryKind::kDevice, std::max<size_t>(4, bytes), ordinal_));
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> norms,
                             Buffer::Allocate(MemoryKind::kDevice, 4 * view.nodes, ordinal_));
    TESSERA_RETURN_IF_ERROR(
        CopyBytes(weights->data(), MemoryKind::kDevice, view.weights, MemoryKind::kHost, bytes, stream));
    TESSERA_RETURN_IF_ERROR(
        CopyBytes(norms->data(), MemoryKind::kDevice, view.sq_norms, MemoryKind::kHost, 4 * view.nodes, stream));
    // Complete before any other stream reads it.
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
    weights_ = std::move(weights);
    norms_ = std::move(norms);
    uploads_.fetch_add(1);
  }
  view.weights = weights_->data();
  view.sq_norms = static_cast<float*>(norms_->data());
  return view;
}

absl::StatusOr<Projection> ResidentCodebook::Project(const SparseBinaryMatrix& docs, Adjacency adjacency) {
  if (docs.cols() != model_.features) {
    return absl::InvalidArgumentError(
        absl::StrCat("Project: documents have ", docs.cols(), " features, the map ", model_.features));
  }
  if (static_cast<int64_t>(model_.sq_norms.size()) != model_.grid.nodes()) {
    return absl::FailedPreconditionError("Project: the map has no norms (not a loaded or trained atlas)");
  }
  if (!DeviceRegistry::Get().cuda_available()) {
    return absl::FailedPreconditionError(
        absl::StrCat("Project on CUDA: ", DeviceRegistry::Get().cuda_unavailable_reason()));
  }
  TESSERA_ASSIGN_OR_RETURN(const CodebookView codebook, DeviceCodebook());
  TESSERA_ASSIGN_OR_RETURN(Stream stream, Stream::Create(Backend::kCuda, ordinal_));
  DocumentParts parts;
  parts.tiles = false;  // the default warp kernel reads rows only
  TESSERA_ASSIGN_OR_RETURN(DocumentSet set, DocumentSet::Create(docs.view(), stream, parts));
  const int64_t n = docs.rows();
  const size_t out_bytes = 4 * static_cast<size_t>(std::max<int64_t>(1, n));
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> bmu, Buffer::Allocate(MemoryKind::kDevice, out_bytes, ordinal_));
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> second,
                           Buffer::Allocate(MemoryKind::kDevice, out_bytes, ordinal_));
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> score, Buffer::Allocate(MemoryKind::kDevice, out_bytes, ordinal_));
  SomWorkspace workspace;
  const BmuOutput out{static_cast<int32_t*>(bmu->data()), static_cast<int32_t*>(second->data()),
                      static_cast<float*>(score->data())};
  TESSERA_RETURN_IF_ERROR(FindBmus(stream, BmuAlgorithm::kFeatureMajor, set, codebook, out, &workspace));
  Projection p;
  p.bmu.resize(n);
  p.second.resize(n);
  p.score.resize(n);
  TESSERA_RETURN_IF_ERROR(CopyBytes(p.bmu.data(), MemoryKind::kHost, out.bmu, MemoryKind::kDevice, 4 * n, stream));
  TESSERA_RETURN_IF_ERROR(
      CopyBytes(p.second.data(), MemoryKind::kHost, out.second, MemoryKind::kDevice, 4 * n, stream));
  TESSERA_RETURN_IF_ERROR(
      CopyBytes(p.score.data(), MemoryKind::kHost, out.score, MemoryKind::kDevice, 4 * n, stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  p.quality = ComputeQuality(docs.offsets().data(), n, p.bmu.data(), p.second.data(), p.score.data(),
                             model_.sq_norms.data(), model_.grid, adjacency);
  return p;
}

}  // namespace som
}  // namespace tessera

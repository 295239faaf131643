#include "kernels/parallel/staged_communicator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/memory_kind_for.h"
#include "common/status.h"

namespace tessera {
namespace parallel {
std::vector<double> StagedGroup::reduced(size_t call) const {
  return call < reduced_.size() ? reduced_[call] : std::vector<double>();
}

void StagedGroup::Publish(size_t call, std::vector<double> values) {
  if (published_.size() <= call) published_.resize(call + 1);
  published_[call] = std::move(values);
}

absl::Status StagedGroup::Contribute(size_t call, int rank, ReduceOp op, const std::vector<double>& values) {
  if (reduced_.size() <= call) {
    reduced_.resize(call + 1);
    ops_.resize(call + 1, op);
    last_rank_.resize(call + 1, -1);
  }
  if (last_rank_[call] < 0) {
    reduced_[call] = values;
    ops_[call] = op;
  } else {
    if (rank <= last_rank_[call]) {
      return absl::InvalidArgumentError(absl::StrCat("staged AllReduce call ", call, ": shard ", rank,
                                                     " after shard ", last_rank_[call], " (shards run in rank order)"));
    }
    if (values.size() != reduced_[call].size() || op != ops_[call]) {
      return absl::InvalidArgumentError(absl::StrCat("staged AllReduce call ", call, ": shard ", rank, " reduces ",
                                                     values.size(), " values, earlier shards ", reduced_[call].size(),
                                                     " (or another op)"));
    }
    for (size_t i = 0; i < values.size(); ++i) reduced_[call][i] = CombineReduced(reduced_[call][i], values[i], op);
  }
  last_rank_[call] = rank;
  return absl::OkStatus();
}

template <typename T>
absl::Status StagedCommunicator::AllReduceImpl(T* data, size_t count, ReduceOp op, const Stream& stream) {
  if (count > 0 && data == nullptr) return absl::InvalidArgumentError("AllReduce: data is null");
  const MemoryKind kind = MemoryKindFor(stream);
  const size_t call = calls_++;
  if (call < group_->published_.size() && !group_->published_[call].empty()) {
    const std::vector<double>& values = group_->published_[call];
    if (values.size() != count) {
      return absl::InvalidArgumentError(absl::StrCat("staged AllReduce call ", call, ": published ", values.size(),
                                                     " values, shard ", rank_, " reduces ", count));
    }
    std::vector<T> result(values.begin(), values.end());
    TESSERA_RETURN_IF_ERROR(CopyBytes(data, kind, result.data(), MemoryKind::kHost, count * sizeof(T), stream));
    return stream.Synchronize();
  }
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  std::vector<T> mine(count);
  if (count > 0) TESSERA_RETURN_IF_ERROR(CopyBytes(mine.data(), MemoryKind::kHost, data, kind, count * sizeof(T), stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return group_->Contribute(call, rank_, op, std::vector<double>(mine.begin(), mine.end()));
}

absl::Status StagedCommunicator::AllReduce(float* data, size_t count, ReduceOp op, const Stream& stream) {
  return AllReduceImpl(data, count, op, stream);
}

absl::Status StagedCommunicator::AllReduce(double* data, size_t count, ReduceOp op, const Stream& stream) {
  return AllReduceImpl(data, count, op, stream);
}

absl::Status StagedCommunicator::SendRecv(const void*, size_t, int dst, void*, size_t, int src, const Stream&) {
  for (int peer : {dst, src}) {
    if (peer != kNoPeer && (peer < 0 || peer >= size())) {
      return absl::InvalidArgumentError(absl::StrCat("SendRecv: peer ", peer, " outside ", size(), " shards"));
    }
  }
  return absl::OkStatus();  // the caller staged the halos
}

absl::Status StagedCommunicator::Barrier(const Stream& stream) { return stream.Synchronize(); }

std::string StagedCommunicator::Describe() const {
  return absl::StrCat("staged shard ", rank_, "/", size(), " (one device, shards in turn)");
}

}  // namespace parallel
}  // namespace tessera

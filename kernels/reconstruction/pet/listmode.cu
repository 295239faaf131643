// CUDA list-mode data terms: naive (one thread per event, atomic scatter) and
// bucketed (events sorted by (subset, TOF bin, view, row, col) and merged
// once; per subset a sparse forward pass over the unique keys fills a dense
// ratio sinogram, which the caller back-projects with the sinogram projector).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <vector>

#include "common/buffer.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/reconstruction/pet/cuda_sum.cuh"
#include "kernels/reconstruction/pet/listmode_kernels.h"
#include "kernels/reconstruction/pet/projector_kernels.h"

namespace tessera {
namespace recon {
namespace pet {
namespace cuda {
namespace {

constexpr int kThreads = cuda_detail::kSumThreads;

cudaStream_t Native(const Stream& s) { return static_cast<cudaStream_t>(s.native()); }
int64_t BlocksFor(int64_t n) { return (n + kThreads - 1) / kThreads; }

absl::StatusOr<std::shared_ptr<Buffer>> Device(const Stream& stream, size_t bytes) {
  return Buffer::Allocate(MemoryKind::kDevice, bytes, stream.ordinal());
}

struct AtomicAdd {
  float* image;
  TESSERA_RECON_HD void operator()(int64_t voxel, float what) const {
#if defined(__CUDA_ARCH__)
    atomicAdd(image + voxel, what);
#else
    image[voxel] += what;
#endif
  }
};

struct AddU32 {
  __host__ __device__ uint32_t operator()(uint32_t a, uint32_t b) const { return a + b; }
};

__global__ void __launch_bounds__(kThreads)
    NaiveKernel(ProjectorParams p, const ListModeEvent* __restrict__ events, int64_t n,
                const float* __restrict__ image, float* out, double* partials) {
  const int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  double ll = 0.0;
  if (i < n) {
    const ListModeEvent e = events[i];
    const int k = TofIndex(e, p.tof.bins);
    const Lor L = MakeLor(p, static_cast<int>(e.view), e.col, e.row);
    const float att = p.atten != nullptr ? p.atten[LorIndex(p, e.view, e.col, e.row)] : 1.0f;
    const float fwd = ForwardBin(p, image, L, k) * att;
    if (fwd > 0.0f) {
      ll = e.weight * log(static_cast<double>(fwd));
      BackBin(p, L, k, static_cast<float>(e.weight) * att / fwd, AtomicAdd{out});
    }
  }
  cuda_detail::WriteBlockSum(ll, partials);
}

__global__ void MakeKeysKernel(const ListModeEvent* __restrict__ events, int64_t n, BucketKeyShape shape,
                               unsigned long long* keys, uint32_t* weights) {
  const int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (i >= n) return;
  const ListModeEvent e = events[i];
  const uint64_t s = e.view % shape.subsets;
  const uint64_t k = static_cast<uint64_t>(TofIndex(e, static_cast<int>(shape.bins)));
  keys[i] = (((s * shape.bins + k) * shape.views + e.view) * shape.rows + e.row) * shape.cols + e.col;
  weights[i] = e.weight;
}

// starts[s] = first unique index of subset s (starts pre-filled with `unique`).
__global__ void SubsetStartsKernel(const unsigned long long* __restrict__ keys, int64_t unique, uint64_t per_subset,
                                   int64_t* starts) {
  const int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (i >= unique) return;
  const int64_t s = static_cast<int64_t>(keys[i] / per_subset);
  const int64_t prev = i == 0 ? -1 : static_cast<int64_t>(keys[i - 1] / per_subset);
  for (int64_t t = prev + 1; t <= s; ++t) starts[t] = i;
}

__global__ void __launch_bounds__(kThreads)
    BucketForwardKernel(ProjectorParams p, const unsigned long long* __restrict__ keys,
                        const uint32_t* __restrict__ mult, int64_t begin, int64_t count, BucketKeyShape shape,
                        int subsets, const float* __restrict__ image, float* __restrict__ ratio, double* partials) {
  const int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  double ll = 0.0;
  if (i < count) {
    uint64_t key = keys[begin + i];
    const int col = static_cast<int>(key % shape.cols);
    key /= shape.cols;
    const int row = static_cast<int>(key % shape.rows);
    key /= shape.rows;
    const int view = static_cast<int>(key % shape.views);
    key /= shape.views;
    const int k = static_cast<int>(key % shape.bins);
    const Lor L = MakeLor(p, view, col, row);
    const float att = p.atten != nullptr ? p.atten[LorIndex(p, view, col, row)] : 1.0f;
    const float fwd = ForwardBin(p, image, L, k) * att;
    const int64_t q = view / subsets;  // position of the view in its subset
    const int64_t at = col + static_cast<int64_t>(p.cols) * (row + static_cast<int64_t>(p.rows) * (k + p.tof.bins * q));
    const uint32_t m = mult[begin + i];
    if (fwd > 0.0f) {
      ll = m * log(static_cast<double>(fwd));
      ratio[at] = static_cast<float>(m) / fwd;
    }
  }
  cuda_detail::WriteBlockSum(ll, partials);
}

int BitsFor(uint64_t size) {
  int bits = 1;
  while (bits < 64 && (uint64_t{1} << bits) < size) ++bits;
  return bits;
}

}  // namespace

absl::StatusOr<double> NaiveDataTerm(const Stream& stream, const ProjectorParams& p, const ListModeEvent* events,
                                     int64_t n, const float* image, float* out) {
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out, 0, GridSize(p.grid) * sizeof(float), Native(stream)));
  if (n == 0) return 0.0;
  const int64_t blocks = BlocksFor(n);
  TESSERA_ASSIGN_OR_RETURN(auto partials, Device(stream, (blocks + 1) * sizeof(double)));
  double* part = static_cast<double*>(partials->data());
  NaiveKernel<<<blocks, kThreads, 0, Native(stream)>>>(p, events, n, image, out, part);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("pet NaiveKernel");
  return cuda_detail::FinishSum(stream, part, blocks);
}

absl::StatusOr<EventBuckets> BuildBuckets(const Stream& stream, const ListModeEvent* events, int64_t n,
                                          const BucketKeyShape& shape) {
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  cudaStream_t s = Native(stream);
  EventBuckets out;
  out.subset_starts.assign(shape.subsets + 1, 0);
  TESSERA_ASSIGN_OR_RETURN(out.keys, Device(stream, std::max<int64_t>(n, 1) * sizeof(unsigned long long)));
  TESSERA_ASSIGN_OR_RETURN(out.mult, Device(stream, std::max<int64_t>(n, 1) * sizeof(uint32_t)));
  if (n == 0) return out;
  {
    TESSERA_ASSIGN_OR_RETURN(auto raw, Device(stream, n * sizeof(ListModeEvent)));
    TESSERA_ASSIGN_OR_RETURN(auto keys_in, Device(stream, n * sizeof(unsigned long long)));
    TESSERA_ASSIGN_OR_RETURN(auto vals_in, Device(stream, n * sizeof(uint32_t)));
    TESSERA_ASSIGN_OR_RETURN(auto keys_sorted, Device(stream, n * sizeof(unsigned long long)));
    TESSERA_ASSIGN_OR_RETURN(auto vals_sorted, Device(stream, n * sizeof(uint32_t)));
    TESSERA_ASSIGN_OR_RETURN(auto runs, Device(stream, sizeof(int64_t)));
    TESSERA_RETURN_IF_ERROR(
        CopyBytes(raw->data(), MemoryKind::kDevice, events, MemoryKind::kHost, n * sizeof(ListModeEvent), stream));
    auto* k_in = static_cast<unsigned long long*>(keys_in->data());
    auto* v_in = static_cast<uint32_t*>(vals_in->data());
    auto* k_sorted = static_cast<unsigned long long*>(keys_sorted->data());
    auto* v_sorted = static_cast<uint32_t*>(vals_sorted->data());
    auto* k_unique = static_cast<unsigned long long*>(out.keys->data());
    auto* v_unique = static_cast<uint32_t*>(out.mult->data());
    auto* num_runs = static_cast<int64_t*>(runs->data());
    MakeKeysKernel<<<BlocksFor(n), kThreads, 0, s>>>(static_cast<const ListModeEvent*>(raw->data()), n, shape, k_in,
                                                     v_in);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("pet MakeKeysKernel");
    const int end_bit = BitsFor(shape.size());
    size_t sort_bytes = 0, reduce_bytes = 0;
    TESSERA_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, k_in, k_sorted, v_in, v_sorted,
                                                                 n, 0, end_bit, s));
    TESSERA_CUDA_RETURN_IF_ERROR(cub::DeviceReduce::ReduceByKey(nullptr, reduce_bytes, k_sorted, k_unique, v_sorted,
                                                                v_unique, num_runs, AddU32(), n, s));
    TESSERA_ASSIGN_OR_RETURN(auto temp, Device(stream, std::max(sort_bytes, reduce_bytes)));
    TESSERA_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(temp->data(), sort_bytes, k_in, k_sorted, v_in,
                                                                 v_sorted, n, 0, end_bit, s));
    TESSERA_CUDA_RETURN_IF_ERROR(cub::DeviceReduce::ReduceByKey(temp->data(), reduce_bytes, k_sorted, k_unique,
                                                                v_sorted, v_unique, num_runs, AddU32(), n, s));
    TESSERA_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(&out.unique, num_runs, sizeof(int64_t), cudaMemcpyDeviceToHost, s));
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  }
  // Where each subset's keys start.
  const uint64_t per_subset = static_cast<uint64_t>(shape.bins * shape.views * shape.rows * shape.cols);
  TESSERA_ASSIGN_OR_RETURN(auto starts, Device(stream, (shape.subsets + 1) * sizeof(int64_t)));
  std::vector<int64_t> init(shape.subsets + 1, out.unique);
  TESSERA_RETURN_IF_ERROR(CopyBytes(starts->data(), MemoryKind::kDevice, init.data(), MemoryKind::kHost,
                                    init.size() * sizeof(int64_t), stream));
  if (out.unique > 0) {
    SubsetStartsKernel<<<BlocksFor(out.unique), kThreads, 0, s>>>(
        static_cast<const unsigned long long*>(out.keys->data()), out.unique, per_subset,
        static_cast<int64_t*>(starts->data()));
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("pet SubsetStartsKernel");
  }
  TESSERA_RETURN_IF_ERROR(CopyBytes(out.subset_starts.data(), MemoryKind::kHost, starts->data(), MemoryKind::kDevice,
                                    init.size() * sizeof(int64_t), stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return out;
}

absl::StatusOr<double> BucketedRatio(const Stream& stream, const ProjectorParams& p, const EventBuckets& buckets,
                                     const BucketKeyShape& shape, int subset, const ViewRange& range,
                                     const float* image, float* ratio) {
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  cudaStream_t s = Native(stream);
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(ratio, 0, RangeSize(p, range) * sizeof(float), s));
  const int64_t begin = buckets.subset_starts[subset];
  const int64_t count = buckets.subset_starts[subset + 1] - begin;
  double ll = 0.0;
  if (count > 0) {
    const int64_t blocks = BlocksFor(count);
    TESSERA_ASSIGN_OR_RETURN(auto partials, Device(stream, (blocks + 1) * sizeof(double)));
    double* part = static_cast<double*>(partials->data());
    BucketForwardKernel<<<blocks, kThreads, 0, s>>>(
        p, static_cast<const unsigned long long*>(buckets.keys->data()),
        static_cast<const uint32_t*>(buckets.mult->data()), begin, count, shape, static_cast<int>(shape.subsets),
        image, ratio, part);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("pet BucketForwardKernel");
    TESSERA_ASSIGN_OR_RETURN(ll, cuda_detail::FinishSum(stream, part, blocks));
  }
  return ll;
}

}  // namespace cuda
}  // namespace pet
}  // namespace recon
}  // namespace tessera

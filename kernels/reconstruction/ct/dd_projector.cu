// CUDA distance-driven projector: the gathers of dd_gather.h as kernels.
//   forward: one thread per detector cell (a block covers cells of one view,
//            whose DdView sits in shared memory), walking the slabs; x-slab
//            views read an x<->y transposed copy of the volume (plan scratch),
//            so neighbouring cells read neighbouring addresses along b.
//   back:    per chunk of views, a preparation kernel weights the sinogram
//            (dd_back_gather.h), then one thread per voxel, x fastest; the
//            views are staged in shared memory 16 at a time and visited in
//            order, each view's sum added in double: a fixed order, hence
//            bit-identical runs.
// No atomics anywhere, so ExecutionMode needs no separate path.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/buffer.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/reconstruction/ct/dd_back_gather.h"
#include "kernels/reconstruction/ct/dd_gather.h"
#include "kernels/reconstruction/ct/dd_projector.h"

namespace tessera {
namespace recon {
namespace ct {
namespace cuda {
namespace {

constexpr int64_t kMaxGridZ = 65535;
constexpr int kTile = 32;
constexpr int kViewsPerTile = 16;
constexpr int kViewWords = static_cast<int>(sizeof(DdView) / sizeof(double));
static_assert(sizeof(DdView) % sizeof(double) == 0, "DdView is copied as doubles");

cudaStream_t Native(const Stream& s) { return static_cast<cudaStream_t>(s.native()); }

// out[y + ny (x + nx z)] = in[x + nx (y + ny z)], for slices z0 + blockIdx.z.
__global__ void TransposeXY(const float* __restrict__ in, float* __restrict__ out, int nx, int ny, int64_t z0) {
  __shared__ float tile[kTile][kTile + 1];
  const int64_t plane = static_cast<int64_t>(nx) * ny * (z0 + blockIdx.z);
  const int x = blockIdx.x * kTile + threadIdx.x;
  for (int dy = threadIdx.y; dy < kTile; dy += blockDim.y) {
    const int y = blockIdx.y * kTile + dy;
    if (x < nx && y < ny) tile[dy][threadIdx.x] = in[plane + x + static_cast<int64_t>(nx) * y];
  }
  __syncthreads();
  const int y = blockIdx.y * kTile + threadIdx.x;
  for (int dx = threadIdx.y; dx < kTile; dx += blockDim.y) {
    const int xx = blockIdx.x * kTile + dx;
    if (xx < nx && y < ny) out[plane + y + static_cast<int64_t>(ny) * xx] = tile[threadIdx.x][dx];
  }
}

// Copies `n` views (first + v * stride) into shared memory, all threads helping.
__device__ void StageViews(const DdView* __restrict__ views, int64_t first, int64_t stride, int n, double* shared) {
  const int tid = threadIdx.x + blockDim.x * threadIdx.y, threads = blockDim.x * blockDim.y;
  for (int q = tid; q < n * kViewWords; q += threads) {
    const int v = q / kViewWords, word = q % kViewWords;
    shared[q] = reinterpret_cast<const double*>(views + first + v * stride)[word];
  }
}

template <bool k2d>
__global__ void __launch_bounds__(128)
    ForwardKernel(const DdView* __restrict__ views, const float* __restrict__ tables, DdShape shape, int64_t first,
                  int64_t stride, int64_t s0, const float* __restrict__ volume, const float* __restrict__ transposed,
                  float* __restrict__ sino) {
  __shared__ double raw[kViewWords];
  const int64_t s = s0 + blockIdx.z;
  const int64_t view = first + s * stride;
  StageViews(views, view, 1, 1, raw);
  __syncthreads();
  const DdView& w = *reinterpret_cast<const DdView*>(raw);
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t r = blockIdx.y * static_cast<int64_t>(blockDim.y) + threadIdx.y;
  if (c >= shape.cols || r >= shape.rows) return;
  const gather::CellLines cl = gather::CellLinesFor(w, tables + view * TableStride(shape.cols), shape, c, r);
  const int nb = static_cast<int>(InPlaneCount(shape, w.axis)), na = static_cast<int>(SlabCount(shape, w.axis));
  const float* vol = w.axis == 0 ? transposed : volume;
  sino[c + shape.cols * (r + shape.rows * s)] = gather::ForwardCell<k2d>(cl, vol, nb, na, static_cast<int>(shape.nz));
}

// 2-D preparation: one warp per view of the chunk, lane l summing column
// segment l (PrepareColumnPrefix's steps, in the same order).
constexpr int kPrefixWarps = 4;

__global__ void __launch_bounds__(32 * kPrefixWarps)
    PrefixKernel(const DdView* __restrict__ views, const float* __restrict__ tables, DdShape shape, int64_t first,
                 int64_t stride, int64_t p0, int64_t n, const float* __restrict__ sino,
                 unsigned char* __restrict__ scratch, int64_t view_bytes) {
  static_assert(gather::kPrefixLanes == 32, "one warp per view");
  __shared__ double totals[kPrefixWarps][32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t p = blockIdx.x * static_cast<int64_t>(kPrefixWarps) + warp;
  if (p >= n) return;  // whole warps leave together
  const int64_t view = first + (p0 + p) * stride;
  Double2* out = reinterpret_cast<Double2*>(scratch + p * view_bytes);
  totals[warp][lane] = gather::PrefixPass1(views[view], tables + view * TableStride(shape.cols), shape.cols,
                                           sino + (p0 + p) * shape.cols, lane, out);
  __syncwarp();
  double offset = 0;
  for (int l = 0; l < lane; ++l) offset += totals[warp][l];
  gather::PrefixPass2(shape.cols, lane, offset, out);
}

// 3-D preparation: y L per cell of each view of the chunk.
__global__ void CellWeightKernel(const DdView* __restrict__ views, const float* __restrict__ tables, DdShape shape,
                                 int64_t first, int64_t stride, int64_t p0, int64_t n, const float* __restrict__ sino,
                                 unsigned char* __restrict__ scratch, int64_t view_bytes) {
  const int64_t cells = shape.cols * shape.rows, total = n * cells;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t p = e / cells, cell = e % cells, view = first + (p0 + p) * stride;
    float* yl = reinterpret_cast<float*>(scratch + p * view_bytes);
    yl[cell] = gather::CellWeight(views[view], tables + view * TableStride(shape.cols), shape, cell % shape.cols,
                                  cell / shape.cols, sino[(p0 + p) * cells + cell]);
  }
}

// Row-coupled preparation: each view's TB and TC lines.
__global__ void CoupledLineKernel(const DdView* __restrict__ views, DdShape shape, int64_t first, int64_t stride,
                                  int64_t p0, int64_t n, gather::BackScratch layout,
                                  unsigned char* __restrict__ scratch) {
  const int64_t per = gather::CoupledBCount(shape) + gather::CoupledCCount(shape), total = n * per;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t p = e / per, view = first + (p0 + p) * stride;
    const DdView& w = views[view];
    if (!w.row_coupled) continue;
    unsigned char* base = scratch + p * layout.view_bytes;
    gather::PrepareCoupledLine(w, shape, e % per, reinterpret_cast<Float2*>(base + layout.tb_offset),
                               reinterpret_cast<Float2*>(base + layout.tc_offset));
  }
}

// One thread per pixel (2-D, K = 1) or run of K voxels along z (3-D) over
// the chunk's views p0 .. p0 + count - 1, in order; `accumulate` adds the
// chunk's sum to what earlier chunks wrote.
template <bool k2d, bool kMayCouple, int K>
__global__ void __launch_bounds__(128)
    BackKernel(const DdView* __restrict__ views, const float* __restrict__ back_tables, DdShape shape,
               gather::BackScratch layout, int64_t first, int64_t stride, int64_t p0, int64_t count, int64_t run0,
               const unsigned char* __restrict__ scratch, int accumulate, float* __restrict__ volume) {
  __shared__ double raw[kViewsPerTile * kViewWords];
  const DdView* tile = reinterpret_cast<const DdView*>(raw);
  const int64_t x = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t y = blockIdx.y * static_cast<int64_t>(blockDim.y) + threadIdx.y;
  const int64_t z0 = (run0 + blockIdx.z) * K;
  const int nk = static_cast<int>(shape.nz - z0 < K ? shape.nz - z0 : K);
  const bool inside = x < shape.nx && y < shape.ny;
  const int64_t back_stride = BackTableStride(shape.cols, shape.is_2d);
  double acc[K];
  for (int m = 0; m < K; ++m) acc[m] = 0;
  for (int64_t v0 = 0; v0 < count; v0 += kViewsPerTile) {
    const int n = static_cast<int>(count - v0 < kViewsPerTile ? count - v0 : kViewsPerTile);
    __syncthreads();  // the previous tile is no longer read
    StageViews(views, first + (p0 + v0) * stride, stride, n, raw);
    __syncthreads();
    if (!inside) continue;
    for (int v = 0; v < n; ++v) {
      const float* table = back_tables + (first + (p0 + v0 + v) * stride) * back_stride;
      const unsigned char* view_scratch = scratch + (v0 + v) * layout.view_bytes;
      if (k2d) {
        acc[0] += gather::BackPixelView(tile[v], table, shape, view_scratch, x, y);
      } else {
        gather::BackRunView<K, kMayCouple>(tile[v], table, shape, layout, view_scratch, x, y, z0, nk, acc);
      }
    }
  }
  if (!inside) return;
  for (int m = 0; m < K; ++m) {
    if (m >= nk) break;
    float& out = volume[x + shape.nx * (y + shape.ny * (z0 + m))];
    out = static_cast<float>(accumulate ? static_cast<double>(out) + acc[m] : acc[m]);
  }
}

struct BackLaunch {
  dim3 grid, block;
  cudaStream_t stream;
  const DdView* views;
  const float* back_tables;
  DdShape shape;
  gather::BackScratch layout;
  int64_t first, stride, p0, count, run0;
  const unsigned char* scratch;
  int accumulate;
  float* volume;
};

template <bool k2d, bool kMayCouple, int K>
void LaunchBack(const BackLaunch& a) {
  BackKernel<k2d, kMayCouple, K><<<a.grid, a.block, 0, a.stream>>>(a.views, a.back_tables, a.shape, a.layout, a.first,
                                                                   a.stride, a.p0, a.count, a.run0, a.scratch,
                                                                   a.accumulate, a.volume);
}

template <bool kMayCouple>
void LaunchBack3D(int z_run, const BackLaunch& a) {
  switch (z_run) {
    case 1: return LaunchBack<false, kMayCouple, 1>(a);
    case 2: return LaunchBack<false, kMayCouple, 2>(a);
    case 8: return LaunchBack<false, kMayCouple, 8>(a);
    default: return LaunchBack<false, kMayCouple, 4>(a);
  }
}

unsigned GridFor(int64_t total, int threads) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((total + threads - 1) / threads, 65535 * 16)));
}

bool AnyXSlabs(const DdSystem& system, int64_t first, int64_t stride, int64_t count) {
  for (int64_t v = 0; v < count; ++v) {
    if (system.views[first + v * stride].axis == 0) return true;
  }
  return false;
}

}  // namespace

absl::Status CreatePlan(const DdSystem& system, const Stream& stream, const DdProjectorOptions& options,
                        DdDevicePlan* plan) {
  // Measured on an H200 (256^3, 360 views): run 8 is 0.87x run 4's time for
  // circular cones, 1.24x for tilted detectors (register spills).
  plan->z_run = options.back_z_run != 0 ? options.back_z_run : (system.any_row_coupled ? 4 : 8);
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  const size_t bytes = system.views.size() * sizeof(DdView);
  TESSERA_ASSIGN_OR_RETURN(plan->views, Buffer::Allocate(MemoryKind::kDevice, bytes, stream.ordinal()));
  TESSERA_RETURN_IF_ERROR(
      CopyBytes(plan->views->data(), MemoryKind::kDevice, system.views.data(), MemoryKind::kHost, bytes, stream));
  const size_t table_bytes = system.tables.size() * sizeof(float);
  TESSERA_ASSIGN_OR_RETURN(plan->tables, Buffer::Allocate(MemoryKind::kDevice, table_bytes, stream.ordinal()));
  TESSERA_RETURN_IF_ERROR(CopyBytes(plan->tables->data(), MemoryKind::kDevice, system.tables.data(),
                                    MemoryKind::kHost, table_bytes, stream));
  const size_t back_bytes = system.back_tables.size() * sizeof(float);
  TESSERA_ASSIGN_OR_RETURN(plan->back_tables, Buffer::Allocate(MemoryKind::kDevice, back_bytes, stream.ordinal()));
  TESSERA_RETURN_IF_ERROR(CopyBytes(plan->back_tables->data(), MemoryKind::kDevice, system.back_tables.data(),
                                    MemoryKind::kHost, back_bytes, stream));
  const gather::BackScratch layout = gather::BackScratchLayout(system.shape, system.any_row_coupled);
  plan->chunk_views =
      gather::BackChunkViews(layout, options.back_scratch_bytes, static_cast<int64_t>(system.views.size()));
  TESSERA_ASSIGN_OR_RETURN(plan->scratch, Buffer::Allocate(MemoryKind::kDevice, plan->chunk_views * layout.view_bytes,
                                                           stream.ordinal()));
  if (AnyXSlabs(system, 0, 1, static_cast<int64_t>(system.views.size()))) {
    const DdShape& s = system.shape;
    TESSERA_ASSIGN_OR_RETURN(plan->transposed, Buffer::Allocate(MemoryKind::kDevice,
                                                                s.nx * s.ny * s.nz * sizeof(float), stream.ordinal()));
  }
  return stream.Synchronize();  // the host copy of the views goes away with the caller
}

absl::Status Forward(const DdDevicePlan& plan, const DdSystem& system, const Stream& stream, ExecutionMode mode,
                     int64_t first, int64_t stride, int64_t count, const float* volume, float* sinogram) {
  (void)mode;  // the gather is deterministic and the fastest we have: both modes use it
  if (count == 0) return absl::OkStatus();
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  const DdShape& s = system.shape;
  cudaStream_t cs = Native(stream);
  float* transposed = nullptr;
  if (AnyXSlabs(system, first, stride, count)) {
    transposed = static_cast<float*>(plan.transposed->data());
    const dim3 block(kTile, 8);
    for (int64_t z0 = 0; z0 < s.nz; z0 += kMaxGridZ) {
      const dim3 grid(static_cast<unsigned>((s.nx + kTile - 1) / kTile),
                      static_cast<unsigned>((s.ny + kTile - 1) / kTile),
                      static_cast<unsigned>(std::min(kMaxGridZ, s.nz - z0)));
      TransposeXY<<<grid, block, 0, cs>>>(volume, transposed, static_cast<int>(s.nx), static_cast<int>(s.ny), z0);
    }
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("dd transpose");
  }
  const DdView* views = static_cast<const DdView*>(plan.views->data());
  const float* tables = static_cast<const float*>(plan.tables->data());
  const dim3 block = s.is_2d ? dim3(128, 1) : dim3(32, 4);
  for (int64_t s0 = 0; s0 < count; s0 += kMaxGridZ) {
    const dim3 grid(static_cast<unsigned>((s.cols + block.x - 1) / block.x),
                    static_cast<unsigned>((s.rows + block.y - 1) / block.y),
                    static_cast<unsigned>(std::min(kMaxGridZ, count - s0)));
    if (s.is_2d) {
      ForwardKernel<true><<<grid, block, 0, cs>>>(views, tables, s, first, stride, s0, volume, transposed, sinogram);
    } else {
      ForwardKernel<false><<<grid, block, 0, cs>>>(views, tables, s, first, stride, s0, volume, transposed, sinogram);
    }
  }
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("dd forward");
  return absl::OkStatus();
}

absl::Status Back(const DdDevicePlan& plan, const DdSystem& system, const Stream& stream, ExecutionMode mode,
                  int64_t first, int64_t stride, int64_t count, const float* sinogram, float* volume) {
  (void)mode;  // see Forward
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  const DdShape& s = system.shape;
  cudaStream_t cs = Native(stream);
  if (count == 0) {
    TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(volume, 0, s.nx * s.ny * s.nz * sizeof(float), cs));
    return absl::OkStatus();
  }
  const DdView* views = static_cast<const DdView*>(plan.views->data());
  const float* tables = static_cast<const float*>(plan.tables->data());
  const float* back_tables = static_cast<const float*>(plan.back_tables->data());
  unsigned char* scratch = static_cast<unsigned char*>(plan.scratch->data());
  const gather::BackScratch layout = gather::BackScratchLayout(s, system.any_row_coupled);
  const int64_t cells = s.cols * s.rows;
  const dim3 block(32, 4);
  for (int64_t p0 = 0; p0 < count; p0 += plan.chunk_views) {
    const int64_t n = std::min(plan.chunk_views, count - p0);
    if (s.is_2d) {
      PrefixKernel<<<static_cast<unsigned>((n + kPrefixWarps - 1) / kPrefixWarps), 32 * kPrefixWarps, 0, cs>>>(
          views, tables, s, first, stride, p0, n, sinogram, scratch, layout.view_bytes);
    } else {
      CellWeightKernel<<<GridFor(n * cells, 256), 256, 0, cs>>>(views, tables, s, first, stride, p0, n, sinogram,
                                                                 scratch, layout.view_bytes);
      if (system.any_row_coupled) {
        const int64_t per = gather::CoupledBCount(s) + gather::CoupledCCount(s);
        CoupledLineKernel<<<GridFor(n * per, 256), 256, 0, cs>>>(views, s, first, stride, p0, n, layout, scratch);
      }
    }
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("dd back preparation");
    const int z_run = s.is_2d ? 1 : plan.z_run;
    const int64_t runs = (s.nz + z_run - 1) / z_run;
    for (int64_t run0 = 0; run0 < runs; run0 += kMaxGridZ) {
      BackLaunch a;
      a.grid = dim3(static_cast<unsigned>((s.nx + block.x - 1) / block.x),
                    static_cast<unsigned>((s.ny + block.y - 1) / block.y),
                    static_cast<unsigned>(std::min(kMaxGridZ, runs - run0)));
      a.block = block;
      a.stream = cs;
      a.views = views, a.back_tables = back_tables, a.shape = s, a.layout = layout;
      a.first = first, a.stride = stride, a.p0 = p0, a.count = n, a.run0 = run0;
      a.scratch = scratch, a.accumulate = p0 > 0 ? 1 : 0, a.volume = volume;
      if (s.is_2d) {
        LaunchBack<true, false, 1>(a);
      } else if (!system.any_row_coupled) {
        LaunchBack3D<false>(z_run, a);
      } else {
        LaunchBack3D<true>(z_run, a);
      }
    }
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("dd back");
  }
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace ct
}  // namespace recon
}  // namespace tessera

// CUDA DMC kernels 2-4 (ALFI's fine-grained parallelism: one thread per
// gallery minutia of the batch), enqueued on the caller's stream with no
// host synchronisation or allocation.
//
// Kernel 2 keeps the latent's cylinders (bits, masks, directions, bit counts)
// in shared memory - every thread of a block compares against them - and
// reads its own gallery cylinder from the template-blocked word-major SoA
// (consecutive threads of a template coalesce). 128 threads per block: the
// 24 + 4 gallery words live in registers. The constants are a by-value
// kernel parameter, which CUDA places in the constant bank (read-only,
// cached, broadcast) - and unlike a __constant__ symbol it cannot race with
// a concurrent enqueue on another stream.
// Kernel 3 and 4 loop over their template's minutiae (a warp mostly shares
// one template, so those loads broadcast). Kernel 4 gives unmatched minutiae
// the dummy latent minutia 0 so the warp does not diverge.
// All per-thread arithmetic is dmc_impl.h's, shared with the CPU reference.
#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/fingerprint/dmc.h"
#include "kernels/fingerprint/dmc_impl.h"

namespace tessera {
namespace fingerprint {
namespace cuda {
namespace {

constexpr int kMatchThreads = 128;
constexpr int kThreads = 256;

__global__ void __launch_bounds__(kMatchThreads)
    LocalMatchingKernel(DmcLatentView latent, DmcBatchView batch, DmcConstants c, int16_t* __restrict__ best_latent,
                        float* __restrict__ similarity) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int nl = latent.n;
  uint64_t* l_bits = reinterpret_cast<uint64_t*>(smem);
  uint64_t* l_mask = l_bits + static_cast<size_t>(nl) * kMccBitWords;
  float* l_theta = reinterpret_cast<float*>(l_mask + static_cast<size_t>(nl) * kMccMaskWords);
  uint16_t* l_count = reinterpret_cast<uint16_t*>(l_theta + nl);
  for (int q = threadIdx.x; q < nl * kMccBitWords; q += blockDim.x) l_bits[q] = latent.bits[q];
  for (int q = threadIdx.x; q < nl * kMccMaskWords; q += blockDim.x) l_mask[q] = latent.mask[q];
  for (int q = threadIdx.x; q < nl; q += blockDim.x) {
    l_theta[q] = latent.theta[q];
    l_count[q] = latent.bit_count[q];
  }
  __syncthreads();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= batch.num_cylinders) return;
  const int t = dmc_internal::TemplateOf(batch.start, batch.num_templates, i);
  const int s = batch.start[t], nt = batch.start[t + 1] - s, j = i - s;
  const uint64_t* bits = batch.bits + static_cast<size_t>(kMccBitWords) * s;
  const uint64_t* mask = batch.mask + static_cast<size_t>(kMccMaskWords) * s;
  uint64_t g_bits[kMccBitWords], g_mask[kMccMaskWords];
#pragma unroll
  for (int w = 0; w < kMccBitWords; ++w) g_bits[w] = bits[static_cast<size_t>(w) * nt + j];
#pragma unroll
  for (int w = 0; w < kMccMaskWords; ++w) g_mask[w] = mask[static_cast<size_t>(w) * nt + j];
  const dmc_internal::LocalMatch m =
      dmc_internal::MatchOne(g_bits, g_mask, batch.theta[i], batch.bit_count[i], l_bits, l_mask, l_theta, l_count,
                             latent.lut_offset, latent.lut_index, c);
  best_latent[i] = static_cast<int16_t>(m.best);
  similarity[i] = m.similarity;
}

__global__ void __launch_bounds__(kThreads)
    QualityKernel(DmcBatchView batch, DmcConstants c, float* __restrict__ quality) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= batch.num_cylinders) return;
  const int t = dmc_internal::TemplateOf(batch.start, batch.num_templates, i);
  quality[i] = dmc_internal::QualityOne(batch.x, batch.y, batch.theta, batch.start[t], batch.start[t + 1], i, c);
}

__global__ void __launch_bounds__(kThreads)
    ClusterKernel(DmcLatentView latent, DmcBatchView batch, DmcConstants c, const int16_t* __restrict__ best_latent,
                  uint8_t* __restrict__ count, uint8_t* __restrict__ members) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= batch.num_cylinders) return;
  if (latent.n == 0) {  // uniform: no latent minutia to stand in for virtual matches
    count[i] = 0;
    return;
  }
  const int t = dmc_internal::TemplateOf(batch.start, batch.num_templates, i);
  dmc_internal::ClusterOne(batch.x, batch.y, batch.theta, best_latent, batch.start[t], batch.start[t + 1], i,
                           batch.num_cylinders, latent.x, latent.y, latent.theta, c, count, members);
}

}  // namespace

absl::Status EnqueueDmcKernels(void* cuda_stream, const DmcLatentView& latent, const DmcBatchView& batch,
                               const DmcConstants& constants, const DmcKernelResults& out) {
  cudaStream_t s = static_cast<cudaStream_t>(cuda_stream);
  const int n = batch.num_cylinders;
  const size_t shared = static_cast<size_t>(latent.n) * ((kMccBitWords + kMccMaskWords) * 8 + 4 + 2);
  // Up to 255 x 230 bytes: above the 48 KiB default, so opt in (a host-side
  // attribute; no synchronisation).
  TESSERA_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(LocalMatchingKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    static_cast<int>(shared)));
  const int match_blocks = (n + kMatchThreads - 1) / kMatchThreads;
  LocalMatchingKernel<<<match_blocks, kMatchThreads, shared, s>>>(latent, batch, constants, out.best_latent,
                                                                  out.similarity);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("dmc LocalMatchingKernel");
  const int blocks = (n + kThreads - 1) / kThreads;
  QualityKernel<<<blocks, kThreads, 0, s>>>(batch, constants, out.quality);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("dmc QualityKernel");
  ClusterKernel<<<blocks, kThreads, 0, s>>>(latent, batch, constants, out.best_latent, out.cluster_count,
                                            out.cluster_members);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("dmc ClusterKernel");
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace fingerprint
}  // namespace tessera

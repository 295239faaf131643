// CPU reference (and CPU backend) of DMC kernels 2-4: a loop over the batch's
// cylinders running the per-thread code of dmc_impl.h, which dmc.cu runs one
// cylinder per CUDA thread.
#if defined(__x86_64__)
#pragma GCC target("popcnt")
#endif

#include <algorithm>

#include "common/parallel.h"
#include "kernels/fingerprint/dmc.h"
#include "kernels/fingerprint/dmc_impl.h"

namespace tessera {
namespace fingerprint {
namespace cpu {
namespace {

using dmc_internal::ClusterOne;
using dmc_internal::MatchOne;
using dmc_internal::QualityOne;

// Calls fn(t) for templates [0, T) on `threads` threads (1: inline).
template <typename Fn>
void ForTemplates(int num_templates, int threads, const Fn& fn) {
  if (threads == 1 || num_templates <= 1) {
    for (int t = 0; t < num_templates; ++t) fn(t);
    return;
  }
  ParallelForDynamic(num_templates, 16, [&fn](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) fn(static_cast<int>(t));
  });
}

void MatchTemplate(const DmcLatentView& latent, const DmcBatchView& batch, const DmcConstants& c, int t,
                   int16_t* best_latent, float* similarity) {
  const int s = batch.start[t], nt = batch.start[t + 1] - s;
  const uint64_t* bits = batch.bits + static_cast<size_t>(kMccBitWords) * s;
  const uint64_t* mask = batch.mask + static_cast<size_t>(kMccMaskWords) * s;
  for (int j = 0; j < nt; ++j) {
    uint64_t g_bits[kMccBitWords], g_mask[kMccMaskWords];
    for (int w = 0; w < kMccBitWords; ++w) g_bits[w] = bits[static_cast<size_t>(w) * nt + j];
    for (int w = 0; w < kMccMaskWords; ++w) g_mask[w] = mask[static_cast<size_t>(w) * nt + j];
    const dmc_internal::LocalMatch m =
        MatchOne(g_bits, g_mask, batch.theta[s + j], batch.bit_count[s + j], latent.bits, latent.mask, latent.theta,
                 latent.bit_count, latent.lut_offset, latent.lut_index, c);
    best_latent[s + j] = static_cast<int16_t>(m.best);
    similarity[s + j] = m.similarity;
  }
}

void QualityTemplate(const DmcBatchView& batch, const DmcConstants& c, int t, float* quality) {
  const int s = batch.start[t], e = batch.start[t + 1];
  for (int i = s; i < e; ++i) quality[i] = QualityOne(batch.x, batch.y, batch.theta, s, e, i, c);
}

void ClusterTemplate(const DmcLatentView& latent, const DmcBatchView& batch, const DmcConstants& c, int t,
                     const int16_t* best, uint8_t* count, uint8_t* members) {
  const int s = batch.start[t], e = batch.start[t + 1];
  if (latent.n == 0) {  // no latent minutia to stand in for virtual matches
    std::fill(count + s, count + e, 0);
    return;
  }
  for (int i = s; i < e; ++i) {
    ClusterOne(batch.x, batch.y, batch.theta, best, s, e, i, batch.num_cylinders, latent.x, latent.y, latent.theta,
               c, count, members);
  }
}

}  // namespace

void LocalMatching(const DmcLatentView& latent, const DmcBatchView& batch, const DmcConstants& constants,
                   int16_t* best_latent, float* similarity) {
  for (int t = 0; t < batch.num_templates; ++t) MatchTemplate(latent, batch, constants, t, best_latent, similarity);
}

void MinutiaQuality(const DmcBatchView& batch, const DmcConstants& constants, float* quality) {
  for (int t = 0; t < batch.num_templates; ++t) QualityTemplate(batch, constants, t, quality);
}

void FindClusters(const DmcLatentView& latent, const DmcBatchView& batch, const DmcConstants& constants,
                  const int16_t* best_latent, uint8_t* cluster_count, uint8_t* cluster_members) {
  for (int t = 0; t < batch.num_templates; ++t) {
    ClusterTemplate(latent, batch, constants, t, best_latent, cluster_count, cluster_members);
  }
}

void TemplateQuality(int n, const float* x, const float* y, const float* theta, const DmcConstants& constants,
                     float* quality) {
  for (int i = 0; i < n; ++i) quality[i] = QualityOne(x, y, theta, 0, n, i, constants);
}

void RunDmcKernels(const DmcLatentView& latent, const DmcBatchView& batch, const DmcConstants& constants,
                   const DmcKernelResults& out, int threads) {
  // Kernel 4 of template t reads kernel 2's outputs of t only, so each
  // template runs all three in a row.
  ForTemplates(batch.num_templates, threads, [&](int t) {
    MatchTemplate(latent, batch, constants, t, out.best_latent, out.similarity);
    QualityTemplate(batch, constants, t, out.quality);
    ClusterTemplate(latent, batch, constants, t, out.best_latent, out.cluster_count, out.cluster_members);
  });
}

}  // namespace cpu
}  // namespace fingerprint
}  // namespace tessera

// Sharded LNCC (lncc.h's definition).
//
// CPU: box sums of the five products over the local slab (own slices plus
// window - 1 halo slices per inner side; zero padding only at the volume's
// own ends, exactly as the unsharded kernel), the per-voxel algebra shared
// with the kernels (lncc_math.h), cc summed over the own slices only and
// reduced over ranks, then the box-filtered a, b, c give dL/dW on the own
// slices.
//
// CUDA: the single-GPU fused kernel (lncc.cu) on the whole local slab. Its
// gradient is right on the own slices up to the 1/N scale (the a, b, c it
// box-filters there come from windows wholly inside the slab, since the halos
// are >= 2r), so it is rescaled by N_local / N. Its loss sums cc over every
// local slice, halo slices included (with windows truncated at the slab's
// ends); LnccHaloCcSumCuda (sharded_lncc.cu) recomputes exactly those halo
// terms and they are subtracted before the all-reduce.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/parallel.h"
#include "common/status.h"
#include "kernels/parallel/sharded_internal.h"
#include "kernels/parallel/sharded_ops.h"
#include "kernels/registration/lncc.h"
#include "kernels/registration/lncc_math.h"

namespace tessera {
namespace parallel {
namespace {

// In-place running box sum of width 2r + 1 along one axis of a (nx, ny, nz)
// double volume, zero outside. axis 0, 1, 2 = x, y, z.
void BoxSumAxis(std::vector<double>& vol, const Dims3& d, int r, int axis) {
  const int64_t n[3] = {d.nx, d.ny, d.nz};
  const int64_t stride[3] = {1, d.nx, d.nx * d.ny};
  const int64_t len = n[axis], step = stride[axis];
  // Lines along `axis`: enumerate the other two coordinates.
  const int a1 = axis == 0 ? 1 : 0, a2 = axis == 2 ? 1 : 2;
  const int64_t lines = n[a1] * n[a2];
  ParallelFor(lines, [&](int64_t l0, int64_t l1, int) {
    std::vector<double> line(len);
    for (int64_t l = l0; l < l1; ++l) {
      const int64_t base = (l % n[a1]) * stride[a1] + (l / n[a1]) * stride[a2];
      for (int64_t i = 0; i < len; ++i) line[i] = vol[base + i * step];
      double sum = 0;
      for (int64_t i = 0; i <= r && i < len; ++i) sum += line[i];
      for (int64_t i = 0; i < len; ++i) {
        vol[base + i * step] = sum;
        if (i + r + 1 < len) sum += line[i + r + 1];
        if (i - r >= 0) sum -= line[i - r];
      }
    }
  });
}

void BoxSum(std::vector<double>& vol, const Dims3& d, int r) {
  for (int axis = 0; axis < 3; ++axis) BoxSumAxis(vol, d, r, axis);
}

static_assert(sharded_internal::kLnccMaxDeviceWindow == registration::kLnccMaxCudaWindow,
              "the halo kernel supports the fused kernel's windows");

absl::StatusOr<double> ShardedLnccCuda(Communicator& comm, const SlabLayout& layout, const NDArray& fixed,
                                       const NDArray& warped, const registration::LnccOptions& options,
                                       NDArray* grad_warped, const Stream& stream,
                                       registration::Workspace* workspace) {
#if TESSERA_WITH_CUDA
  if (options.window > registration::kLnccMaxCudaWindow) {
    return absl::InvalidArgumentError(absl::StrCat("sharded LNCC (CUDA): window ", options.window,
                                                   " exceeds the maximum of ", registration::kLnccMaxCudaWindow));
  }
  const Dims3 d = layout.local_dims();
  const float* F = fixed.data<float>();
  const float* W = warped.data<float>();
  float* G = grad_warped != nullptr ? grad_warped->data<float>() : nullptr;
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> loss_device,
                           Buffer::Allocate(MemoryKind::kDevice, sizeof(float), stream.ordinal()));
  // a, b, c in the workspace (or allocated and freed by the call).
  TESSERA_RETURN_IF_ERROR(
      registration::Lncc(stream, F, W, d, options, static_cast<float*>(loss_device->data()), G, workspace));
  float slab_loss = 0;
  TESSERA_RETURN_IF_ERROR(
      CopyBytes(&slab_loss, MemoryKind::kHost, loss_device->data(), MemoryKind::kDevice, sizeof(float), stream));
  const double local_voxels = static_cast<double>(d.size());
  TESSERA_ASSIGN_OR_RETURN(const double halo_sum,
                           sharded_internal::LnccHaloCcSumCuda(stream, F, W, layout, options.window, options.eps));
  // The kernel's loss is -(sum of cc over the slab) / N_local.
  const double own_sum = -static_cast<double>(slab_loss) * local_voxels - halo_sum;
  TESSERA_ASSIGN_OR_RETURN(double total, AllReduceHostScalar(comm, own_sum, ReduceOp::kSum, stream));
  const double voxels = static_cast<double>(layout.global.size());
  if (G != nullptr) {
    TESSERA_RETURN_IF_ERROR(sharded_internal::Scale(G + layout.own_offset(), layout.own_voxels(),
                                                    static_cast<float>(local_voxels / voxels), stream));
  }
  return -total / voxels;
#else
  (void)comm, (void)layout, (void)fixed, (void)warped, (void)options, (void)grad_warped, (void)stream,
      (void)workspace;
  return absl::FailedPreconditionError("sharded LNCC on a CUDA stream in a build without CUDA");
#endif
}

}  // namespace

absl::StatusOr<double> ShardedLncc(Communicator& comm, const SlabLayout& layout, const NDArray& fixed,
                                   NDArray& warped, const registration::LnccOptions& options, NDArray* grad_warped,
                                   const Stream& stream, registration::Workspace* workspace) {
  TESSERA_RETURN_IF_ERROR(sharded_internal::CheckLocal(fixed, layout, 1, stream, "fixed"));
  TESSERA_RETURN_IF_ERROR(sharded_internal::CheckLocal(warped, layout, 1, stream, "warped"));
  if (grad_warped != nullptr) {
    TESSERA_RETURN_IF_ERROR(sharded_internal::CheckLocal(*grad_warped, layout, 1, stream, "grad_warped"));
  }
  if (options.window < 1 || options.window % 2 == 0) {
    return absl::InvalidArgumentError(absl::StrCat("LNCC window must be odd and >= 1, got ", options.window));
  }
  TESSERA_RETURN_IF_ERROR(sharded_internal::CheckHalo(layout, LnccHalo(options.window), "LNCC"));
  TESSERA_RETURN_IF_ERROR(HaloExchange(comm, layout, warped, stream));
  if (stream.backend() == Backend::kCuda) {
    return ShardedLnccCuda(comm, layout, fixed, warped, options, grad_warped, stream, workspace);
  }

  const Dims3 d = layout.local_dims();
  const int64_t n = d.size(), slice = layout.slice();
  const int r = options.window / 2;
  const double inv_n = 1.0 / (static_cast<double>(options.window) * options.window * options.window);
  const float* F = fixed.data<float>();
  const float* W = warped.data<float>();
  std::vector<double> s_f(n), s_w(n), s_ff(n), s_ww(n), s_fw(n);
  ParallelFor(n, [&](int64_t v0, int64_t v1, int) {
    for (int64_t v = v0; v < v1; ++v) {
      const double f = F[v], w = W[v];
      s_f[v] = f;
      s_w[v] = w;
      s_ff[v] = f * f;
      s_ww[v] = w * w;
      s_fw[v] = f * w;
    }
  });
  for (auto* vol : {&s_f, &s_w, &s_ff, &s_ww, &s_fw}) BoxSum(*vol, d, r);

  // Terms where the gradient's windows reach: own slices +- r (clamped to
  // the slab). Elsewhere a, b, c stay 0; no own window reads them.
  const int64_t own_lo = layout.halo_lo, own_hi = layout.halo_lo + layout.own_nz();
  const int64_t term_lo = std::max<int64_t>(0, own_lo - r), term_hi = std::min<int64_t>(d.nz, own_hi + r);
  std::vector<double> a(n, 0.0), b(n, 0.0), c(n, 0.0);
  std::vector<double> partial(ParallelChunks(term_hi - term_lo), 0.0);
  ParallelFor(term_hi - term_lo, [&](int64_t k0, int64_t k1, int chunk) {
    double sum = 0;
    for (int64_t k = term_lo + k0; k < term_lo + k1; ++k) {
      const bool own = k >= own_lo && k < own_hi;
      for (int64_t v = k * slice; v < (k + 1) * slice; ++v) {
        const registration::LnccTerms t =
            registration::ComputeLnccTerms(s_f[v], s_w[v], s_ff[v], s_ww[v], s_fw[v], inv_n, options.eps);
        if (own) sum += t.cc;
        a[v] = t.a;
        b[v] = t.b;
        c[v] = t.c;
      }
    }
    partial[chunk] = sum;
  });
  double local_sum = 0;
  for (double p : partial) local_sum += p;
  TESSERA_ASSIGN_OR_RETURN(double total, AllReduceHostScalar(comm, local_sum, ReduceOp::kSum, stream));
  const double voxels = static_cast<double>(layout.global.size());
  const double loss = -total / voxels;
  if (grad_warped == nullptr) return loss;

  for (auto* vol : {&a, &b, &c}) BoxSum(*vol, d, r);
  float* G = grad_warped->data<float>();
  const double scale = -1.0 / voxels;
  ParallelFor(own_hi - own_lo, [&](int64_t k0, int64_t k1, int) {
    for (int64_t v = (own_lo + k0) * slice; v < (own_lo + k1) * slice; ++v) {
      G[v] = static_cast<float>(scale * (static_cast<double>(F[v]) * a[v] + 2.0 * static_cast<double>(W[v]) * b[v] + c[v]));
    }
  });
  return loss;
}

}  // namespace parallel
}  // namespace tessera

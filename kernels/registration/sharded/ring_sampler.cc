#include "kernels/registration/sharded/ring_sampler.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/parallel.h"
#include "common/status.h"
#include "kernels/registration/sharded/ring_sampler_internal.h"
#include "kernels/registration/voxel_jitter.h"

namespace tessera {
namespace parallel {
namespace {

using registration::Padding;
using registration::SamplerGeometry;

using ring_internal::kNoOwner;

// A moving shard in hand: global slices [z0, z0 + nz) of the whole image.
struct Shard {
  const float* data;
  int64_t z0;
  int64_t nz;
};

// Position of output voxel (i, j, k) (k global) exactly as the unsharded
// sampler computes it (grid_sampler_cpu.cc: OutputCoord, SamplePosition).
struct PointSampler {
  SamplerGeometry<float> g;
  const float* affine;
  const float* disp;   // local planar field, or null
  int64_t local_vox;   // voxels per component of the local field
  int64_t disp_z0;     // global z of the field's local slice 0

  void Position(int64_t i, int64_t j, int64_t k, float ix[3]) const {
    float x[3];
    registration::OutputCoord(g, i, j, k, x);
    if (g.voxel_jitter_key != 0) {  // grid_sampler_cpu.cc's PositionOf: the whole grid's voxel index
      const int64_t gv = g.out_dims.index(i, j, k);
      for (int c = 0; c < 3; ++c) {
        x[c] = registration::RnAdd(
            x[c], registration::RnMul(g.out_step[c], registration::VoxelJitter<float>(g.voxel_jitter_key, gv, c)));
      }
    }
    float u[3];
    const float* up = nullptr;
    if (disp != nullptr) {
      const int64_t v = i + g.out_dims.nx * (j + g.out_dims.ny * (k - disp_z0));
      for (int c = 0; c < 3; ++c) u[c] = disp[v + c * local_vox];
      up = u;
    }
    registration::SamplePosition(g, affine, x, up, ix);
  }

  // Padding as the unsharded sampler; false when the value is 0 (outside).
  bool Pad(const float ix[3], float pos[3], float dclamp[3]) const {
    const int64_t m[3] = {g.in_dims.nx, g.in_dims.ny, g.in_dims.nz};
    for (int c = 0; c < 3; ++c) {
      if (g.padding == Padding::kBorder) {
        pos[c] = registration::ClampCoord(ix[c], m[c], &dclamp[c]);
      } else {
        pos[c] = ix[c];
        dclamp[c] = 1.f;
        if (!(ix[c] > -1.f && ix[c] < static_cast<float>(m[c]))) return false;
      }
    }
    return true;
  }
};

float Fetch(const Shard& s, const Dims3& d, int64_t i, int64_t j, int64_t k) {
  if (i < 0 || j < 0 || k < 0 || i >= d.nx || j >= d.ny || k >= d.nz) return 0.f;
  if (k < s.z0 || k >= s.z0 + s.nz) return 0.f;  // a window too small (never for ring-owned cells)
  return s.data[i + d.nx * (j + d.ny * (k - s.z0))];
}

// Trilinear value (and d value / d position) with the reference's order of
// operations (grid_sampler_cpu.cc Interpolate).
float Interpolate(const Shard& s, const Dims3& d, const float pos[3], float dv[3]) {
  int64_t i0[3];
  float frac[3];
  for (int c = 0; c < 3; ++c) {
    const float f = registration::FloorT(pos[c]);
    i0[c] = static_cast<int64_t>(f);
    frac[c] = pos[c] - f;
  }
  float v[2][2][2];
  for (int c = 0; c < 2; ++c) {
    for (int b = 0; b < 2; ++b) {
      for (int a = 0; a < 2; ++a) v[c][b][a] = Fetch(s, d, i0[0] + a, i0[1] + b, i0[2] + c);
    }
  }
  const float wx[2] = {1.f - frac[0], frac[0]};
  const float wy[2] = {1.f - frac[1], frac[1]};
  const float wz[2] = {1.f - frac[2], frac[2]};
  float value = 0;
  for (int c = 0; c < 2; ++c) {
    for (int b = 0; b < 2; ++b) {
      for (int a = 0; a < 2; ++a) value += wx[a] * wy[b] * wz[c] * v[c][b][a];
    }
  }
  if (dv != nullptr) {
    dv[0] = dv[1] = dv[2] = 0;
    for (int c = 0; c < 2; ++c) {
      for (int b = 0; b < 2; ++b) dv[0] += wy[b] * wz[c] * (v[c][b][1] - v[c][b][0]);
    }
    for (int c = 0; c < 2; ++c) {
      for (int a = 0; a < 2; ++a) dv[1] += wx[a] * wz[c] * (v[c][1][a] - v[c][0][a]);
    }
    for (int b = 0; b < 2; ++b) {
      for (int a = 0; a < 2; ++a) dv[2] += wx[a] * wy[b] * (v[1][b][a] - v[0][b][a]);
    }
  }
  return value;
}

// The device ring: one kernel launch per step on `stream` (the shard in hand
// is only read), while the host moves the next shard on a second
// stream of the same GPU through comm.SendRecv: transfer and compute overlap
// whenever the communicator can copy while the kernel runs (in-process: a
// device-to-device copy on the transfer stream; NCCL: send/recv enqueued on
// it). Each step ends with both streams idle, so the buffer the next step
// receives into is no longer read (three shards live at once: own, in hand,
// in flight; the own one is the one in hand at step 0).
absl::Status RingGridSampleCuda(Communicator& comm, const RingSampleArgs& args,
                                const std::vector<SlabLayout>& shard_layouts, int64_t max_voxels, float* out,
                                float* jacobian, const Stream& stream) {
#if TESSERA_WITH_CUDA
  const SlabLayout& ol = args.out_layout;
  const int H = comm.size(), r = comm.rank(), ordinal = stream.ordinal();
  ring_internal::RingStepParams p;
  const double lo[3] = {-1, -1, -1}, hi[3] = {1, 1, 1};
  p.g = registration::MakeSamplerGeometry<float>(ol.global, args.moving_layout.global, lo, hi, args.padding);
  const float identity[12] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
  std::copy(args.affine != nullptr ? args.affine : identity, (args.affine != nullptr ? args.affine : identity) + 12,
            p.affine);
  p.disp = args.disp;
  p.disp_local_voxels = ol.local_voxels();
  p.disp_z0 = ol.local_z0();
  p.z_begin = ol.z_begin;
  p.own_nz = ol.own_nz();
  p.ranks = H;

  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> owner,
                           Buffer::Allocate(MemoryKind::kDevice, std::max<int64_t>(1, ol.own_voxels()), ordinal));
  std::shared_ptr<Buffer> buffers[2];
  std::vector<Stream> transfer;  // 0 or 1 streams (Stream has no default constructor)
  if (H > 1) {
    for (auto& b : buffers) {
      TESSERA_ASSIGN_OR_RETURN(b, Buffer::Allocate(MemoryKind::kDevice, max_voxels * sizeof(float), ordinal));
    }
    TESSERA_ASSIGN_OR_RETURN(Stream t, Stream::Create(Backend::kCuda, ordinal));
    transfer.push_back(std::move(t));
  }
  // The own shard (its overlap slice filled on `stream`) must be final before a peer copies it.
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  const float* in_hand = args.moving;
  int held = r;
  int flight = 0;
  for (int t = 0; t < H; ++t) {
    const SlabLayout& hl = shard_layouts[held];
    TESSERA_RETURN_IF_ERROR(ring_internal::RingSampleStepCuda(stream, p, in_hand, hl.z_begin, hl.local_nz(), held,
                                                              t == 0, static_cast<uint8_t*>(owner->data()), out,
                                                              jacobian));
    absl::Status moved = absl::OkStatus();
    const int incoming = (held + H - 1) % H;
    if (t + 1 < H) {
      float* dst = static_cast<float*>(buffers[flight]->data());
      const size_t send_bytes = hl.local_voxels() * sizeof(float);
      const size_t recv_bytes = shard_layouts[incoming].local_voxels() * sizeof(float);
      // The kernel is queued on `stream`: this thread can drive the transfer
      // itself (no helper thread as on the CPU, where the thread computes).
      const Stream& ts = transfer.front();
      moved = comm.SendRecv(in_hand, send_bytes, comm.next(), dst, recv_bytes, comm.previous(), ts);
      if (moved.ok()) moved = ts.Synchronize();
    }
    TESSERA_RETURN_IF_ERROR(moved);
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());  // the kernel no longer reads in_hand
    if (t + 1 < H) {
      in_hand = static_cast<const float*>(buffers[flight]->data());
      flight ^= 1;
      held = incoming;
    }
  }
  return absl::OkStatus();
#else
  (void)comm, (void)args, (void)shard_layouts, (void)max_voxels, (void)out, (void)jacobian, (void)stream;
  return absl::FailedPreconditionError("the ring sampler on a CUDA stream in a build without CUDA");
#endif
}

}  // namespace

absl::StatusOr<SlabLayout> RingMovingLayout(Dims3 moving_dims, int rank, int ranks) {
  TESSERA_ASSIGN_OR_RETURN(SlabPartition p, SlabPartition::Make(moving_dims.nz, ranks));
  return p.Layout(moving_dims, rank, 0, 1);
}

absl::Status RingGridSample(Communicator& comm, const RingSampleArgs& args, float* out, float* jacobian,
                            const Stream& stream) {
  const SlabLayout& ol = args.out_layout;
  const SlabLayout& ml = args.moving_layout;
  const int H = comm.size(), r = comm.rank();
  if (ol.rank != r || ol.ranks != H || ml.rank != r || ml.ranks != H) {
    return absl::InvalidArgumentError(absl::StrCat("ring sampler layouts (output ", ol.ToString(), ", moving ",
                                                   ml.ToString(), ") do not match ", comm.Describe()));
  }
  if (H > 254) return absl::InvalidArgumentError(absl::StrCat("ring sampler supports up to 254 ranks, got ", H));
  if (ml.halo_lo != 0 || ml.width_above != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("moving shard must be a RingMovingLayout (one overlap slice above), got ", ml.ToString()));
  }
  if (args.moving == nullptr || out == nullptr) return absl::InvalidArgumentError("moving and out must not be null");
  const Dims3 md = ml.global;
  TESSERA_ASSIGN_OR_RETURN(SlabPartition moving_split, SlabPartition::Make(md.nz, H));
  std::vector<SlabLayout> shard_layouts(H);
  int64_t max_voxels = 0;
  for (int j = 0; j < H; ++j) {
    TESSERA_ASSIGN_OR_RETURN(shard_layouts[j], moving_split.Layout(md, j, 0, 1));
    max_voxels = std::max(max_voxels, shard_layouts[j].local_voxels());
  }
  const bool jittered = args.voxel_jitter_key != 0 || std::any_of(args.grid_lo, args.grid_lo + 3, [](double v) { return v != -1.0; }) ||
                        std::any_of(args.grid_hi, args.grid_hi + 3, [](double v) { return v != 1.0; });
  if (stream.backend() == Backend::kCuda) {
    if (jittered) return absl::UnimplementedError("the ring sampler's CUDA path does not jitter its grid");
    return RingGridSampleCuda(comm, args, shard_layouts, max_voxels, out, jacobian, stream);
  }

  PointSampler ps;
  ps.g = registration::MakeSamplerGeometry<float>(ol.global, md, args.grid_lo, args.grid_hi, args.padding);
  ps.g.voxel_jitter_key = args.voxel_jitter_key;
  ps.affine = args.affine;
  ps.disp = args.disp;
  ps.local_vox = ol.local_voxels();
  ps.disp_z0 = ol.local_z0();

  const Dims3 od = ol.global;
  const int64_t slice = ol.slice(), own_vox = ol.own_voxels(), off = ol.own_offset();
  const int64_t jac_stride = ol.local_voxels();
  std::vector<uint8_t> owner(own_vox, kNoOwner);

  // Samples the points of the own slices whose cell starts in `shard`
  // (index j); at step 0 it also decides every point's owner.
  auto sample_shard = [&](const Shard& shard, int j, bool first) {
    ParallelFor(ol.own_nz(), [&](int64_t k0, int64_t k1, int) {
      for (int64_t kl = k0; kl < k1; ++kl) {
        const int64_t k = ol.z_begin + kl;
        for (int64_t jj = 0; jj < od.ny; ++jj) {
          for (int64_t i = 0; i < od.nx; ++i) {
            const int64_t v = kl * slice + jj * od.nx + i;  // index among own voxels
            if (!first && owner[v] != j) continue;
            float ix[3], pos[3], dclamp[3];
            ps.Position(i, jj, k, ix);
            if (first) {
              if (!ps.Pad(ix, pos, dclamp)) {
                owner[v] = kNoOwner;
                out[off + v] = 0.f;
                if (jacobian != nullptr) {
                  for (int c = 0; c < 3; ++c) jacobian[off + v + c * jac_stride] = 0.f;
                }
                continue;
              }
              // The cell's lower z corner; -1 (zeros padding) reads slice 0's shard.
              const int64_t z0 = std::max<int64_t>(0, static_cast<int64_t>(registration::FloorT(pos[2])));
              owner[v] = static_cast<uint8_t>(moving_split.OwnerOf(std::min<int64_t>(z0, md.nz - 1)));
              if (owner[v] != j) continue;
            } else {
              ps.Pad(ix, pos, dclamp);
            }
            float dv[3];
            out[off + v] = Interpolate(shard, md, pos, jacobian != nullptr ? dv : nullptr);
            if (jacobian != nullptr) {
              for (int c = 0; c < 3; ++c) jacobian[off + v + c * jac_stride] = dv[c] * dclamp[c];
            }
          }
        }
      }
    });
  };

  // Ring: step t holds shard (r - t) mod H; the next one arrives meanwhile.
  std::vector<float> buffers[2];
  if (H > 1) {
    buffers[0].resize(max_voxels);
    buffers[1].resize(max_voxels);
  }
  const float* in_hand = args.moving;
  int held = r;
  int flight = 0;
  for (int t = 0; t < H; ++t) {
    const SlabLayout& hl = shard_layouts[held];
    const Shard shard{in_hand, hl.z_begin, hl.local_nz()};
    absl::Status transfer = absl::OkStatus();
    std::thread mover;
    const int incoming = (held + H - 1) % H;
    if (t + 1 < H) {
      float* dst = buffers[flight].data();
      const size_t send_bytes = hl.local_voxels() * sizeof(float);
      const size_t recv_bytes = shard_layouts[incoming].local_voxels() * sizeof(float);
      mover = std::thread([&, dst, send_bytes, recv_bytes] {
        transfer = comm.SendRecv(in_hand, send_bytes, comm.next(), dst, recv_bytes, comm.previous(), stream);
      });
    }
    sample_shard(shard, held, t == 0);
    if (mover.joinable()) mover.join();
    TESSERA_RETURN_IF_ERROR(transfer);
    if (t + 1 < H) {
      in_hand = buffers[flight].data();
      flight ^= 1;
      held = incoming;
    }
  }
  return absl::OkStatus();
}

absl::Status WindowGridSample(const WindowSampleArgs& args, float* out, float* jacobian, const Stream& stream) {
  const SlabLayout& ol = args.out_layout;
  const Dims3 md = args.moving_dims;
  if (args.window == nullptr || out == nullptr) return absl::InvalidArgumentError("window and out must not be null");
  if (args.window_z0 < 0 || args.window_nz < 1 || args.window_z0 + args.window_nz > md.nz) {
    return absl::InvalidArgumentError(absl::StrCat("moving window [", args.window_z0, ", ",
                                                   args.window_z0 + args.window_nz, ") is not inside the ", md.nz,
                                                   " slices of the moving image"));
  }
  const double lo[3] = {-1, -1, -1}, hi[3] = {1, 1, 1};
  if (stream.backend() == Backend::kCuda) {
    if (args.voxel_jitter_key != 0 || std::any_of(args.grid_lo, args.grid_lo + 3, [](double v) { return v != -1.0; }) ||
        std::any_of(args.grid_hi, args.grid_hi + 3, [](double v) { return v != 1.0; })) {
      return absl::UnimplementedError("the window sampler's CUDA path does not jitter its grid");
    }
#if TESSERA_WITH_CUDA
    // One ring step with a single "shard": every point inside the image is
    // owned by shard 0, the window.
    ring_internal::RingStepParams p;
    p.g = registration::MakeSamplerGeometry<float>(ol.global, md, lo, hi, args.padding);
    const float identity[12] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
    const float* a = args.affine != nullptr ? args.affine : identity;
    std::copy(a, a + 12, p.affine);
    p.disp = args.disp;
    p.disp_local_voxels = ol.local_voxels();
    p.disp_z0 = ol.local_z0();
    p.z_begin = ol.z_begin;
    p.own_nz = ol.own_nz();
    p.ranks = 1;
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> owner,
                             Buffer::Allocate(MemoryKind::kDevice, std::max<int64_t>(1, ol.own_voxels()), stream.ordinal()));
    TESSERA_RETURN_IF_ERROR(ring_internal::RingSampleStepCuda(stream, p, args.window, args.window_z0, args.window_nz,
                                                              0, true, static_cast<uint8_t*>(owner->data()), out,
                                                              jacobian));
    return stream.Synchronize();  // the owner buffer is freed on return
#else
    return absl::FailedPreconditionError("the window sampler on a CUDA stream in a build without CUDA");
#endif
  }
  PointSampler ps;
  ps.g = registration::MakeSamplerGeometry<float>(ol.global, md, args.grid_lo, args.grid_hi, args.padding);
  ps.g.voxel_jitter_key = args.voxel_jitter_key;
  ps.affine = args.affine;
  ps.disp = args.disp;
  ps.local_vox = ol.local_voxels();
  ps.disp_z0 = ol.local_z0();
  const Shard shard{args.window, args.window_z0, args.window_nz};
  const Dims3 od = ol.global;
  const int64_t slice = ol.slice(), off = ol.own_offset(), jac_stride = ol.local_voxels();
  ParallelFor(ol.own_nz(), [&](int64_t k0, int64_t k1, int) {
    for (int64_t kl = k0; kl < k1; ++kl) {
      for (int64_t jj = 0; jj < od.ny; ++jj) {
        for (int64_t i = 0; i < od.nx; ++i) {
          const int64_t v = kl * slice + jj * od.nx + i;
          float ix[3], pos[3], dclamp[3];
          ps.Position(i, jj, ol.z_begin + kl, ix);
          if (!ps.Pad(ix, pos, dclamp)) {
            out[off + v] = 0.f;
            if (jacobian != nullptr) {
              for (int c = 0; c < 3; ++c) jacobian[off + v + c * jac_stride] = 0.f;
            }
            continue;
          }
          float dv[3];
          out[off + v] = Interpolate(shard, md, pos, jacobian != nullptr ? dv : nullptr);
          if (jacobian != nullptr) {
            for (int c = 0; c < 3; ++c) jacobian[off + v + c * jac_stride] = dv[c] * dclamp[c];
          }
        }
      }
    }
  });
  return absl::OkStatus();
}

MovingWindow MovingWindowFor(const SlabLayout& out_layout, Dims3 moving_dims, const float affine[12],
                             double disp_min, double disp_max) {
  const float identity[12] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
  const float* a = affine != nullptr ? affine : identity;
  const Dims3 g = out_layout.global;
  const auto norm = [](int64_t k, int64_t n) { return n > 1 ? -1.0 + 2.0 * static_cast<double>(k) / (n - 1) : 0.0; };
  // p_z = A_z x + t_z is linear in x: its extremes over the own box are at corners.
  double lo = INFINITY, hi = -INFINITY;
  for (double x : {-1.0, 1.0}) {
    for (double y : {-1.0, 1.0}) {
      for (int64_t k : {out_layout.z_begin, std::max(out_layout.z_begin, out_layout.z_end - 1)}) {
        const double z = norm(k, g.nz);
        const double p = a[8] * x + a[9] * y + a[10] * z + a[11];
        lo = std::min(lo, p);
        hi = std::max(hi, p);
      }
    }
  }
  lo += std::min(0.0, disp_min);
  hi += std::max(0.0, disp_max);
  const double half = 0.5 * static_cast<double>(moving_dims.nz - 1);
  // Cells start at floor(ix) and reach one slice up; one slice of margin each side.
  const double ix_lo = std::floor((lo + 1.0) * half) - 1, ix_hi = std::floor((hi + 1.0) * half) + 2;
  MovingWindow w;
  const double last = static_cast<double>(moving_dims.nz - 1);
  w.z0 = static_cast<int64_t>(std::clamp(ix_lo, 0.0, last));
  const int64_t z1 = static_cast<int64_t>(std::clamp(ix_hi, 0.0, last)) + 1;
  w.nz = std::max<int64_t>(1, z1 - w.z0);
  return w;
}

absl::Status ApplySampleJacobian(const SlabLayout& layout, Dims3 moving_dims, const float* grad_out, float* field,
                                 const Stream& stream) {
  // The sampler geometry's (m - 1) / 2 per axis, as the reference computes it.
  const double lo[3] = {-1, -1, -1}, hi[3] = {1, 1, 1};
  const SamplerGeometry<float> g =
      registration::MakeSamplerGeometry<float>(layout.global, moving_dims, lo, hi, Padding::kZeros);
  const float half[3] = {g.in_half[0], g.in_half[1], g.in_half[2]};
  if (stream.backend() == Backend::kCuda) {
#if TESSERA_WITH_CUDA
    return ring_internal::ApplySampleJacobianCuda(layout, half, grad_out, field, stream);
#else
    return absl::FailedPreconditionError("ApplySampleJacobian on a CUDA stream in a build without CUDA");
#endif
  }
  const int64_t off = layout.own_offset(), n = layout.own_voxels(), stride = layout.local_voxels();
  ParallelFor(n, [&](int64_t b, int64_t e, int) {
    for (int64_t v = off + b; v < off + e; ++v) {
      // (dL/dout * dv * dclamp) * half: GridSampleBackward's association.
      for (int c = 0; c < 3; ++c) field[v + c * stride] = grad_out[v] * field[v + c * stride] * half[c];
    }
  });
  return absl::OkStatus();
}

}  // namespace parallel
}  // namespace tessera

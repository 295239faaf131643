// Several shards on ONE GPU (in-process ranks, one CUDA stream each): the
// device paths of the sharded LNCC, Mattes MI, the ring sampler and the
// greedy iteration against (a) the unsharded single-GPU kernel on the whole
// volume and (b) the same sharded operation on CPU ranks, at H = 1..4 on
// random smooth (never zero) inputs, with uneven splits. Device outputs are
// poisoned with NaN first, so an own voxel left unwritten fails. Skipped
// without a GPU.
//
// Tolerances (why):
//   LNCC, MSE vs unsharded GPU: bit for bit (issue 39: per-z-slice sums on
//         the device, z window sums taken directly, the whole volume's N):
//         the loss as float (what the unsharded kernel returns) and every
//         gradient value; the per-slice sums in double are the same too.
//         vs sharded CPU: loss 1e-5 relative, gradient relative L2 1e-4
//         (lncc_cuda_test.cc's CUDA-vs-CPU tolerances).
//   MI    vs both: mutual_info.h's CUDA-vs-CPU tolerances: MI 1e-4 max(1, MI),
//         gradient 2e-3 max |grad| per voxel (box fixed window: against the
//         GPU kernel only, see there); total weight 1e-5 relative.
//   Ring  vs unsharded GPU GridSample: values 1e-6 of max (same positions,
//         same lerps: in practice identical), dL/du 1e-6 of max (products
//         associated differently). vs CPU ring: relative L2 1e-5 (values),
//         1e-4 (dL/du): grid_sampler_cuda_test.cc's tolerances.
//   Greedy iterations, LNCC and MSE, shared moving image (what the stage
//         runs for several shards on one GPU): H ranks vs one rank bit for
//         bit (losses, u), both rules.
//   Greedy iterations (lncc, mi, mse; ring and shared moving image) vs the
//         same on CPU ranks: losses 1e-4 relative, displacement rms
//         difference 1e-3 of its rms (MI: 1e-2; Adam magnifies the last bits
//         of tiny gradients, see sharded_greedy_step_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/memory_kind_for.h"
#include "common/status.h"
#include "common/testing/device_array.h"
#include "common/testing/gpu_test.h"
#include "kernels/parallel/in_process_communicator.h"
#include "kernels/parallel/parallel_test_util.h"
#include "kernels/registration/sharded/ring_sampler.h"
#include "kernels/registration/sharded/sharded_greedy_step.h"
#include "kernels/registration/sharded/sharded_ops.h"
#include "kernels/parallel/slab.h"
#include "kernels/registration/grid_sampler.h"
#include "kernels/registration/lncc.h"
#include "kernels/registration/mse.h"
#include "kernels/registration/mutual_info.h"
#include "kernels/registration/test_util.h"

namespace tessera {
namespace parallel {
namespace {

using registration::Padding;
using testing::MaxRelError;
using testing::RandomArray;
using testing::SmoothRandomVolume;
using testing::ToVector;
using ::tessera::testing::RelL2;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

absl::StatusOr<NDArray> ToHost(const NDArray& a, const Stream& stream) {
  TESSERA_ASSIGN_OR_RETURN(NDArray h, a.CopyTo(MemoryKind::kHost, stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return h;
}

absl::StatusOr<NDArray> ToDevice(const NDArray& a, const Stream& stream) {
  TESSERA_ASSIGN_OR_RETURN(NDArray d, a.CopyTo(MemoryKind::kDevice, stream, stream.ordinal()));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return d;
}

// A float32 array of `shape` full of NaN in the stream's memory.
absl::StatusOr<NDArray> Poisoned(const Shape& shape, const Stream& stream) {
  TESSERA_ASSIGN_OR_RETURN(NDArray h, NDArray::Allocate(shape, DType::kFloat32));
  std::fill(h.data<float>(), h.data<float>() + h.num_elements(), kNaN);
  if (stream.backend() == Backend::kCpu) return h;
  return ToDevice(h, stream);
}

NDArray PoisonedHost(const Shape& shape) { return Poisoned(shape, Stream::Cpu()).value(); }

absl::StatusOr<Stream> RankStream(bool cuda) {
  if (!cuda) return Stream::Cpu();
  return Stream::Create(Backend::kCuda, 0);
}

// Local slab of a whole host array in the stream's memory.
absl::StatusOr<NDArray> Slab(const NDArray& whole, const SlabLayout& l, const Stream& stream) {
  TESSERA_ASSIGN_OR_RETURN(NDArray a, ExtractSlab(whole, l, MemoryKindFor(stream), stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return a;
}

// Own slices of a local array (either memory) into a whole host array.
absl::Status Gather(const NDArray& local, const SlabLayout& l, NDArray* whole, const Stream& stream) {
  if (local.memory_kind() != MemoryKind::kDevice) return InsertOwnSlices(local, l, whole, Stream::Cpu());
  TESSERA_ASSIGN_OR_RETURN(NDArray h, ToHost(local, stream));
  return InsertOwnSlices(h, l, whole, Stream::Cpu());
}

// Values whose bits differ (NaN never equals: an unwritten voxel counts).
size_t CountDifferent(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::max(a.size(), b.size());
  size_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0 || a[i] != a[i];
  return n;
}

class ShardedOpsGpuTest : public ::testing::TestWithParam<int> {
 protected:
  int ranks() const { return GetParam(); }
};

// ---------------------------------------------------------------------------
// LNCC
// ---------------------------------------------------------------------------
struct LnccRun {
  double loss = 0;
  NDArray grad;
};

LnccRun ShardedLnccRun(const NDArray& fixed, const NDArray& warped, const registration::LnccOptions& options,
                       int H, bool cuda) {
  const Dims3 d = testing::DimsOf(fixed);
  LnccRun run;
  run.grad = PoisonedHost(fixed.shape());
  std::vector<double> losses(H, kNaN);
  const SlabPartition p = SlabPartition::Make(d.nz, H).value();
  const absl::Status s = RunInProcessRanks(H, [&](Communicator& comm) -> absl::Status {
    TESSERA_ASSIGN_OR_RETURN(Stream stream, RankStream(cuda));
    TESSERA_ASSIGN_OR_RETURN(SlabLayout l, p.Layout(d, comm.rank(), LnccHalo(options.window)));
    TESSERA_ASSIGN_OR_RETURN(NDArray f, Slab(fixed, l, stream));
    TESSERA_ASSIGN_OR_RETURN(NDArray w, Slab(warped, l, stream));
    TESSERA_ASSIGN_OR_RETURN(NDArray g, Poisoned(l.LocalShape(1), stream));
    TESSERA_ASSIGN_OR_RETURN(losses[comm.rank()], ShardedLncc(comm, l, f, w, options, &g, stream));
    return Gather(g, l, &run.grad, stream);
  });
  EXPECT_TRUE(s.ok()) << (cuda ? "cuda" : "cpu") << " ranks: " << s;
  for (int r = 1; r < H; ++r) EXPECT_EQ(losses[r], losses[0]) << "rank " << r << " got another global loss";
  run.loss = losses[0];
  return run;
}

TEST_P(ShardedOpsGpuTest, LnccEqualsUnshardedGpuAndShardedCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  const int H = ranks();
  const Dims3 d{40, 36, 37};
  const NDArray fixed = SmoothRandomVolume(d, 31);
  const NDArray warped = SmoothRandomVolume(d, 32);
  Stream stream = Stream::Create(Backend::kCuda, 0).value();
  const NDArray fixed_d = ToDevice(fixed, stream).value(), warped_d = ToDevice(warped, stream).value();
  for (int window : {3, 5, 9}) {
    SCOPED_TRACE("H = " + std::to_string(H) + ", window " + std::to_string(window));
    registration::LnccOptions options;
    options.window = window;
    // (a) the single-GPU fused kernel on the whole volume.
    NDArray loss_d = NDArray::Allocate({1}, DType::kFloat32, MemoryKind::kDevice, 0).value();
    NDArray grad_d = NDArray::Allocate(fixed.shape(), DType::kFloat32, MemoryKind::kDevice, 0).value();
    ASSERT_TRUE(registration::Lncc(stream, fixed_d.data<float>(), warped_d.data<float>(), d, options,
                                   loss_d.data<float>(), grad_d.data<float>())
                    .ok());
    const double whole_loss = ToHost(loss_d, stream).value().data<float>()[0];
    const std::vector<float> whole_grad = ToVector(ToHost(grad_d, stream).value());
    // (b) the CPU ranks; then the GPU ranks.
    const LnccRun cpu = ShardedLnccRun(fixed, warped, options, H, false);
    const LnccRun gpu = ShardedLnccRun(fixed, warped, options, H, true);
    std::printf("LNCC H=%d window %d: loss gpu-sharded %.9g, gpu-whole %.9g, cpu-sharded %.9g; grad max rel vs "
                "gpu-whole %.3g, rel L2 vs cpu-sharded %.3g\n",
                H, window, gpu.loss, whole_loss, cpu.loss, MaxRelError(ToVector(gpu.grad), whole_grad),
                RelL2(ToVector(gpu.grad), ToVector(cpu.grad)));
    ASSERT_LT(whole_loss, -0.01) << "inputs too flat to test anything";
    EXPECT_EQ(static_cast<float>(gpu.loss), static_cast<float>(whole_loss))
        << "sharded GPU loss vs the unsharded GPU kernel (bits)";
    EXPECT_EQ(CountDifferent(ToVector(gpu.grad), whole_grad), 0u)
        << "sharded GPU gradient vs the unsharded GPU kernel (bits)";
    EXPECT_NEAR(gpu.loss, cpu.loss, 1e-5 * std::abs(cpu.loss)) << "sharded GPU loss vs sharded CPU";
    EXPECT_LE(RelL2(ToVector(gpu.grad), ToVector(cpu.grad)), 1e-4) << "sharded GPU gradient vs sharded CPU";
  }
}

// ---------------------------------------------------------------------------
// MSE: sharded on one GPU vs the unsharded CUDA kernel, bit for bit
// ---------------------------------------------------------------------------
TEST_P(ShardedOpsGpuTest, MseBitIdenticalToUnshardedGpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  const int H = ranks();
  const Dims3 d{41, 37, 29};
  const NDArray fixed = SmoothRandomVolume(d, 33);
  const NDArray warped = SmoothRandomVolume(d, 34);
  Stream stream = Stream::Create(Backend::kCuda, 0).value();
  const NDArray fixed_d = ToDevice(fixed, stream).value(), warped_d = ToDevice(warped, stream).value();
  NDArray loss_d = NDArray::Allocate({1}, DType::kFloat32, MemoryKind::kDevice, 0).value();
  NDArray grad_d = NDArray::Allocate(fixed.shape(), DType::kFloat32, MemoryKind::kDevice, 0).value();
  ASSERT_TRUE(registration::Mse(stream, fixed_d.data<float>(), warped_d.data<float>(), d, loss_d.data<float>(),
                                grad_d.data<float>())
                  .ok());
  const float whole_loss = ToHost(loss_d, stream).value().data<float>()[0];
  const std::vector<float> whole_grad = ToVector(ToHost(grad_d, stream).value());
  NDArray grad = PoisonedHost(fixed.shape());
  std::vector<double> losses(H, kNaN);
  const SlabPartition p = SlabPartition::Make(d.nz, H).value();
  const absl::Status s = RunInProcessRanks(H, [&](Communicator& comm) -> absl::Status {
    TESSERA_ASSIGN_OR_RETURN(Stream rs, RankStream(true));
    TESSERA_ASSIGN_OR_RETURN(SlabLayout l, p.Layout(d, comm.rank(), 1));
    TESSERA_ASSIGN_OR_RETURN(NDArray f, Slab(fixed, l, rs));
    TESSERA_ASSIGN_OR_RETURN(NDArray w, Slab(warped, l, rs));
    TESSERA_ASSIGN_OR_RETURN(NDArray g, Poisoned(l.LocalShape(1), rs));
    TESSERA_ASSIGN_OR_RETURN(losses[comm.rank()], ShardedMse(comm, l, f, w, &g, rs));
    return Gather(g, l, &grad, rs);
  });
  ASSERT_TRUE(s.ok()) << s;
  const double cpu_loss = registration::cpu::Mse<float>(fixed.data<float>(), warped.data<float>(), d, nullptr);
  std::printf("MSE H=%d: loss gpu-sharded %.9g, gpu-whole %.9g, cpu %.9g; %zu gradient values differ\n", H, losses[0],
              whole_loss, cpu_loss, CountDifferent(ToVector(grad), whole_grad));
  for (int r = 1; r < H; ++r) EXPECT_EQ(losses[r], losses[0]) << "rank " << r;
  EXPECT_EQ(static_cast<float>(losses[0]), whole_loss) << "sharded GPU loss vs the unsharded GPU kernel (bits)";
  EXPECT_EQ(CountDifferent(ToVector(grad), whole_grad), 0u) << "sharded GPU gradient vs the unsharded GPU kernel";
  EXPECT_NEAR(losses[0], cpu_loss, 1e-6 * cpu_loss) << "vs the CPU reference";
}

// ---------------------------------------------------------------------------
// Mattes MI
// ---------------------------------------------------------------------------
struct MiRun {
  registration::MattesMiResult result;
  NDArray grad;
};

MiRun ShardedMiRun(const NDArray& fixed, const NDArray& warped, const NDArray* mask,
                   const registration::MattesMiOptions& options, int H, bool cuda) {
  const Dims3 d = testing::DimsOf(fixed);
  MiRun run;
  run.grad = PoisonedHost(fixed.shape());
  std::vector<registration::MattesMiResult> results(H);
  const SlabPartition p = SlabPartition::Make(d.nz, H).value();
  const absl::Status s = RunInProcessRanks(H, [&](Communicator& comm) -> absl::Status {
    TESSERA_ASSIGN_OR_RETURN(Stream stream, RankStream(cuda));
    TESSERA_ASSIGN_OR_RETURN(SlabLayout l, p.Layout(d, comm.rank(), 0));
    TESSERA_ASSIGN_OR_RETURN(NDArray f, Slab(fixed, l, stream));
    TESSERA_ASSIGN_OR_RETURN(NDArray w, Slab(warped, l, stream));
    NDArray local_mask;
    if (mask != nullptr) {
      TESSERA_ASSIGN_OR_RETURN(NDArray m, NDArray::Allocate(l.LocalShape(1), DType::kUInt8));
      std::copy(mask->data<uint8_t>() + l.local_z0() * l.slice(),
                mask->data<uint8_t>() + (l.local_z0() + l.local_nz()) * l.slice(), m.data<uint8_t>());
      if (cuda) {
        TESSERA_ASSIGN_OR_RETURN(local_mask, ToDevice(m, stream));
      } else {
        local_mask = m;
      }
    }
    TESSERA_ASSIGN_OR_RETURN(NDArray g, Poisoned(l.LocalShape(1), stream));
    TESSERA_ASSIGN_OR_RETURN(results[comm.rank()], ShardedMattesMi(comm, l, f, w, mask != nullptr ? &local_mask : nullptr,
                                                                   options, &g, stream));
    return Gather(g, l, &run.grad, stream);
  });
  EXPECT_TRUE(s.ok()) << (cuda ? "cuda" : "cpu") << " ranks: " << s;
  for (int r = 1; r < H; ++r) {
    EXPECT_EQ(results[r].mutual_information, results[0].mutual_information) << "rank " << r << " got another MI";
  }
  run.result = results[0];
  return run;
}

// mutual_info.h's per-voxel gradient tolerance.
void ExpectMiGradientNear(const std::vector<float>& got, const std::vector<float>& expect,
                          const registration::MattesMiOptions& o, double total_weight, const char* what) {
  ASSERT_EQ(got.size(), expect.size());
  double largest = 0;
  for (float g : expect) largest = std::max(largest, std::abs(double(g)));
  const double tol = 2e-3 * largest + 1e-5 * (o.bins - 4) / ((o.warped_max - o.warped_min) * total_weight);
  size_t bad = 0, first_bad = 0;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::abs(double(got[i]) - expect[i]);
    if (!(e <= tol)) {
      if (bad++ == 0) first_bad = i;
    }
    if (std::isfinite(e)) worst = std::max(worst, e);
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " voxels off by more than " << tol << " (max |grad| " << largest
                     << "), first at " << first_bad << ": " << got[first_bad] << " vs " << expect[first_bad]
                     << "; worst finite error " << worst;
}

TEST_P(ShardedOpsGpuTest, MattesMiEqualsUnshardedGpuAndShardedCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  const int H = ranks();
  const Dims3 d{40, 36, 37};
  const NDArray fixed = SmoothRandomVolume(d, 51);
  const NDArray warped = SmoothRandomVolume(d, 52);
  NDArray mask = NDArray::Allocate({d.nx, d.ny, d.nz}, DType::kUInt8).value();
  for (int64_t v = 0; v < d.size(); ++v) mask.data<uint8_t>()[v] = (v % 7) != 3;
  Stream stream = Stream::Create(Backend::kCuda, 0).value();
  const NDArray fixed_d = ToDevice(fixed, stream).value(), warped_d = ToDevice(warped, stream).value();
  const NDArray mask_d = ToDevice(mask, stream).value();
  for (const bool masked : {false, true}) {
    for (const auto kernel : {registration::ParzenKernel::kCubicBSpline, registration::ParzenKernel::kBox}) {
      const bool box = kernel == registration::ParzenKernel::kBox;
      SCOPED_TRACE("H = " + std::to_string(H) + (masked ? ", masked" : ", no mask") + (box ? ", box" : ", cubic"));
      registration::MattesMiOptions options;
      options.bins = 24;
      options.fixed_min = 0.2f;
      options.fixed_max = 1.8f;
      options.warped_min = 0.3f;
      options.warped_max = 1.7f;  // some voxels clamp: zero gradient there
      options.fixed_kernel = kernel;
      NDArray grad_d = NDArray::Allocate(fixed.shape(), DType::kFloat32, MemoryKind::kDevice, 0).value();
      const auto whole = registration::MattesMutualInformation(fixed_d, warped_d, masked ? &mask_d : nullptr, options,
                                                               &grad_d, stream);
      ASSERT_TRUE(whole.ok()) << whole.status();
      const std::vector<float> whole_grad = ToVector(ToHost(grad_d, stream).value());
      const MiRun cpu = ShardedMiRun(fixed, warped, masked ? &mask : nullptr, options, H, false);
      const MiRun gpu = ShardedMiRun(fixed, warped, masked ? &mask : nullptr, options, H, true);
      std::printf("MI H=%d %s %s: gpu-sharded %.9g, gpu-whole %.9g, cpu-sharded %.9g (total weight %.1f / %.1f)\n", H,
                  masked ? "masked" : "unmasked", box ? "box" : "cubic", gpu.result.mutual_information,
                  whole->mutual_information, cpu.result.mutual_information, gpu.result.total_weight,
                  cpu.result.total_weight);
      ASSERT_GT(whole->mutual_information, 0.01) << "inputs too independent to test anything";
      const double mi_tol = 1e-4 * std::max(1.0, cpu.result.mutual_information);
      // Issue 39: the sharded device path finalizes the unsharded kernel's
      // exact fixed-point histogram with the same kernels: the same bits.
      EXPECT_EQ(gpu.result.mutual_information, whole->mutual_information) << "vs the unsharded GPU kernel";
      EXPECT_EQ(gpu.result.total_weight, whole->total_weight) << "vs the unsharded GPU kernel";
      {
        const std::vector<float> got = ToVector(gpu.grad);
        registration::testing::ExpectSameBits(got, whole_grad, "sharded GPU gradient vs the unsharded GPU kernel");
      }
      EXPECT_NEAR(gpu.result.mutual_information, cpu.result.mutual_information, mi_tol) << "vs sharded CPU";
      EXPECT_NEAR(gpu.result.total_weight, cpu.result.total_weight, 1e-5 * cpu.result.total_weight);
      ExpectMiGradientNear(ToVector(gpu.grad), whole_grad, options, cpu.result.total_weight,
                           "sharded GPU gradient vs the unsharded GPU kernel");
      // kBox: a fixed value within ~1e-6 of a bin edge may pick the other bin
      // in float (GPU) than in double (CPU): gradients compared GPU to GPU only.
      if (!box) {
        ExpectMiGradientNear(ToVector(gpu.grad), ToVector(cpu.grad), options, cpu.result.total_weight,
                             "sharded GPU gradient vs sharded CPU");
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Ring sampler
// ---------------------------------------------------------------------------
struct RingRun {
  NDArray out, grad;  // whole host arrays
};

RingRun RingRunOn(const NDArray& moving, const NDArray& disp, const NDArray& grad_out, const float affine[12],
                  Padding padding, int H, bool cuda) {
  const Dims3 fd = testing::DimsOf(grad_out), md = testing::DimsOf(moving);
  RingRun run;
  run.out = PoisonedHost(grad_out.shape());
  run.grad = PoisonedHost(disp.shape());
  const SlabPartition fixed_split = SlabPartition::Make(fd.nz, H).value();
  const absl::Status s = RunInProcessRanks(H, [&](Communicator& comm) -> absl::Status {
    TESSERA_ASSIGN_OR_RETURN(Stream stream, RankStream(cuda));
    TESSERA_ASSIGN_OR_RETURN(SlabLayout ol, fixed_split.Layout(fd, comm.rank(), 1));
    TESSERA_ASSIGN_OR_RETURN(SlabLayout ml, RingMovingLayout(md, comm.rank(), H));
    // The overlap slice comes from the neighbour, not from the whole image.
    TESSERA_ASSIGN_OR_RETURN(NDArray shard_host, ExtractSlab(moving, ml, MemoryKind::kHost, Stream::Cpu()));
    std::fill(shard_host.data<float>() + ml.own_voxels(), shard_host.data<float>() + ml.local_voxels(), kNaN);
    NDArray shard = shard_host;
    if (cuda) {
      TESSERA_ASSIGN_OR_RETURN(shard, ToDevice(shard_host, stream));
    }
    TESSERA_RETURN_IF_ERROR(HaloExchange(comm, ml, shard, stream));
    TESSERA_ASSIGN_OR_RETURN(NDArray u, Slab(disp, ol, stream));
    TESSERA_ASSIGN_OR_RETURN(NDArray g, Slab(grad_out, ol, stream));
    TESSERA_ASSIGN_OR_RETURN(NDArray out, Poisoned(ol.LocalShape(1), stream));
    TESSERA_ASSIGN_OR_RETURN(NDArray jac, Poisoned(ol.LocalShape(3), stream));
    RingSampleArgs ra;
    ra.out_layout = ol;
    ra.disp = u.data<float>();
    ra.affine = affine;
    ra.padding = padding;
    ra.moving_layout = ml;
    ra.moving = shard.data<float>();
    TESSERA_RETURN_IF_ERROR(RingGridSample(comm, ra, out.data<float>(), jac.data<float>(), stream));
    TESSERA_RETURN_IF_ERROR(ApplySampleJacobian(ol, md, g.data<float>(), jac.data<float>(), stream));
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
    TESSERA_RETURN_IF_ERROR(Gather(out, ol, &run.out, stream));
    return Gather(jac, ol, &run.grad, stream);
  });
  EXPECT_TRUE(s.ok()) << (cuda ? "cuda" : "cpu") << " ranks: " << s;
  return run;
}

struct RingCase {
  int64_t fixed_nz, moving_nz;
  Padding padding;
};

TEST_P(ShardedOpsGpuTest, RingSamplerEqualsUnshardedGpuAndCpuRing) {
  TESSERA_SKIP_WITHOUT_GPU();
  const int H = ranks();
  Stream stream = Stream::Create(Backend::kCuda, 0).value();
  for (const RingCase c : {RingCase{16, 19, Padding::kZeros}, RingCase{37, 23, Padding::kZeros},
                           RingCase{17, 13, Padding::kBorder}, RingCase{37, 23, Padding::kBorder}}) {
    const bool zeros = c.padding == Padding::kZeros;
    SCOPED_TRACE("H = " + std::to_string(H) + ", fixed nz " + std::to_string(c.fixed_nz) + ", moving nz " +
                 std::to_string(c.moving_nz) + (zeros ? ", zeros" : ", border"));
    const Dims3 fd{33, 20, c.fixed_nz}, md{35, 21, c.moving_nz};
    const NDArray moving = SmoothRandomVolume(md, 61);
    // Up to 0.25 normalized units (several slices) and a zoom-out with a
    // shift: points cross shard borders and leave the image.
    const NDArray disp = RandomArray({fd.nx, fd.ny, fd.nz, 3}, -0.25, 0.25, 62);
    const NDArray grad_out = RandomArray({fd.nx, fd.ny, fd.nz}, -1.0, 1.0, 63);
    const float affine[12] = {1.1f, 0.02f, 0.0f, 0.03f, -0.01f, 1.08f, 0.02f, -0.02f, 0.0f, 0.03f, 1.12f, 0.05f};
    // (a) the single-GPU sampler on the whole moving image.
    const NDArray moving_d = ToDevice(moving, stream).value(), disp_d = ToDevice(disp, stream).value();
    const NDArray go_d = ToDevice(grad_out, stream).value();
    NDArray affine_h = NDArray::Allocate({12}, DType::kFloat32).value();
    std::copy(affine, affine + 12, affine_h.data<float>());
    const NDArray affine_d = ToDevice(affine_h, stream).value();
    NDArray out_d = NDArray::Allocate(grad_out.shape(), DType::kFloat32, MemoryKind::kDevice, 0).value();
    NDArray gd_d = NDArray::Allocate(disp.shape(), DType::kFloat32, MemoryKind::kDevice, 0).value();
    registration::GridSampleArgs args;
    args.image = moving_d.data<float>();
    args.image_dims = md;
    args.affine = affine_d.data<float>();
    args.disp = disp_d.data<float>();
    args.out_dims = fd;
    args.padding = c.padding;
    ASSERT_TRUE(registration::GridSample(stream, args, out_d.data<float>()).ok());
    registration::GridSampleGrads grads;
    grads.grad_disp = gd_d.data<float>();
    ASSERT_TRUE(registration::GridSampleBackward(stream, args, go_d.data<float>(), grads).ok());
    const std::vector<float> whole_out = ToVector(ToHost(out_d, stream).value());
    const std::vector<float> whole_grad = ToVector(ToHost(gd_d, stream).value());
    int outside = 0;
    for (float v : whole_out) outside += v == 0.f;
    if (zeros) ASSERT_GT(outside, 0) << "no point left the moving image";
    // (b) CPU ranks; then GPU ranks.
    const RingRun cpu = RingRunOn(moving, disp, grad_out, affine, c.padding, H, false);
    const RingRun gpu = RingRunOn(moving, disp, grad_out, affine, c.padding, H, true);
    const std::vector<float> got_out = ToVector(gpu.out), got_grad = ToVector(gpu.grad);
    size_t identical = 0;
    for (size_t i = 0; i < got_out.size(); ++i) identical += got_out[i] == whole_out[i];
    std::printf("ring H=%d fz=%lld mz=%lld %s: %zu/%zu values identical to the unsharded GPU sampler; dL/du max rel "
                "%.3g; vs CPU ring rel L2 %.3g / %.3g\n",
                H, static_cast<long long>(c.fixed_nz), static_cast<long long>(c.moving_nz), zeros ? "zeros" : "border",
                identical, got_out.size(), MaxRelError(got_grad, whole_grad), RelL2(got_out, ToVector(cpu.out)),
                RelL2(got_grad, ToVector(cpu.grad)));
    EXPECT_LE(MaxRelError(got_out, whole_out), 1e-6) << "values vs the unsharded GPU sampler";
    EXPECT_LE(MaxRelError(got_grad, whole_grad), 1e-6) << "dL/du vs the unsharded GPU sampler's backward pass";
    EXPECT_LE(RelL2(got_out, ToVector(cpu.out)), 1e-5) << "values vs the CPU ring";
    EXPECT_LE(RelL2(got_grad, ToVector(cpu.grad)), 1e-4) << "dL/du vs the CPU ring";
  }
}

// ---------------------------------------------------------------------------
// Greedy iterations: every metric, ring and shared moving image, GPU vs CPU
// ---------------------------------------------------------------------------
constexpr float kAffine[12] = {1.02f, 0.01f, 0.f, 0.01f, 0.f, 0.99f, 0.02f, -0.02f, 0.f, -0.01f, 1.01f, 0.03f};

struct GreedyRun {
  std::vector<double> losses;
  NDArray u;
};

GreedyRun GreedyRunOn(const NDArray& fixed, const NDArray& moving, const GreedyStepOptions& o, int iterations, int H,
                      bool cuda, bool whole_moving) {
  const Dims3 d = testing::DimsOf(fixed), md = testing::DimsOf(moving);
  GreedyRun run;
  run.u = PoisonedHost({d.nx, d.ny, d.nz, 3});
  std::vector<std::vector<double>> losses(H);
  const SlabPartition p = SlabPartition::Make(d.nz, H).value();
  const absl::Status s = RunInProcessRanks(H, [&](Communicator& comm) -> absl::Status {
    TESSERA_ASSIGN_OR_RETURN(Stream stream, RankStream(cuda));
    TESSERA_ASSIGN_OR_RETURN(SlabLayout l, p.Layout(d, comm.rank(), GreedyStepHalo(o)));
    TESSERA_ASSIGN_OR_RETURN(NDArray f, Slab(fixed, l, stream));
    ShardedGreedyState state;
    if (whole_moving) {
      NDArray mv = moving;
      if (cuda) {
        TESSERA_ASSIGN_OR_RETURN(mv, ToDevice(moving, stream));
      }
      TESSERA_ASSIGN_OR_RETURN(state, MakeShardedGreedyStateWholeMoving(l, f, mv, kAffine, o, stream));
    } else {
      TESSERA_ASSIGN_OR_RETURN(SlabLayout ml, RingMovingLayout(md, comm.rank(), H));
      TESSERA_ASSIGN_OR_RETURN(NDArray mv, Slab(moving, ml, stream));
      TESSERA_ASSIGN_OR_RETURN(state, MakeShardedGreedyState(l, f, ml, mv, kAffine, o, stream));
    }
    for (int it = 0; it < iterations; ++it) {
      TESSERA_ASSIGN_OR_RETURN(double loss, ShardedGreedyStep(comm, state, o, stream));
      losses[comm.rank()].push_back(loss);
    }
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
    return Gather(state.u, l, &run.u, stream);
  });
  EXPECT_TRUE(s.ok()) << (cuda ? "cuda" : "cpu") << (whole_moving ? " whole-moving" : " ring") << " ranks: " << s;
  run.losses = losses[0];
  return run;
}

TEST_P(ShardedOpsGpuTest, GreedyIterationsOnOneGpuEqualCpuRanks) {
  TESSERA_SKIP_WITHOUT_GPU();
  const int H = ranks();
  const Dims3 d{24, 20, 30}, md{26, 21, 33};
  const NDArray fixed = SmoothRandomVolume(d, 71, 0.02);
  const NDArray moving = SmoothRandomVolume(md, 72, 0.02);
  const int iterations = 4;
  for (const GreedyMetric metric : {GreedyMetric::kLncc, GreedyMetric::kMi, GreedyMetric::kMse}) {
    for (const GreedyRule rule : {GreedyRule::kAdam, GreedyRule::kNormalized}) {
      GreedyStepOptions o;
      o.metric = metric;
      o.rule = rule;
      o.lncc.window = 5;
      o.mi.bins = 16;
      o.mi.fixed_min = o.mi.warped_min = 0.2f;
      o.mi.fixed_max = o.mi.warped_max = 1.8f;
      const char* name = metric == GreedyMetric::kLncc ? "lncc" : metric == GreedyMetric::kMi ? "mi" : "mse";
      const char* rule_name = rule == GreedyRule::kAdam ? "adam" : "normalized";
      const GreedyRun cpu = GreedyRunOn(fixed, moving, o, iterations, H, false, false);
      ASSERT_EQ(cpu.losses.size(), static_cast<size_t>(iterations));
      for (const bool whole : {false, true}) {
        SCOPED_TRACE(std::string("H = ") + std::to_string(H) + ", " + name + ", " + rule_name +
                     (whole ? ", shared moving image" : ", ring sampler"));
        const GreedyRun gpu = GreedyRunOn(fixed, moving, o, iterations, H, true, whole);
        ASSERT_EQ(gpu.losses.size(), static_cast<size_t>(iterations));
        for (int it = 0; it < iterations; ++it) {
          EXPECT_NEAR(gpu.losses[it], cpu.losses[it], 1e-4 * std::abs(cpu.losses[it])) << "iteration " << it + 1;
        }
        const std::vector<float> a = ToVector(gpu.u), b = ToVector(cpu.u);
        double diff2 = 0, norm2 = 0;
        for (size_t i = 0; i < a.size(); ++i) {
          diff2 += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
          norm2 += double(b[i]) * b[i];
        }
        const double rms = std::sqrt(norm2 / a.size()), rms_diff = std::sqrt(diff2 / a.size());
        std::printf("greedy H=%d %s %s %s: loss %.6g -> %.6g (cpu %.6g -> %.6g), u rms %.3g, rms difference %.3g\n", H,
                    name, rule_name, whole ? "shared-moving" : "ring", gpu.losses.front(), gpu.losses.back(),
                    cpu.losses.front(), cpu.losses.back(), rms, rms_diff);
        ASSERT_GT(rms, 1e-4) << "the field did not move";
        EXPECT_LE(rms_diff, (metric == GreedyMetric::kMi ? 1e-2 : 1e-3) * rms) << "displacement vs CPU ranks";
      }
    }
  }
}

// Issue 39: what the stage runs for several shards on one GPU (in-process
// ranks sharing the whole moving image) gives one rank's bits, LNCC and MSE.
TEST_P(ShardedOpsGpuTest, GreedyIterationsOnOneGpuBitIdenticalToOneRank) {
  TESSERA_SKIP_WITHOUT_GPU();
  const int H = ranks();
  const Dims3 d{24, 20, 30}, md{26, 21, 33};
  const NDArray fixed = SmoothRandomVolume(d, 71, 0.02);
  const NDArray moving = SmoothRandomVolume(md, 72, 0.02);
  const int iterations = 4;
  for (const GreedyMetric metric : {GreedyMetric::kLncc, GreedyMetric::kMse, GreedyMetric::kMi}) {
    for (const GreedyRule rule : {GreedyRule::kAdam, GreedyRule::kNormalized}) {
      GreedyStepOptions o;
      o.metric = metric;
      o.rule = rule;
      o.lncc.window = 5;
      const char* name = metric == GreedyMetric::kLncc ? "lncc" : metric == GreedyMetric::kMi ? "mi" : "mse";
      SCOPED_TRACE(std::string("H = ") + std::to_string(H) + ", " + name +
                   (rule == GreedyRule::kAdam ? ", adam" : ", normalized"));
      const GreedyRun one = GreedyRunOn(fixed, moving, o, iterations, 1, true, true);
      const GreedyRun many = GreedyRunOn(fixed, moving, o, iterations, H, true, true);
      ASSERT_EQ(many.losses.size(), static_cast<size_t>(iterations));
      ASSERT_EQ(one.losses.size(), static_cast<size_t>(iterations));
      const size_t differ = CountDifferent(ToVector(many.u), ToVector(one.u));
      std::printf("greedy bits H=%d %s %s: loss %.9g -> %.9g (one rank %.9g -> %.9g), %zu u values differ\n", H, name,
                  rule == GreedyRule::kAdam ? "adam" : "normalized", many.losses.front(), many.losses.back(),
                  one.losses.front(), one.losses.back(), differ);
      for (int it = 0; it < iterations; ++it) EXPECT_EQ(many.losses[it], one.losses[it]) << "iteration " << it + 1;
      EXPECT_EQ(differ, 0u) << "displacement bits vs one rank";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shards, ShardedOpsGpuTest, ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) { return "H" + std::to_string(info.param); });

}  // namespace
}  // namespace parallel
}  // namespace tessera

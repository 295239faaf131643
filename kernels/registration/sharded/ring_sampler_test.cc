// The ring sampler on H = 1..4 CPU ranks (and uneven splits) against the
// unsharded CPU grid sampler: values and the sampling Jacobian (dL/du),
// zeros and border padding, points that leave the moving image, and moving
// and fixed grids of different sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/status.h"
#include "kernels/parallel/in_process_communicator.h"
#include "kernels/parallel/parallel_test_util.h"
#include "kernels/registration/sharded/ring_sampler.h"
#include "kernels/parallel/slab.h"
#include "kernels/registration/grid_sampler.h"

namespace tessera {
namespace parallel {
namespace {

using registration::Padding;
using testing::MaxRelError;
using testing::RandomArray;
using testing::SmoothRandomVolume;
using testing::ToVector;

struct Case {
  int ranks;
  int64_t fixed_nz;
  int64_t moving_nz;
  Padding padding;
};

class RingSamplerTest : public ::testing::TestWithParam<Case> {};

TEST_P(RingSamplerTest, EqualsTheUnshardedSampler) {
  const Case c = GetParam();
  const Dims3 fd{12, 10, c.fixed_nz}, md{14, 11, c.moving_nz};
  const NDArray moving = SmoothRandomVolume(md, 61);
  // Displacements up to 0.25 normalized units (several slices along z) and a
  // 10 % zoom-out with a shift: points cross shard borders and leave the image.
  const NDArray disp = RandomArray({fd.nx, fd.ny, fd.nz, 3}, -0.25, 0.25, 62);
  const float affine[12] = {1.1f, 0.02f, 0.0f, 0.03f, -0.01f, 1.08f, 0.02f, -0.02f, 0.0f, 0.03f, 1.12f, 0.05f};
  registration::GridSampleArgs args;
  args.image = moving.data<float>();
  args.image_dims = md;
  args.affine = affine;
  args.disp = disp.data<float>();
  args.out_dims = fd;
  args.padding = c.padding;
  std::vector<float> expect(fd.size());
  registration::cpu::GridSampleForward(args, expect.data());
  const NDArray grad_out = RandomArray({fd.nx, fd.ny, fd.nz}, -1.0, 1.0, 63);
  std::vector<float> expect_grad(fd.size() * 3);
  registration::GridSampleGrads grads;
  grads.grad_disp = expect_grad.data();
  registration::cpu::GridSampleBackward(args, grad_out.data<float>(), grads);
  // The case must exercise points outside (zeros) or clamped (border).
  int zeros = 0;
  for (float v : expect) zeros += v == 0.f;
  if (c.padding == Padding::kZeros) {
    ASSERT_GT(zeros, 0);
  }

  NDArray got = NDArray::Allocate({fd.nx, fd.ny, fd.nz}, DType::kFloat32).value();
  NDArray got_grad = NDArray::Allocate({fd.nx, fd.ny, fd.nz, 3}, DType::kFloat32).value();
  const SlabPartition fixed_split = SlabPartition::Make(fd.nz, c.ranks).value();
  const absl::Status s = RunInProcessRanks(c.ranks, [&](Communicator& comm) -> absl::Status {
    const Stream cpu = Stream::Cpu();
    TESSERA_ASSIGN_OR_RETURN(SlabLayout ol, fixed_split.Layout(fd, comm.rank(), 1));
    TESSERA_ASSIGN_OR_RETURN(SlabLayout ml, RingMovingLayout(md, comm.rank(), c.ranks));
    TESSERA_ASSIGN_OR_RETURN(NDArray shard, ExtractSlab(moving, ml, MemoryKind::kHost, cpu));
    // The overlap slice comes from the neighbour, not from the whole image.
    std::fill(shard.data<float>() + ml.own_voxels(), shard.data<float>() + ml.local_voxels(), NAN);
    TESSERA_RETURN_IF_ERROR(HaloExchange(comm, ml, shard, cpu));
    TESSERA_ASSIGN_OR_RETURN(NDArray u, ExtractSlab(disp, ol, MemoryKind::kHost, cpu));
    TESSERA_ASSIGN_OR_RETURN(NDArray out, NDArray::Allocate(ol.LocalShape(1), DType::kFloat32));
    TESSERA_ASSIGN_OR_RETURN(NDArray jac, NDArray::Allocate(ol.LocalShape(3), DType::kFloat32));
    TESSERA_ASSIGN_OR_RETURN(NDArray g, ExtractSlab(grad_out, ol, MemoryKind::kHost, cpu));
    RingSampleArgs ra;
    ra.out_layout = ol;
    ra.disp = u.data<float>();
    ra.affine = affine;
    ra.padding = c.padding;
    ra.moving_layout = ml;
    ra.moving = shard.data<float>();
    TESSERA_RETURN_IF_ERROR(RingGridSample(comm, ra, out.data<float>(), jac.data<float>(), cpu));
    TESSERA_RETURN_IF_ERROR(ApplySampleJacobian(ol, md, g.data<float>(), jac.data<float>(), cpu));
    TESSERA_RETURN_IF_ERROR(InsertOwnSlices(out, ol, &got, cpu));
    return InsertOwnSlices(jac, ol, &got_grad, cpu);
  });
  ASSERT_TRUE(s.ok()) << s;
  // Same positions and the same interpolation arithmetic: identical values.
  EXPECT_EQ(ToVector(got), expect);
  // dL/du: the same products in the same order (issue 39): identical too.
  EXPECT_EQ(ToVector(got_grad), expect_grad);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RingSamplerTest,
    ::testing::Values(Case{1, 16, 19, Padding::kZeros}, Case{2, 16, 19, Padding::kZeros},
                      Case{3, 16, 19, Padding::kZeros}, Case{4, 16, 19, Padding::kZeros},
                      Case{4, 37, 23, Padding::kZeros}, Case{2, 16, 19, Padding::kBorder},
                      Case{3, 17, 13, Padding::kBorder}, Case{4, 37, 23, Padding::kBorder}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return "H" + std::to_string(info.param.ranks) + "_fz" + std::to_string(info.param.fixed_nz) + "_mz" +
             std::to_string(info.param.moving_nz) + (info.param.padding == Padding::kZeros ? "_zeros" : "_border");
    });

TEST(RingSampler, RejectsAMovingShardWithoutTheOverlapSlice) {
  const Dims3 fd{4, 4, 8}, md{4, 4, 8};
  const absl::Status s = RunInProcessRanks(2, [&](Communicator& comm) -> absl::Status {
    const SlabPartition p = SlabPartition::Make(8, 2).value();
    RingSampleArgs ra;
    ra.out_layout = p.Layout(fd, comm.rank(), 0).value();
    ra.moving_layout = p.Layout(md, comm.rank(), 0).value();
    std::vector<float> m(64, 1.f), out(64);
    ra.moving = m.data();
    return RingGridSample(comm, ra, out.data(), nullptr, Stream::Cpu());
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("overlap slice"), std::string::npos) << s;
}

}  // namespace
}  // namespace parallel
}  // namespace tessera

// A stack of radial slices whose phantoms and coil maps differ, reconstructed
// in one call, gives per slice exactly (bit for bit, CPU) the image CgSense /
// AdjointSense give for that slice alone: maps per slice, one set, or one per
// pair of frames; NUFFT pair and Toeplitz normal operator. slice_done sees every slice once and
// its error stops the stack; bad arguments are refused.
#include "kernels/reconstruction/mri/sense_stack.h"

#include <gtest/gtest.h>

#include <complex>
#include <mutex>
#include <set>
#include <vector>

#include "kernels/reconstruction/mri/coil_maps.h"
#include "kernels/reconstruction/mri/density_compensation.h"
#include "kernels/reconstruction/mri/ellipse_phantom.h"
#include "kernels/reconstruction/mri/trajectory.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

using Complex = std::complex<float>;

constexpr int64_t kN = 40;
constexpr int kCoils = 3;
constexpr int64_t kSlices = 5;

struct Stack {
  Trajectory2D trajectory;
  std::vector<float> density;
  std::vector<Complex> maps, kspace;  // slices x coils x pixels, slices x coils x points
  SenseGeometry slice_geometry(int64_t s) const {
    return {kN, kN, kCoils, trajectory.size(), trajectory.kx.data(), trajectory.ky.data(),
            maps.data() + s * kCoils * kN * kN, density.data()};
  }
};

// Slice s: a Shepp-Logan scaled by 0.5 + 0.1 s seen through coils at radius 1.3 + 0.2 s.
const Stack& MakeStack() {
  static const Stack* stack = [] {
    auto* st = new Stack;
    st->trajectory = *RadialTrajectory(kN, 2 * kN, 29, RadialOrdering::kGoldenAngle);
    st->density = *PipeMenonDensity(st->trajectory);
    for (int64_t s = 0; s < kSlices; ++s) {
      const auto series = *BirdcageSeries({kCoils, 1.3 + 0.2 * s}, 4);
      const auto maps = EvaluateCoilSeries(series, kN, kN);
      st->maps.insert(st->maps.end(), maps.begin(), maps.end());
      const auto k = *PhantomCoilKspace(SheppLogan(0.5 + 0.1 * s), series, st->trajectory, kN, kN);
      st->kspace.insert(st->kspace.end(), k.begin(), k.end());
    }
    return st;
  }();
  return *stack;
}

std::vector<Complex> Slice(const std::vector<Complex>& images, int64_t s) {
  return std::vector<Complex>(images.begin() + s * kN * kN, images.begin() + (s + 1) * kN * kN);
}

void ExpectCgSlicesMatchAlone(int64_t slices_per_map_set, bool toeplitz) {
  const Stack& st = MakeStack();
  const Stream cpu = Stream::Cpu();
  CgSenseOptions options;
  options.iterations = 6;
  options.lambda = 1e-4;
  options.use_toeplitz = toeplitz;
  SenseStack stack{st.slice_geometry(0), kSlices, slices_per_map_set};
  std::vector<Complex> images(kSlices * kN * kN, Complex(NAN, NAN));
  std::mutex mu;
  std::multiset<int64_t> done;
  auto results = CgSenseStack(cpu, stack, st.kspace.data(), options, images.data(),
                              [&](int64_t slice, int64_t finished, int64_t total) {
                                std::lock_guard<std::mutex> lock(mu);
                                done.insert(slice);
                                EXPECT_EQ(finished, static_cast<int64_t>(done.size()));
                                EXPECT_EQ(total, kSlices);
                                return absl::OkStatus();
                              });
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), static_cast<size_t>(kSlices));
  EXPECT_EQ(done, (std::multiset<int64_t>{0, 1, 2, 3, 4}));
  for (int64_t s = 0; s < kSlices; ++s) {
    std::vector<Complex> alone(kN * kN, Complex(NAN, NAN));
    const SenseGeometry g = st.slice_geometry(slices_per_map_set == 0 ? 0 : s / slices_per_map_set);
    auto r = CgSense(cpu, g, st.kspace.data() + s * kCoils * st.trajectory.size(), options, alone.data());
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(Slice(images, s), alone) << "slice " << s;
    EXPECT_EQ((*results)[s].cg.iterations, r->cg.iterations);
    EXPECT_EQ((*results)[s].cg.relative_residual, r->cg.relative_residual);
    if (s > 0) {
      EXPECT_NE(Slice(images, s), Slice(images, 0)) << "slices must differ for the test to mean anything";
    }
  }
}

TEST(SenseStack, CgSenseSlicesMatchEachSliceAlone) { ExpectCgSlicesMatchAlone(/*slices_per_map_set=*/1, false); }
TEST(SenseStack, CgSenseToeplitzSlicesMatchEachSliceAlone) { ExpectCgSlicesMatchAlone(1, true); }
TEST(SenseStack, OneMapSetForAllSlices) { ExpectCgSlicesMatchAlone(/*slices_per_map_set=*/0, true); }
// Frames of one slice share its maps: slices 0-1 use set 0, 2-3 set 1, 4 set 2.
TEST(SenseStack, FramesShareTheirSlicesMaps) { ExpectCgSlicesMatchAlone(/*slices_per_map_set=*/2, true); }

TEST(SenseStack, AdjointSlicesMatchEachSliceAlone) {
  const Stack& st = MakeStack();
  const Stream cpu = Stream::Cpu();
  SenseStack stack{st.slice_geometry(0), kSlices, 1};
  std::vector<Complex> images(kSlices * kN * kN, Complex(NAN, NAN));
  ASSERT_TRUE(AdjointSenseStack(cpu, stack, st.kspace.data(), {}, images.data()).ok());
  for (int64_t s = 0; s < kSlices; ++s) {
    std::vector<Complex> alone(kN * kN, Complex(NAN, NAN));
    ASSERT_TRUE(AdjointSense(cpu, st.slice_geometry(s), st.kspace.data() + s * kCoils * st.trajectory.size(), {},
                             alone.data())
                    .ok());
    EXPECT_EQ(Slice(images, s), alone) << "slice " << s;
  }
}

TEST(SenseStack, SliceDoneErrorStopsTheStack) {
  const Stack& st = MakeStack();
  SenseStack stack{st.slice_geometry(0), kSlices, 1};
  std::vector<Complex> images(kSlices * kN * kN);
  std::mutex mu;
  int calls = 0;
  const absl::Status status =
      AdjointSenseStack(Stream::Cpu(), stack, st.kspace.data(), {}, images.data(), [&](int64_t, int64_t, int64_t) {
        std::lock_guard<std::mutex> lock(mu);
        ++calls;
        return absl::CancelledError("stop");
      });
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  // Each worker may finish the slice it holds, none starts another.
  EXPECT_LT(calls, kSlices);
}

TEST(SenseStack, RefusesBadArguments) {
  const Stack& st = MakeStack();
  std::vector<Complex> images(kSlices * kN * kN);
  SenseStack empty{st.slice_geometry(0), 0, 1};
  EXPECT_EQ(AdjointSenseStack(Stream::Cpu(), empty, st.kspace.data(), {}, images.data()).code(),
            absl::StatusCode::kInvalidArgument);
  SenseStack stack{st.slice_geometry(0), kSlices, 1};
  EXPECT_EQ(AdjointSenseStack(Stream::Cpu(), stack, nullptr, {}, images.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AdjointSenseStack(Stream::Cpu(), {st.slice_geometry(0), kSlices, -1}, st.kspace.data(), {}, images.data())
                .code(),
            absl::StatusCode::kInvalidArgument);
  CgSenseOptions options;
  options.iterations = 0;
  EXPECT_EQ(CgSenseStack(Stream::Cpu(), stack, st.kspace.data(), options, images.data()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mri
}  // namespace recon
}  // namespace tessera

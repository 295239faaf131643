// CUDA 3-D ESPIRiT against the CPU reference: the Gram volumes (cuFFT vs
// FFTW, float) of random kernels on even, odd and smaller-than-the-kernel
// grids within 1e-5 (relative L2); and whole 3-D maps of the simulated 32^3
// 4-coil problem (espirit3d_test_data.h): the same kernel count, eigenvalues
// within 1e-5, the same voxels cropped and maps within 1e-4 (voxels whose
// eigenvalue is within 1e-3 of the crop are left out of both counts).
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>
#include <vector>

#include "common/testing/device_array.h"
#include "common/testing/gpu_test.h"
#include "kernels/reconstruction/mri/espirit3d.h"
#include "kernels/reconstruction/mri/espirit3d_test_data.h"
#include "kernels/reconstruction/mri/espirit_volume.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

using Complex = std::complex<float>;
using ::tessera::testing::DeviceArray;
using ::tessera::testing::RelL2;

TEST(Espirit3dCuda, GramVolumesMatchCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok()) << stream.status();
  struct Case {
    std::array<int64_t, 3> dims;
    std::array<int, 3> half;
    int pairs;
  };
  for (const Case& c : {Case{{20, 18, 16}, {5, 5, 5}, 10}, Case{{17, 15, 13}, {4, 4, 4}, 6},
                        Case{{6, 24, 1}, {4, 4, 0}, 3}}) {
    std::mt19937 rng(c.pairs);
    std::uniform_real_distribution<double> u(-1, 1);
    const size_t span = static_cast<size_t>(2 * c.half[0] + 1) * (2 * c.half[1] + 1) * (2 * c.half[2] + 1);
    std::vector<std::complex<double>> kernels(span * c.pairs);
    for (auto& k : kernels) k = {u(rng), u(rng)};
    const int64_t voxels = c.dims[0] * c.dims[1] * c.dims[2];
    std::vector<Complex> on_cpu(static_cast<size_t>(c.pairs) * voxels);
    ASSERT_TRUE(EspiritGramVolumes(Stream::Cpu(), c.dims, c.half, c.pairs, kernels, on_cpu.data()).ok());
    auto d_gram = DeviceArray<Complex>::Allocate(on_cpu.size(), *stream);
    d_gram.Poison(Complex(NAN, NAN));
    ASSERT_TRUE(EspiritGramVolumes(*stream, c.dims, c.half, c.pairs, kernels, d_gram.data()).ok());
    EXPECT_LT(RelL2(d_gram.Download(), on_cpu), 1e-5) << c.dims[0] << " x " << c.dims[1] << " x " << c.dims[2];
  }
}

TEST(Espirit3dCuda, WholeMapsMatchCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const int coils = 4;
  const Espirit3dProblem p = MakeEspirit3dProblem({32, 32, 32}, coils);
  EspiritOptions options;
  options.calibration_size = 20;
  options.kernel_size = 5;
  auto on_cpu = Espirit3dCartesian(p.kspace.data(), p.dims, coils, options);
  auto on_gpu = Espirit3dCartesian(*stream, p.kspace.data(), p.dims, coils, options);
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.status();
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
  EXPECT_EQ(on_gpu->kernels, on_cpu->kernels);
  EXPECT_LT(RelL2(on_gpu->eigenvalues, on_cpu->eigenvalues), 1e-5);
  const int64_t voxels = 32 * 32 * 32;
  int64_t disagree = 0, kept = 0;
  std::vector<Complex> a, b;
  for (int64_t i = 0; i < voxels; ++i) {
    if (std::abs(on_cpu->eigenvalues[i] - options.crop) < 1e-3) continue;
    kept += on_cpu->eigenvalues[i] > options.crop;
    disagree += (on_gpu->eigenvalues[i] > options.crop) != (on_cpu->eigenvalues[i] > options.crop);
    for (int c = 0; c < coils; ++c) a.push_back(on_gpu->maps[c * voxels + i]), b.push_back(on_cpu->maps[c * voxels + i]);
  }
  EXPECT_EQ(disagree, 0);
  EXPECT_GT(kept, voxels / 10);
  EXPECT_LT(RelL2(a, b), 1e-4);
}

}  // namespace
}  // namespace mri
}  // namespace recon
}  // namespace tessera

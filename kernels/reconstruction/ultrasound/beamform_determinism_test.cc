// Deterministic mode on the CPU (ReconstructRequest.deterministic): the
// beamformed images do not depend on the thread count. Every sum is per
// pixel in a fixed order (beamform_cpu.cc splits whole columns or pixels
// over threads, never a sum), so this holds in both execution modes; the test
// is what keeps it so. CpuThreads() is read once per process, so the test
// runs itself again with TESSERA_CPU_THREADS = 1, 2, 3 and 7 (the child
// writes its thread count and the images' bytes) and compares the bytes.
#include <gtest/gtest.h>

#include <complex>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/parallel.h"
#include "kernels/reconstruction/ultrasound/beamform.h"
#include "kernels/reconstruction/ultrasound/simulator.h"

namespace tessera {
namespace recon {
namespace ultrasound {
namespace {

constexpr char kOutEnv[] = "TESSERA_US_DETERMINISM_OUT";

// DAS and MV images of speckle with noise: plane waves with delays (IQ) and
// synthetic aperture (RF, through ToAnalytic's threaded filter).
std::vector<std::complex<float>> AllImages() {
  const LinearArray probe = LinearArray::Uniform(40, 0.3e-3, 5e6);
  Sampling sampling;
  sampling.sampling_frequency_hz = 20e6;
  sampling.initial_time_s = 1e-6;
  TransmitSequence plane = TransmitSequence::PlaneWaves(5, 0.2);
  plane.delays_s = {0.1e-6, -0.05e-6, 0.0, 0.2e-6, 0.15e-6};
  const auto speckle = SpecklePhantom(300, -6e-3, 6e-3, 4e-3, 16e-3, {{0.0, 10e-3, 2e-3}}, 7);
  std::vector<Acquisition> acquisitions;
  for (bool iq : {true, false}) {
    Sampling s = sampling;
    s.demodulation_frequency_hz = iq ? 5e6 : 0;
    SimulationOptions options;
    options.iq = iq;
    options.relative_noise = 0.05;
    const TransmitSequence& seq = iq ? plane : TransmitSequence::SyntheticAperture(40);
    auto a = Simulate(probe, seq, s, SamplesForDepth(probe, seq, s, 17e-3), speckle, options);
    EXPECT_TRUE(a.ok()) << a.status();
    acquisitions.push_back(*a);
  }
  BeamformOptions das, mv;
  mv.method = BeamformMethod::kMinimumVariance;
  mv.mv.subarray = 12;
  mv.mv.temporal_half = 2;
  mv.mv.chunk_pixels = 9 * 60;  // several chunks
  const ImageGrid grid = ImageGrid::Span(37, 60, -5e-3, 5e-3, 5e-3, 15e-3);
  std::vector<std::complex<float>> all;
  for (const Acquisition& a : acquisitions) {
    for (const BeamformOptions& o : {das, mv}) {
      auto image = Beamform(a, grid, o, Backend::kCpu);
      EXPECT_TRUE(image.ok()) << image.status();
      if (image.ok()) all.insert(all.end(), image->begin(), image->end());
    }
  }
  return all;
}

// The child: runs only when the parent sets the output path.
TEST(BeamformDeterminismTest, Child) {
  const char* out = std::getenv(kOutEnv);
  if (out == nullptr) GTEST_SKIP() << "runs as the child of CpuImagesDoNotDependOnTheThreadCount";
  const std::vector<std::complex<float>> images = AllImages();
  std::ofstream f(out, std::ios::binary);
  const int threads = CpuThreads();
  f.write(reinterpret_cast<const char*>(&threads), sizeof(threads));
  f.write(reinterpret_cast<const char*>(images.data()), images.size() * sizeof(images[0]));
}

TEST(BeamformDeterminismTest, CpuImagesDoNotDependOnTheThreadCount) {
  if (std::getenv(kOutEnv) != nullptr) GTEST_SKIP() << "the child";
  // This test binary (std::system's /proc/self/exe would be the shell).
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string reference;
  for (int threads : {1, 2, 3, 7}) {
    SCOPED_TRACE(threads);
    const std::string out =
        (std::filesystem::path(::testing::TempDir()) / ("images_" + std::to_string(threads))).string();
    const std::string cmd = "TESSERA_CPU_THREADS=" + std::to_string(threads) + " " + kOutEnv + "='" + out +
                            "' '" + self + "' --gtest_filter=BeamformDeterminismTest.Child >/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream f(out, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    ASSERT_GT(bytes.size(), sizeof(int) + 4 * 37 * 60 * sizeof(std::complex<float>) - 1);
    int child_threads = 0;
    std::memcpy(&child_threads, bytes.data(), sizeof(int));
    EXPECT_EQ(child_threads, threads);  // the setting took effect
    const std::string images = bytes.substr(sizeof(int));
    if (reference.empty()) {
      reference = images;
      continue;
    }
    EXPECT_TRUE(images == reference) << "the images differ from the 1-thread run";
  }
}

}  // namespace
}  // namespace ultrasound
}  // namespace recon
}  // namespace tessera

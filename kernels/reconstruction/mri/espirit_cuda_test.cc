// CUDA ESPIRiT per-pixel eigenvectors against the CPU reference (both double
// precision inside) on random Hermitian Gram matrices with a dominant
// eigenvector (8, 12 and 32 coils, 3000 pixels): eigenvalues within 1e-5 and
// maps within 1e-5 (relative l2), the same pixels cropped (values within 1e-3
// of the crop are left out of that count); and whole ESPIRiT maps of a random
// smooth multi-coil calibration region through the CUDA stream against the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>
#include <vector>

#include "common/testing/device_array.h"
#include "common/testing/gpu_test.h"
#include "kernels/reconstruction/mri/espirit.h"
#include "kernels/reconstruction/mri/espirit_pixels.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

using Complex = std::complex<float>;
using ::tessera::testing::DeviceArray;
using ::tessera::testing::RelL2;

// Packed upper triangles of G = a s s^H + B B^H / (4 coils) per pixel, a in (0.3, 1.2).
std::vector<Complex> RandomGrams(int coils, int64_t pixels, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1), a_dist(0.3, 1.2);
  const int pairs = coils * (coils + 1) / 2;
  std::vector<Complex> gram(static_cast<size_t>(pairs) * pixels);
  std::vector<std::complex<double>> s(coils), b(static_cast<size_t>(coils) * coils), g(b.size());
  for (int64_t i = 0; i < pixels; ++i) {
    double norm = 0;
    for (auto& x : s) x = {u(rng), u(rng)}, norm += std::norm(x);
    for (auto& x : b) x = {u(rng), u(rng)};
    const double a = a_dist(rng);
    for (int r = 0; r < coils; ++r) {
      for (int c = 0; c < coils; ++c) {
        std::complex<double> v = a * s[r] * std::conj(s[c]) / norm;
        for (int k = 0; k < coils; ++k) v += b[r * coils + k] * std::conj(b[c * coils + k]) / (4.0 * coils * coils);
        g[r * coils + c] = v;
      }
    }
    for (int c1 = 0, l = 0; c1 < coils; ++c1) {
      for (int c2 = c1; c2 < coils; ++c2, ++l) gram[l * pixels + i] = Complex(g[c1 * coils + c2]);
    }
  }
  return gram;
}

TEST(EspiritCuda, PixelMapsMatchCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const int64_t pixels = 3000;
  const double crop = 0.6;
  for (int coils : {8, 12, 32}) {
    const auto gram = RandomGrams(coils, pixels, 100 + coils);
    std::vector<std::complex<double>> reference(coils);
    for (int c = 0; c < coils; ++c) reference[c] = std::polar(1.0 / std::sqrt(coils), 0.3 * c);
    std::vector<Complex> maps(static_cast<size_t>(coils) * pixels);
    std::vector<float> eigenvalues(pixels);
    cpu::EspiritPixelMaps(coils, pixels, gram.data(), reference.data(), 8, crop, maps.data(), eigenvalues.data());

    auto d_gram = DeviceArray<Complex>::FromHost(gram, *stream);
    auto d_ref = DeviceArray<std::complex<double>>::FromHost(reference, *stream);
    auto d_maps = DeviceArray<Complex>::Allocate(maps.size(), *stream);
    auto d_ev = DeviceArray<float>::Allocate(eigenvalues.size(), *stream);
    d_maps.Poison(Complex(NAN, NAN));
    d_ev.Poison(NAN);
    ASSERT_TRUE(EspiritPixelMaps(*stream, coils, pixels, d_gram.data(), d_ref.data(), 8, crop, d_maps.data(),
                                 d_ev.data())
                    .ok());
    const auto gpu_maps = d_maps.Download();
    const auto gpu_ev = d_ev.Download();
    EXPECT_LT(RelL2(gpu_ev, eigenvalues), 1e-5) << coils << " coils";
    int64_t kept = 0, disagree = 0;
    std::vector<Complex> a, b;
    for (int64_t i = 0; i < pixels; ++i) {
      if (std::abs(eigenvalues[i] - crop) < 1e-3) continue;
      kept += eigenvalues[i] > crop;
      disagree += (gpu_ev[i] > crop) != (eigenvalues[i] > crop);
      for (int c = 0; c < coils; ++c) a.push_back(gpu_maps[c * pixels + i]), b.push_back(maps[c * pixels + i]);
    }
    EXPECT_EQ(disagree, 0) << coils << " coils";
    EXPECT_GT(kept, pixels / 4) << coils << " coils";
    EXPECT_LT(kept, pixels) << coils << " coils";
    EXPECT_LT(RelL2(a, b), 1e-5) << coils << " coils";
  }
}

TEST(EspiritCuda, WholeMapsMatchCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok()) << stream.status();
  // A smooth random object times smooth random coils, sampled on a 24^2 centre: k-space of
  // band-limited products (a few low-frequency terms each), so ESPIRiT finds a signal subspace.
  const int coils = 8;
  const int64_t cal = 24, n = 96;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<Complex> calibration(cal * cal * coils, Complex(0, 0));
  std::vector<std::complex<double>> object(25), coil(25 * coils);
  for (auto& x : object) x = {u(rng), u(rng)};
  for (auto& x : coil) x = {u(rng), u(rng)};
  object[12] = 4;  // a dominant DC term
  for (int c = 0; c < coils; ++c) {
    coil[c * 25 + 12] += 3.0;
    for (int oy = -2; oy <= 2; ++oy) {
      for (int ox = -2; ox <= 2; ++ox) {
        for (int sy = -2; sy <= 2; ++sy) {
          for (int sx = -2; sx <= 2; ++sx) {
            const int64_t u0 = cal / 2 + ox + sx, v0 = cal / 2 + oy + sy;
            calibration[(c * cal + v0) * cal + u0] +=
                Complex(object[(oy + 2) * 5 + ox + 2] * coil[c * 25 + (sy + 2) * 5 + sx + 2]);
          }
        }
      }
    }
  }
  auto on_cpu = EspiritFromCalibration(calibration, cal, cal, coils, n, n);
  auto on_gpu = EspiritFromCalibration(*stream, calibration, cal, cal, coils, n, n);
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.status();
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
  EXPECT_EQ(on_gpu->kernels, on_cpu->kernels);
  EXPECT_LT(RelL2(on_gpu->eigenvalues, on_cpu->eigenvalues), 1e-5);
  EXPECT_LT(RelL2(on_gpu->maps, on_cpu->maps), 1e-4);
}

}  // namespace
}  // namespace mri
}  // namespace recon
}  // namespace tessera

// The CPU registration kernels of one deformable iteration on a 1 mm brain
// grid (181x217x181), side by side in one process (issue 38): the grid
// sampler on each CPU path (grid_sampler_cpu_path.h: scalar reference, AVX2,
// AVX-512; MI's jittered voxels, affine + displacement, forward and dL/du),
// plus the greedy step's composition and Mattes MI's histogram and gradient on
// each path, and the field smoothings (which include a copy of the field). Each variant is timed
// round-robin with the others (reps interleaved, so load from other processes
// hits all alike) and reported as process CPU time and wall time per call,
// median of the reps, with parallel efficiency = CPU / (wall * threads).
//
//   registration_cpu_kernels_bench [reps=7]
//   TESSERA_CPU_THREADS=1 registration_cpu_kernels_bench   (single thread)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "common/device.h"
#include "bench/sampler_bench_case.h"
#include "common/parallel.h"
#include "kernels/registration/gaussian_smooth.h"
#include "kernels/registration/grid_sampler.h"
#include "kernels/registration/grid_sampler_cpu_path.h"
#include "kernels/registration/lean_compose_cpu_rows.h"
#include "kernels/registration/mutual_info_cpu_steps.h"
#include "kernels/registration/storage16.h"
#include "kernels/registration/types.h"

namespace tessera {
namespace registration {
namespace {

struct Variant {
  std::string name;
  std::function<void()> run;
  std::vector<double> cpu_ms, wall_ms;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Run(int reps) {
  const bench::SamplerBenchCase c = bench::MakeSamplerBenchCase();
  const Dims3 d = c.dims;
  const int64_t n = d.size();
  const int threads = CpuThreads();
  std::printf("CPU registration kernels, %s, %d threads, %d interleaved reps (median)\n", DimsToString(d).c_str(),
              threads, reps);
  std::vector<float> out(n), grad_disp(3 * n);
  const std::vector<float>& disp = c.disp;
  const std::vector<float>& grad_out = c.grad_out;
  GridSampleArgs args = c.Args();
  args.voxel_jitter_key = 0x9e3779b97f4a7c15ull;  // MI's jittered voxels, as the deformable stage samples
  // The shifted fixed image: no affine, no field, jittered.
  GridSampleArgs fixed_args = args;
  fixed_args.affine = nullptr;
  fixed_args.disp = nullptr;

  // A moving image whose axes are permuted against the fixed grid (the 1 mm
  // "reoriented" case: output x walks the moving image's z): the gathers
  // of one output row touch a new 4 KiB page per voxel.
  GridSampleArgs reoriented = args;
  const std::vector<float> permuted = {0.02f, 0.98f, 0.01f, 0.01f, 0.03f, -0.02f, -1.01f, -0.02f,
                                       -0.99f, 0.02f, 0.03f, 0.015f};
  reoriented.affine = permuted.data();

  std::vector<Variant> variants;
  for (SamplerCpuPath path : AvailableSamplerCpuPaths()) {
    const std::string p = SamplerCpuPathName(path);
    variants.push_back({"sampler fwd (moving) " + p, [&, path] { cpu::GridSampleForwardOnPath(path, args, out.data()); }});
    variants.push_back(
        {"sampler fwd (reorient)" + p, [&, path] { cpu::GridSampleForwardOnPath(path, reoriented, out.data()); }});
    variants.push_back(
        {"sampler fwd (fixed)  " + p, [&, path] { cpu::GridSampleForwardOnPath(path, fixed_args, out.data()); }});
    variants.push_back({"sampler bwd dL/du    " + p, [&, path] {
                          GridSampleGrads g;
                          g.grad_disp = grad_disp.data();
                          cpu::GridSampleBackwardOnPath(path, args, grad_out.data(), g);
                        }});
  }
  // The greedy step's composition (scaled rule, steps up to 2 voxels), the
  // whole grid as one slab.
  lean_internal::ComposeParams cp;
  cp.dims = d;
  cp.scale = 2.0f;
  const double lo[3] = {-1, -1, -1}, hi[3] = {1, 1, 1};
  const SamplerGeometry<float> cg = MakeSamplerGeometry<float>(d, d, lo, hi, Padding::kBorder);
  const int64_t dn[3] = {d.nx, d.ny, d.nz};
  for (int c = 0; c < 3; ++c) {
    cp.to_normalized[c] = 2.f / static_cast<float>(dn[c] - 1);
    cp.out_lo[c] = cg.out_lo[c];
    cp.out_step[c] = cg.out_step[c];
    cp.in_half[c] = cg.in_half[c];
  }
  cp.grid_nz = d.nz;
  std::vector<float> grad(3 * n), composed(3 * n);
  for (int64_t v = 0; v < 3 * n; ++v) grad[v] = static_cast<float>((static_cast<uint32_t>(v) * 2246822519u >> 9) & 0xffff) / 32768.0f - 1.0f;
  // The mixed-precision stage's bf16 gradient (the macaque LNCC case).
  std::vector<BFloat16> grad16(3 * n);
  for (int64_t v = 0; v < 3 * n; ++v) grad16[v] = FromFloat<BFloat16>(grad[v]);
  for (SamplerCpuPath path : AvailableSamplerCpuPaths()) {
    variants.push_back({std::string("compose (greedy step)  ") + SamplerCpuPathName(path), [&, path] {
                          lean_internal::ComposeSlabCpuOnPath(path, cp, disp.data(), grad.data(), 0, d.nz,
                                                              composed.data());
                        }});
    variants.push_back({std::string("compose, bf16 gradient ") + SamplerCpuPathName(path), [&, path] {
                          lean_internal::ComposeSlabCpuOnPath(path, cp, disp.data(), grad16.data(), 0, d.nz,
                                                              composed.data());
                        }});
  }
  // Mattes MI's two per-voxel passes (32 bins, cubic windows): the joint
  // histogram and the gradient from its table, fixed = the image zeroed
  // outside an ellipsoid (a head's 40 % of background), warped = that
  // sampled at the case's transform.
  std::vector<float> mi_fixed = c.image, warped(n), mi_grad(n);
  for (int64_t k = 0; k < d.nz; ++k) {
    for (int64_t j = 0; j < d.ny; ++j) {
      for (int64_t i = 0; i < d.nx; ++i) {
        const double x = 2.0 * i / d.nx - 1, y = 2.0 * j / d.ny - 1, z = 2.0 * k / d.nz - 1;
        if (x * x + y * y + z * z > 1.09) mi_fixed[d.index(i, j, k)] = 0.0f;
      }
    }
  }
  GridSampleArgs mi_args = args;
  mi_args.image = mi_fixed.data();
  cpu::GridSampleForwardOnPath(SamplerCpuPath::kAuto, mi_args, warped.data());
  const int bits = mi_cpu::HistogramFixedPointBits(n);
  // The registration's fixed window (box, metric.h) and the cubic one.
  std::vector<MattesMiOptions> mi(2);
  std::vector<std::vector<double>> mi_table(2);
  std::vector<double> mi_total(2);
  for (int w = 0; w < 2; ++w) {
    mi[w].fixed_kernel = w == 0 ? ParzenKernel::kBox : ParzenKernel::kCubicBSpline;
    const MattesMiResult r = mi_cpu::Finalize(
        mi_cpu::HistogramFromFixed(
            mi_cpu::JointHistogramFixed(mi_fixed.data(), warped.data(), nullptr, n, mi[w], bits), bits),
        mi[w], &mi_table[w]);
    mi_total[w] = r.total_weight;
  }
  for (SamplerCpuPath path : AvailableSamplerCpuPaths()) {
    for (int w = 0; w < 2; ++w) {
      const std::string p = std::string(w == 0 ? "box " : "cubic ") + SamplerCpuPathName(path);
      variants.push_back({"MI histogram " + p, [&, path, w] {
                            mi_cpu::JointHistogramFixedOnPath(path, mi_fixed.data(), warped.data(), nullptr, n, mi[w],
                                                              bits);
                          }});
      variants.push_back({"MI gradient  " + p, [&, path, w] {
                            mi_cpu::GradientFromTableOnPath(path, mi_fixed.data(), warped.data(), nullptr, n, mi[w],
                                                            mi_table[w], mi_total[w], mi_grad.data());
                          }});
    }
  }
  // The lean stage's two smoothings of a 3-component field: the gradient at
  // sigma 6 voxels (37 taps per axis) and u at 0.147 voxels (3 taps).
  NDArray field = NDArray::Allocate({d.nx, d.ny, d.nz, 3}, DType::kFloat32, MemoryKind::kHost).value();
  for (double sigma : {6.0, 0.147}) {
    variants.push_back({"smooth field sigma " + std::to_string(sigma).substr(0, 5), [&, sigma] {
                          std::copy(grad.begin(), grad.end(), field.data<float>());
                          (void)GaussianSmooth(field, &field, {sigma, sigma, sigma}, Stream::Cpu());
                        }});
  }
  for (int r = 0; r < reps; ++r) {
    for (Variant& v : variants) {
      const std::clock_t c0 = std::clock();
      const auto t0 = std::chrono::steady_clock::now();
      v.run();
      const auto t1 = std::chrono::steady_clock::now();
      v.cpu_ms.push_back(1e3 * static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
      v.wall_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
  }
  std::printf("%-30s %10s %10s %12s\n", "variant", "CPU ms", "wall ms", "efficiency");
  for (const Variant& v : variants) {
    const double c = Median(v.cpu_ms), w = Median(v.wall_ms);
    std::printf("%-30s %10.1f %10.1f %11.0f%%\n", v.name.c_str(), c, w, 100.0 * c / (w * threads));
  }
  return 0;
}

}  // namespace
}  // namespace registration
}  // namespace tessera

int main(int argc, char** argv) { return tessera::registration::Run(argc > 1 ? std::atoi(argv[1]) : 7); }

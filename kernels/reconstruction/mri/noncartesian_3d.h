// 3-D non-Cartesian SENSE reconstruction (issue 36), CG-SENSE or adjoint, on
// one of two exact paths (Recon3DOptions.allow_stack_of_stars; the MRI engine
// allows the stack path on the CPU only, where it is the cheaper one; on CUDA
// the 3-D NUFFT is):
//   - stack of stars (every partition holds the same kx, ky points, and the
//     partitions are the nz Cartesian kz = -nz/2 .. nz/2 - 1 (to 2e-5), each once, in
//     any order; density weights, if any, equal in every partition): an
//     inverse FFT along kz turns the data into nz independent 2-D slices on
//     one trajectory, reconstructed by sense_stack.h (2-D NUFFTs). Exact: the
//     3-D normal equations are block diagonal after the kz transform, with the
//     same relative lambda per slice; only the CG iterates differ (one Krylov
//     space per slice instead of one for the volume), so the images agree at
//     convergence and the adjoints agree to float rounding.
//   - anything else (3-D radial "kooshball", undersampled or irregular kz):
//     the 3-D NUFFT SenseOperator (sense_operator.h, nz > 1 with kz).
// Inputs and the result are host memory; a CUDA stream gets device copies
// (the kz FFT of the stack path runs on the host with FFTW: O(N log N) next
// to the iterations).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_MRI_NONCARTESIAN_3D_H_
#define TESSERA_KERNELS_RECONSTRUCTION_MRI_NONCARTESIAN_3D_H_

#include <complex>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/reconstruction/mri/cg_sense.h"
#include "kernels/reconstruction/mri/sense_stack.h"

namespace tessera {
namespace recon {
namespace mri {

// Host pointers.
struct NonCartesian3D {
  int64_t nx = 0, ny = 0, nz = 0;
  int coils = 0;
  int64_t points = 0;                            // per coil
  const float* kx = nullptr;                     // points, 1/FOV
  const float* ky = nullptr;
  const float* kz = nullptr;
  const std::complex<float>* kspace = nullptr;   // coils x points
  const std::complex<float>* maps = nullptr;     // coils x nz x ny x nx
  const float* density_weights = nullptr;        // points or null
};

enum class Path3D { kStackOfStars, kNufft3D };
const char* Path3DName(Path3D path);

// Where the partitions of a stack of stars sit: points_per_partition
// consecutive points each, partition p at kz = partition_kz[p].
struct StackOfStarsLayout {
  int64_t points_per_partition = 0;
  std::vector<int64_t> partition_kz;
};

// The layout when the trajectory (and weights) qualify for the stack path
// (see above; points split into nz equal blocks), else nullopt.
std::optional<StackOfStarsLayout> DetectStackOfStars(int64_t points, const float* kx, const float* ky,
                                                     const float* kz, const float* weights, int64_t nz);

struct Recon3DOptions {
  bool adjoint_only = false;      // AdjointSense instead of CG-SENSE
  bool allow_stack_of_stars = true;  // false: always the 3-D NUFFT
  CgSenseOptions cg;              // iterations, lambda, Toeplitz, NUFFT options
  SliceDone slice_done;           // stack path: per finished slice
};

struct Recon3DResult {
  Path3D path = Path3D::kNufft3D;
  int iterations = 0;             // CG: the most any slice (or the volume) took
  double relative_residual = 0;   // CG: the largest final one
};

// image: nx ny nz host values. INVALID_ARGUMENT for sizes < 2 (nz too), null
// arrays, and what SenseOperator / CgSense refuse.
absl::StatusOr<Recon3DResult> ReconstructNonCartesian3D(const Stream& stream, const NonCartesian3D& problem,
                                                        const Recon3DOptions& options,
                                                        std::complex<float>* image);

// Density compensation for the 3-D adjoint, in volume units (so that
// E^H W y / (nx ny nz) is on the image's scale): a stack of stars gets the
// Pipe-Menon weights of its in-plane trajectory (density_compensation.h) in
// every partition; anything else the analytic weights of full-diameter 3-D
// radial spokes of `samples` points, 2 pi |k|^2 dk / spokes ((pi / 6) dk^3 /
// spokes at k = 0), exact for a kooshball. INVALID_ARGUMENT for points not
// a multiple of samples.
absl::StatusOr<std::vector<float>> DensityCompensation3D(const NonCartesian3D& problem, int64_t samples);

// The stack path's data step, exposed for tests and benches: kspace (coils x
// nz partitions x P) -> slices (nz x coils x P) by the centred inverse DFT
// along kz divided by nz.
absl::StatusOr<std::vector<std::complex<float>>> PartitionsToSlices(const StackOfStarsLayout& layout,
                                                                    const std::complex<float>* kspace, int coils,
                                                                    int64_t nz);

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_NONCARTESIAN_3D_H_

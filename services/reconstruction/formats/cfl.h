// BART's .cfl/.hdr arrays (the files `bart` reads and writes): complex float
// data, up to 16 dimensions, first dimension fastest, in BART's dimension
// conventions (misc/mri.h):
//   READ_DIM 0, PHS1_DIM 1, PHS2_DIM 2  image / Cartesian k-space axes
//   COIL_DIM 3, MAPS_DIM 4, TE_DIM 5, COEFF_DIM 6, COEFF2_DIM 7, ITER_DIM 8,
//   CSHIFT_DIM 9, TIME_DIM 10, TIME2_DIM 11, LEVEL_DIM 12, SLICE_DIM 13,
//   AVG_DIM 14, BATCH_DIM 15.
// MRI data in these conventions (what the MRI kernels take, same memory order):
//   image            nx x ny x 1                      (kernels: nx x ny, x fastest)
//   coil maps        nx x ny x 1 x coils              (coil-major maps)
//   Cartesian k      nx x ny x 1 x coils              (zero-filled where not sampled)
//   trajectory       3 x samples x spokes, 1/FOV units (real parts; kz = 0 in 2-D)
//   non-Cartesian k  1 x samples x spokes x coils     (coil-major, points sample-fastest)
//
// The .hdr is text: a line "# Dimensions" followed by the dimensions
// (BART writes all 16; fewer are padded with 1); other "# ..." sections
// (Command, Files, Creator) are skipped. The .cfl holds the values as
// interleaved little-endian float32 (re, im) and must hold exactly that many.
//
// Errors: NOT_FOUND for a missing file; INVALID_ARGUMENT for a malformed
// header (no dimensions line, non-numeric, zero or negative dimensions, more
// than 16, a product past kMaxCflElements); DATA_LOSS for a .cfl shorter or
// longer than the header says. Messages start with the path.
#ifndef TESSERA_SERVICES_RECONSTRUCTION_FORMATS_CFL_H_
#define TESSERA_SERVICES_RECONSTRUCTION_FORMATS_CFL_H_

#include <array>
#include <complex>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/reconstruction/mri/trajectory.h"

namespace tessera::recon::formats {

inline constexpr int kCflDims = 16;
// Sanity cap on elements (2^33 complex values, 64 GiB) so a corrupt header
// cannot ask for an absurd allocation.
inline constexpr int64_t kMaxCflElements = int64_t{1} << 33;

enum BartDim : int {
  kReadDim = 0, kPhs1Dim = 1, kPhs2Dim = 2, kCoilDim = 3, kMapsDim = 4, kTeDim = 5, kCoeffDim = 6,
  kCoeff2Dim = 7, kIterDim = 8, kCshiftDim = 9, kTimeDim = 10, kTime2Dim = 11, kLevelDim = 12,
  kSliceDim = 13, kAvgDim = 14, kBatchDim = 15,
};

struct CflArray {
  std::array<int64_t, kCflDims> dims;  // every entry >= 1
  std::vector<std::complex<float>> data;  // product of dims values, dim 0 fastest

  CflArray() { dims.fill(1); }
  int64_t dim(int d) const { return dims[d]; }
  int64_t elements() const;
};

// A zero-filled array of `dims` (up to 16; missing ones are 1).
// INVALID_ARGUMENT for more than 16 dims, a dim < 1 or too many elements.
absl::StatusOr<CflArray> MakeCfl(const std::vector<int64_t>& dims);

// `path` is the base name ("k" for k.cfl + k.hdr); a trailing ".cfl" or
// ".hdr" is accepted and stripped.
absl::StatusOr<CflArray> ReadCfl(const std::string& path);
// The dimensions only (data left empty), with the same checks of the .hdr and
// of the .cfl's size as ReadCfl: for cheap checks of large inputs.
absl::StatusOr<CflArray> ReadCflHeader(const std::string& path);
absl::Status WriteCfl(const std::string& path, const CflArray& array);

// Header text <-> dims (exposed for tests and for streaming uploads).
absl::StatusOr<std::array<int64_t, kCflDims>> ParseCflHeader(const std::string& text, const std::string& path);
std::string FormatCflHeader(const std::array<int64_t, kCflDims>& dims);

// A 2-D trajectory from a 3 x samples x spokes array (any further dims must
// be 1). INVALID_ARGUMENT for another shape, a non-zero kz or imaginary part
// (BART's are real) or a non-finite coordinate.
absl::StatusOr<mri::Trajectory2D> TrajectoryFromCfl(const CflArray& array);
// The same with kz kept (issue 36: 3-D; stack-of-stars partitions are folded
// into the spokes, partition slowest): Trajectory3D with partitions = 1.
absl::StatusOr<mri::Trajectory3D> Trajectory3DFromCfl(const CflArray& array);
CflArray TrajectoryToCfl(const mri::Trajectory2D& trajectory);

// Sizes of a non-Cartesian 2-D problem, checked for consistency between the
// arrays (k-space 1 x samples x spokes x coils, trajectory 3 x samples x
// spokes, maps nx x ny x 1 x coils): INVALID_ARGUMENT naming the array and
// the dimension that disagree.
// Stacks (issue 40): k-space may also have TIME_DIM (10, frames) and
// SLICE_DIM (13, slices) > 1, each frame and slice sampled on the one
// trajectory; the maps' SLICE_DIM is the k-space's (a set per slice, used for
// every frame of it) or 1 (one set for all). Every other dimension is 1.
// 3-D (issue 36): maps nx x ny x nz x coils with nz (PHS2) > 1 make a 3-D
// volume from a trajectory with kz; a volume does not stack (k-space TIME_DIM
// and SLICE_DIM must then be 1).
struct NonCartesianDims {
  int64_t nx = 0, ny = 0, nz = 1, samples = 0, spokes = 0;
  int coils = 0;
  int64_t frames = 1, slices = 1;  // k-space's TIME_DIM and SLICE_DIM
  bool maps_per_slice = false;     // the maps have SLICE_DIM == slices > 1
};

// k-space's extra dimensions as a stack: frames (TIME_DIM) x slices
// (SLICE_DIM), INVALID_ARGUMENT ("kspace: dimension d is n; ...") when a
// dimension other than `own` (the layout's own dimensions), 10 and 13
// exceeds 1.
absl::StatusOr<std::array<int64_t, 2>> StackDims(const CflArray& kspace, std::initializer_list<int> own);
absl::StatusOr<NonCartesianDims> CheckNonCartesianCfl(const CflArray& kspace, const CflArray& trajectory,
                                                      const CflArray& maps);

}  // namespace tessera::recon::formats

#endif  // TESSERA_SERVICES_RECONSTRUCTION_FORMATS_CFL_H_

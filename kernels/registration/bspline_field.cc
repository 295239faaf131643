// Argument checks and backend dispatch for bspline_field.h: each operation
// is three passes (bspline_field_internal.h) through two scratch arrays.
#include "kernels/registration/bspline_field.h"

#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/registration/bspline_field_internal.h"
#include "kernels/registration/reg_checks.h"

namespace tessera {
namespace registration {
namespace {

using bspline_internal::Pass;
using bspline_internal::PassKind;
using Dims = std::array<int64_t, 3>;

constexpr int64_t kMaxControls = int64_t{1} << 31;

// (d0, d1, d2, C) of a rank-3 or rank-4 float32 array in the stream's memory.
absl::Status CheckVolume(const NDArray& a, const char* name, const Stream& stream, Dims* dims, int64_t* comps) {
  TESSERA_RETURN_IF_ERROR(reg_internal::CheckArray(a, name, DType::kFloat32));
  if (a.rank() != 3 && a.rank() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": expected (nx, ny, nz) or (nx, ny, nz, C), got ", ShapeToString(a.shape())));
  }
  TESSERA_RETURN_IF_ERROR(reg_internal::CheckResidency(a, name, stream));
  *dims = {a.dim(0), a.dim(1), a.dim(2)};
  *comps = a.rank() == 4 ? a.dim(3) : 1;
  return absl::OkStatus();
}

absl::Status CheckGrid(const BsplineGrid& grid) {
  for (int a = 0; a < 3; ++a) {
    TESSERA_ASSIGN_OR_RETURN(BsplineAxis expected, MakeBsplineAxis(grid[a].voxels, grid[a].voxels_per_control));
    if (expected.controls != grid[a].controls) {
      return absl::InvalidArgumentError(absl::StrCat("B-spline grid axis ", a, ": ", grid[a].controls,
                                                     " controls, but ", grid[a].voxels, " voxels at ",
                                                     grid[a].voxels_per_control, " voxels per control need ",
                                                     expected.controls, " (use MakeBsplineAxis)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ExpectDims(const Dims& got, int64_t got_comps, const Dims& want, int64_t want_comps, const char* name) {
  if (got != want || got_comps != want_comps) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is (", got[0], ", ", got[1], ", ", got[2], ", ", got_comps,
                                                   "), expected (", want[0], ", ", want[1], ", ", want[2], ", ",
                                                   want_comps, ")"));
  }
  return absl::OkStatus();
}

int64_t Volume(const Dims& d) { return d[0] * d[1] * d[2]; }

// Runs the three passes `kinds` along `order`, from `in` (in_dims) to `out`
// (out_dims), C components; the two intermediates live in the workspace.
absl::Status RunPasses(const Stream& stream, const std::array<int, 3>& order, PassKind kind,
                       const std::array<double, 3>& s, const float* in, const Dims& in_dims, float* out,
                       const Dims& out_dims, int64_t comps, Workspace* workspace) {
  Dims d1 = in_dims, d2;
  d1[order[0]] = out_dims[order[0]];
  d2 = d1;
  d2[order[1]] = out_dims[order[1]];
  const size_t n1 = static_cast<size_t>(Volume(d1) * comps), n2 = static_cast<size_t>(Volume(d2) * comps);
  Workspace local;
  TESSERA_ASSIGN_OR_RETURN(void* base, ReserveScratch(stream, ScratchCarver::Align(n1 * sizeof(float)) +
                                                                  ScratchCarver::Align(n2 * sizeof(float)),
                                                      workspace, local));
  ScratchCarver carver(base);
  float* t1 = carver.Take<float>(n1);
  float* t2 = carver.Take<float>(n2);
  const float* src = in;
  Dims cur = in_dims;
  for (int step = 0; step < 3; ++step) {
    const int axis = order[step];
    Pass p;
    p.kind = kind;
    p.inner = 1;
    for (int a = 0; a < axis; ++a) p.inner *= cur[a];
    p.n_in = cur[axis];
    p.n_out = out_dims[axis];
    p.outer = comps;
    for (int a = axis + 1; a < 3; ++a) p.outer *= cur[a];
    p.s = s[axis];
    p.inv_s = 1.0 / s[axis];
    float* dst = step == 0 ? t1 : step == 1 ? t2 : out;
    if (stream.backend() == Backend::kCpu) {
      cpu::BsplinePass(p, src, dst);
    } else {
#if TESSERA_WITH_CUDA
      TESSERA_RETURN_IF_ERROR(cuda::BsplinePass(p, src, dst, stream));
#else
      return reg_internal::CudaUnavailable("B-spline field");
#endif
    }
    src = dst;
    cur[axis] = out_dims[axis];
  }
  // Without a caller's workspace the scratch is freed on return: finish first.
  if (workspace == nullptr && stream.backend() == Backend::kCuda) TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BsplineAxis> MakeBsplineAxis(int64_t voxels, double voxels_per_control) {
  if (voxels < 1) return absl::InvalidArgumentError(absl::StrCat("B-spline axis: voxels must be >= 1, got ", voxels));
  if (!std::isfinite(voxels_per_control) || !(voxels_per_control > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("B-spline axis: voxels per control must be finite and > 0, got ", voxels_per_control));
  }
  const double intervals = std::floor(static_cast<double>(voxels - 1) / voxels_per_control);
  if (intervals + 4 > static_cast<double>(kMaxControls)) {
    return absl::InvalidArgumentError(absl::StrCat("B-spline axis: ", voxels, " voxels at ", voxels_per_control,
                                                   " voxels per control need more than 2^31 controls"));
  }
  BsplineAxis axis;
  axis.voxels = voxels;
  axis.voxels_per_control = voxels_per_control;
  axis.controls = static_cast<int64_t>(intervals) + 4;
  return axis;
}

absl::Status BsplineEvaluate(const BsplineGrid& grid, const NDArray& coeffs, NDArray* field, const Stream& stream,
                             Workspace* workspace) {
  if (field == nullptr) return absl::InvalidArgumentError("BsplineEvaluate: field is null");
  TESSERA_RETURN_IF_ERROR(CheckGrid(grid));
  Dims cd, fd;
  int64_t cc = 0, fc = 0;
  TESSERA_RETURN_IF_ERROR(CheckVolume(coeffs, "coeffs", stream, &cd, &cc));
  TESSERA_RETURN_IF_ERROR(CheckVolume(*field, "field", stream, &fd, &fc));
  TESSERA_RETURN_IF_ERROR(ExpectDims(cd, cc, {grid[0].controls, grid[1].controls, grid[2].controls}, fc, "coeffs"));
  TESSERA_RETURN_IF_ERROR(ExpectDims(fd, fc, {grid[0].voxels, grid[1].voxels, grid[2].voxels}, cc, "field"));
  if (field->num_elements() == 0) return absl::OkStatus();
  // x first: every pass but the last works on arrays smaller than the field.
  return RunPasses(stream, {0, 1, 2}, PassKind::kEvaluate,
                   {grid[0].voxels_per_control, grid[1].voxels_per_control, grid[2].voxels_per_control},
                   coeffs.data<float>(), cd, field->data<float>(), fd, cc, workspace);
}

absl::Status BsplineAdjoint(const BsplineGrid& grid, const NDArray& field, NDArray* coeffs, const Stream& stream,
                            Workspace* workspace) {
  if (coeffs == nullptr) return absl::InvalidArgumentError("BsplineAdjoint: coeffs is null");
  TESSERA_RETURN_IF_ERROR(CheckGrid(grid));
  Dims cd, fd;
  int64_t cc = 0, fc = 0;
  TESSERA_RETURN_IF_ERROR(CheckVolume(field, "field", stream, &fd, &fc));
  TESSERA_RETURN_IF_ERROR(CheckVolume(*coeffs, "coeffs", stream, &cd, &cc));
  TESSERA_RETURN_IF_ERROR(ExpectDims(fd, fc, {grid[0].voxels, grid[1].voxels, grid[2].voxels}, cc, "field"));
  TESSERA_RETURN_IF_ERROR(ExpectDims(cd, cc, {grid[0].controls, grid[1].controls, grid[2].controls}, fc, "coeffs"));
  if (coeffs->num_elements() == 0) return absl::OkStatus();
  // z first: the first pass (over the whole field) shrinks it the most.
  return RunPasses(stream, {2, 1, 0}, PassKind::kAdjoint,
                   {grid[0].voxels_per_control, grid[1].voxels_per_control, grid[2].voxels_per_control},
                   field.data<float>(), fd, coeffs->data<float>(), cd, fc, workspace);
}

absl::Status BsplineRefine(const NDArray& coarse, NDArray* fine, const Stream& stream, Workspace* workspace) {
  if (fine == nullptr) return absl::InvalidArgumentError("BsplineRefine: fine is null");
  Dims cd, fd;
  int64_t cc = 0, fc = 0;
  TESSERA_RETURN_IF_ERROR(CheckVolume(coarse, "coarse", stream, &cd, &cc));
  TESSERA_RETURN_IF_ERROR(CheckVolume(*fine, "fine", stream, &fd, &fc));
  if (cc != fc) {
    return absl::InvalidArgumentError(absl::StrCat("coarse has ", cc, " components but fine has ", fc));
  }
  for (int a = 0; a < 3; ++a) {
    if (cd[a] < 4 || fd[a] < 4) {
      return absl::InvalidArgumentError(
          absl::StrCat("B-spline refine: axis ", a, " has ", cd[a], " -> ", fd[a], " controls; a grid has >= 4"));
    }
  }
  if (fine->num_elements() == 0) return absl::OkStatus();
  return RunPasses(stream, {0, 1, 2}, PassKind::kRefine, {1, 1, 1}, coarse.data<float>(), cd, fine->data<float>(),
                   fd, cc, workspace);
}

}  // namespace registration
}  // namespace tessera

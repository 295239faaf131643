// The device-memory budget of a CT job (issue 36, ct.device_memory_gib):
// what it is on this stream, and what each method needs against it. fbp/fdk
// stream their projections and split the volume when the resident run does
// not fit (FbpPlan::RunOutOfCore); the iterative methods keep everything
// resident, so a job that cannot fit is refused before anything is allocated.
#ifndef TESSERA_SERVICES_RECONSTRUCTION_CT_MEMORY_BUDGET_H_
#define TESSERA_SERVICES_RECONSTRUCTION_CT_MEMORY_BUDGET_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/reconstruction/geometry.h"
#include "services/reconstruction/reconstruction_request.h"

namespace tessera::reconstruction {

// Bytes held back from the free memory when the request gives no budget on
// CUDA: the larger of 512 MiB and 5 % of the device (other processes, the
// CUDA context's own growth, allocator rounding).
int64_t FreeMemoryMargin(int64_t total_bytes);

// ct.device_memory_gib in bytes on either backend (a CPU stream's "device" is
// host memory); for 0: on CUDA the device's free memory less FreeMemoryMargin,
// on the CPU 0 (no budget).
absl::StatusOr<int64_t> CtDeviceBudgetBytes(const CtSpec& ct, const Stream& stream);

// The iterative methods' resident bytes for `slices` stacked 2-D problems (or
// one 3-D): the sinogram and the volume, the solver's scratch per method
// (solvers/sart.cc, cgls.cc; fista-tv: FISTA's 3 volumes, a residual and the
// TV prox's dual fields; asd-pocs: SART's plus the TV descent's 3 volumes)
// and the projector's (a transposed volume and its tables, an allowance).
// voxel_subdivision > 1 (ct.voxel_subdivision): the solver, its scratch and
// the projector work on `solve`, the subdivided geometry, in one fine volume
// reused by every slice, beside the output volumes of g.
int64_t CtIterativeDeviceBytes(CtMethod method, const recon::CtGeometry& g, int64_t slices, int subsets,
                               const recon::CtGeometry* solve = nullptr);

// OK when budget_bytes is 0 or holds CtIterativeDeviceBytes; else
// RESOURCE_EXHAUSTED with the volume, projection and scratch sizes (and the
// finer grid's, with `solve`).
absl::Status CheckCtIterativeBudget(CtMethod method, const recon::CtGeometry& g, int64_t slices, int subsets,
                                    int64_t budget_bytes, const recon::CtGeometry* solve = nullptr);

}  // namespace tessera::reconstruction

#endif  // TESSERA_SERVICES_RECONSTRUCTION_CT_MEMORY_BUDGET_H_

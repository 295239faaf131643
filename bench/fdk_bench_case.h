// The FDK benches' problem (recon_fdk_bench, recon_fdk_budget_bench): an n^3
// volume in a cone beam whose detector sees a 1.25 n mm field at the
// iso-centre, and a synthetic sinogram (a smooth disc with hashed noise:
// timing does not depend on the values).
#ifndef TESSERA_BENCH_FDK_BENCH_CASE_H_
#define TESSERA_BENCH_FDK_BENCH_CASE_H_

#include <cstdint>
#include <vector>

#include "kernels/reconstruction/geometry.h"

namespace tessera::bench {

recon::CtGeometry FdkBenchGeometry(int64_t n, int64_t views, int64_t cols, int64_t rows);

std::vector<float> FdkBenchSinogram(const recon::CtGeometry& g);

}  // namespace tessera::bench

#endif  // TESSERA_BENCH_FDK_BENCH_CASE_H_

// How a reconstruction run may order its floating-point work.
//
// kDefault lets kernels use whatever is fastest, including atomic scatters
// whose summation order depends on scheduling (results may differ in the last
// bits between runs). kDeterministic fixes every reduction order (gathers
// instead of atomic scatters, fixed-tree sums), so two runs of the same
// request on one GPU model give bit-identical output. It travels with each
// call (no process-wide switch).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_EXECUTION_MODE_H_
#define TESSERA_KERNELS_RECONSTRUCTION_EXECUTION_MODE_H_

namespace tessera {
namespace recon {

enum class ExecutionMode { kDefault, kDeterministic };

inline const char* ExecutionModeName(ExecutionMode mode) {
  return mode == ExecutionMode::kDeterministic ? "deterministic" : "default";
}

}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_EXECUTION_MODE_H_

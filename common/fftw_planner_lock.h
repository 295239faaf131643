// FFTW's planner keeps process-wide state and is not thread-safe (executing
// a plan is): every FFTW plan creation and destruction in the process takes
// this one lock (FBP's filters, the NUFFT and Toeplitz backends, Cartesian
// SENSE), so concurrent jobs never plan at the same time. It guards FFTW's own
// state only; no tuning lives in it.
#ifndef TESSERA_COMMON_FFTW_PLANNER_LOCK_H_
#define TESSERA_COMMON_FFTW_PLANNER_LOCK_H_

#include <mutex>

namespace tessera {

std::mutex& FftwPlannerMutex();

}  // namespace tessera

#endif  // TESSERA_COMMON_FFTW_PLANNER_LOCK_H_

#include "common/fftw_planner_lock.h"

namespace tessera {

std::mutex& FftwPlannerMutex() {
  static std::mutex* mu = new std::mutex;  // never destroyed: plans may outlive static destruction order
  return *mu;
}

}  // namespace tessera

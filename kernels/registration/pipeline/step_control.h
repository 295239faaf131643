// The greedy deformable step's size within one scale (issue 17): it starts
// at deformable_lr_voxels and halves whenever the loss has gone `halve_after`
// iterations without a new best, down to a floor. A fixed normalized step
// (the largest component always moves lr voxels, however small the gradient)
// cannot settle: near the optimum it overshoots back and forth, and the loss
// alternates between two values every iteration (measured on the macaque
// case: -0.766 / -0.739 / -0.772 / -0.746 ... at the finest scale, and a
// coarsest scale that ends worse than it started). Halving on a stall is what
// a line search would do without the extra metric evaluations; on a single
// worse iteration it would collapse (MI's loss is noisy), hence the run.
// Host-side only: every loop (standard, lean, sharded; CPU and CUDA) asks it
// for the step, so they stay the same algorithm.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_STEP_CONTROL_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_STEP_CONTROL_H_

#include <cmath>

namespace tessera::registration {

class StepControl {
 public:
  // halve_after <= 0: a fixed step (the rule before issue 17).
  StepControl(double lr, int halve_after, double min_fraction)
      : lr_(lr), min_lr_(lr * min_fraction), halve_after_(halve_after) {}

  // Records the iteration's loss; returns the step to take after it.
  double Update(double loss) {
    if (loss < best_) {
      best_ = loss;
      stalled_ = 0;
    } else if (halve_after_ > 0 && ++stalled_ >= halve_after_) {
      lr_ = std::max(min_lr_, 0.5 * lr_);
      stalled_ = 0;
    }
    return lr_;
  }
  double lr() const { return lr_; }

 private:
  double lr_, min_lr_;
  int halve_after_;
  int stalled_ = 0;
  double best_ = INFINITY;
};

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_STEP_CONTROL_H_

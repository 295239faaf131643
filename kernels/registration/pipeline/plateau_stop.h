// The registrar's stopping rule for one stage at one scale (every stage and
// the sharded one use it, so they stop alike): the scale ends once the best
// loss has not improved by more than tolerance * |best| for `patience`
// iterations in a row.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_PLATEAU_STOP_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_PLATEAU_STOP_H_

#include <cmath>

namespace tessera::registration {

class PlateauStop {
 public:
  PlateauStop(double tolerance, int patience) : tolerance_(tolerance), patience_(patience) {}

  // Records the next iteration's loss (the first call: the scale's first).
  void Update(double loss) {
    if (count_++ == 0) first_ = loss;
    last_ = loss;
    improved_ = loss < best_;
    if (improved_) {
      since_best_ = (best_ - loss > tolerance_ * std::abs(best_)) ? 0 : since_best_ + 1;
      best_ = loss;
    } else {
      ++since_best_;
    }
  }

  // True when the scale should stop after the last Update.
  bool done() const { return since_best_ >= patience_; }
  // Whether the last Update set a new best (even one too small to count as progress).
  bool improved() const { return improved_; }
  double first() const { return first_; }
  double last() const { return last_; }
  double best() const { return best_; }

 private:
  double tolerance_;
  int patience_;
  int count_ = 0;
  int since_best_ = 0;
  bool improved_ = false;
  double first_ = 0, last_ = 0, best_ = INFINITY;
};

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_PLATEAU_STOP_H_

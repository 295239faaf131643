// The registrar's stopping rule for one stage at one scale (every stage and
// the sharded one use it, so they stop alike): the scale ends once the best
// loss has not improved by more than tolerance * |best| for `patience`
// iterations in a row.
//
// Issue 38, the window rule: a noisy loss (MI on a jittered grid) sets a new
// best by more than tolerance every few iterations while its trend has all
// but stopped (1 mm Colin27: the x4 level ran its 200 iterations with a loss
// that moved < 0.3 % over the last 100). With window w > 0 the scale also
// ends once the trend is confidently below the same rate, tolerance * |loss|
// per iteration: d + kWindowZ * se < tolerance * w * |newer mean|, where d is
// the mean loss of the w iterations before the last w less the mean of the
// last w (window centres w apart), and se its standard error from the loss's
// own iteration-to-iteration noise (first differences over the 2 w losses).
// Noisier losses thus need a flatter trend; the rule needs 2 w iterations.
//
// Issue 38, the remaining-gain rule (for the finest level, where the loss
// still creeps at about the rate while the labels gain): with a budget B and
// a fraction g > 0 the scale also ends once the same confident bound on the
// decrease per iteration, (d + kWindowZ * se) / w, continued over the
// budget's remaining iterations, would lower the loss by less than
// g * |newer mean|. It looks at what is left to gain, not at the rate alone:
// a level that still falls at the rate runs on early in its budget and stops
// near its end.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_PLATEAU_STOP_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_PLATEAU_STOP_H_

#include <algorithm>
#include <cmath>
#include <vector>

namespace tessera::registration {

class PlateauStop {
 public:
  // About a one-sided 98 % bound on the windows' decrease.
  static constexpr double kWindowZ = 2.0;

  PlateauStop(double tolerance, int patience, int window = 0)
      : tolerance_(tolerance), patience_(patience), window_(window) {
    if (window_ > 0) history_.assign(2 * static_cast<size_t>(window_), 0.0);
  }

  // The window statistics of w iterations, the rate rule only if `rate_rule`,
  // the remaining-gain rule only if remaining_gain > 0 and budget > 0.
  PlateauStop(double tolerance, int patience, int window, bool rate_rule, int budget, double remaining_gain)
      : tolerance_(tolerance), patience_(patience), rate_rule_(rate_rule), budget_(budget),
        remaining_gain_(remaining_gain) {
    window_ = rate_rule_ || (remaining_gain_ > 0 && budget_ > 0) ? window : 0;
    if (window_ > 0) history_.assign(2 * static_cast<size_t>(window_), 0.0);
  }

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
    if (window_ > 0) UpdateWindow(loss);
  }

  // True when the scale should stop after the last Update.
  bool done() const { return since_best_ >= patience_ || window_flat_; }
  // Whether a window rule (not the patience rule) ended the scale.
  bool window_flat() const { return window_flat_ && since_best_ < patience_; }
  // Whether the remaining-gain rule is what ended it.
  bool little_left() const { return window_flat() && little_left_; }
  // Whether the last Update set a new best (even one too small to count as progress).
  bool improved() const { return improved_; }
  double first() const { return first_; }
  double last() const { return last_; }
  double best() const { return best_; }

 private:
  void UpdateWindow(double loss) {
    const size_t n = history_.size();
    history_[static_cast<size_t>(count_ - 1) % n] = loss;
    if (static_cast<size_t>(count_) < n) return;
    // Oldest first: ring positions count_ .. count_ + n - 1 (mod n).
    double older = 0, newer = 0, squared_steps = 0, previous = 0;
    for (size_t k = 0; k < n; ++k) {
      const double v = history_[(static_cast<size_t>(count_) + k) % n];
      (k < n / 2 ? older : newer) += v;
      if (k > 0) squared_steps += (v - previous) * (v - previous);
      previous = v;
    }
    older /= window_;
    newer /= window_;
    // Independent noise of variance s^2 gives first differences of variance 2 s^2.
    const double noise_variance = squared_steps / (2.0 * static_cast<double>(n - 1));
    const double standard_error = std::sqrt(noise_variance * 2.0 / window_);
    const double bound = (older - newer) + kWindowZ * standard_error;  // confident decrease over w iterations
    const bool rate_flat = rate_rule_ && bound < tolerance_ * window_ * std::abs(newer);
    little_left_ = remaining_gain_ > 0 && budget_ > 0 &&
                   std::max(bound, 0.0) / window_ * (budget_ - count_) < remaining_gain_ * std::abs(newer);
    window_flat_ = rate_flat || little_left_;
  }

  double tolerance_;
  int patience_;
  int window_ = 0;
  bool rate_rule_ = true;
  int budget_ = 0;
  double remaining_gain_ = 0;
  std::vector<double> history_;  // the last 2 w losses, a ring indexed by count_
  bool window_flat_ = false;
  bool little_left_ = false;
  int count_ = 0;
  int since_best_ = 0;
  bool improved_ = false;
  double first_ = 0, last_ = 0, best_ = INFINITY;
};

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_PLATEAU_STOP_H_

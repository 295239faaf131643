// Helpers shared by the benchmarks: the steady clock, elapsed time in ms or s,
// the median of repeated timings, and the relative L2 error of an output.
#ifndef TESSERA_BENCH_BENCH_UTIL_H_
#define TESSERA_BENCH_BENCH_UTIL_H_

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

namespace tessera::bench {

using Clock = std::chrono::steady_clock;

// Seconds from `start` to `end`.
inline double Seconds(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

inline double SecondsSince(Clock::time_point start) { return Seconds(start, Clock::now()); }
inline double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// The steady clock in seconds from an arbitrary origin: only differences of
// two readings mean anything.
inline double NowSeconds() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

// Elapsed time from construction (or the last Restart).
class Stopwatch {
 public:
  Stopwatch() : start_(Clock::now()) {}
  void Restart() { start_ = Clock::now(); }
  double Seconds() const { return SecondsSince(start_); }
  double Ms() const { return MsSince(start_); }

 private:
  Clock::time_point start_;
};

// The median of `v`: the upper of the two middle values for an even count
// (a measured time, never an average of two); 0 when empty.
inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// ||a - b|| / ||b|| (||a - b|| when b is zero), summed in double.
inline double RelL2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace tessera::bench

#endif  // TESSERA_BENCH_BENCH_UTIL_H_

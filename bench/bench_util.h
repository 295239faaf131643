// Helpers shared by the benchmarks: the steady clock, elapsed time in ms or s,
// CPU time and load, the median and percentiles of repeated timings (and the
// timing loop itself), and the relative L2 error of an output.
#ifndef TESSERA_BENCH_BENCH_UTIL_H_
#define TESSERA_BENCH_BENCH_UTIL_H_

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <type_traits>
#include <utility>
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

// CPU seconds (user + system) of the whole process, or of the calling thread.
inline double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}
inline double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// The 1-minute load average (/proc/loadavg); 0 when unreadable.
inline double LoadAverage() {
  double load = 0;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = 0;
    std::fclose(f);
  }
  return load;
}

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

// The q-quantile of `v` (0 <= q <= 1): the value at rank floor(q * (n - 1))
// of the sorted values (a measured value, never interpolated); 0 when empty.
inline double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  const size_t k = static_cast<size_t>(q * (v.size() - 1));
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

namespace internal {
inline bool CallOk(bool ok) { return ok; }
template <typename S>
auto CallOk(const S& status) -> decltype(status.ok()) {
  return status.ok();
}
}  // namespace internal

// The median wall time in ms of `reps` calls of fn() after `warmup` untimed
// ones (steady clock; fn synchronises its own device work). fn returns void,
// or a bool / absl::Status-like value: a failed call ends the timing and
// MedianMs returns -1.
template <typename Fn>
double MedianMs(int reps, Fn&& fn, int warmup = 0) {
  std::vector<double> ms;
  for (int r = -warmup; r < reps; ++r) {
    const Clock::time_point t0 = Clock::now();
    if constexpr (std::is_void_v<decltype(fn())>) {
      fn();
    } else if (!internal::CallOk(fn())) {
      return -1;
    }
    if (r >= 0) ms.push_back(MsSince(t0));
  }
  return Median(std::move(ms));
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

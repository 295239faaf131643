// Helpers shared by the benchmarks: the steady clock, elapsed time in ms or s,
// CPU time and load, the median and percentiles of repeated timings (and the
// timing loop itself), the relative L2 error of an output, and the
// "--name=value" flags of the benches that parse their own.
#ifndef TESSERA_BENCH_BENCH_UTIL_H_
#define TESSERA_BENCH_BENCH_UTIL_H_

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace tessera::bench {

// A bench stops at its first failure: "<what>: <status>" on stderr, exit 1.
inline void ExitUnlessOk(const absl::Status& status, const char* what) {
  if (status.ok()) return;
  std::fprintf(stderr, "%s: %s\n", what, status.ToString().c_str());
  std::exit(1);
}

template <typename T>
T ValueOrExit(absl::StatusOr<T> v, const char* what) {
  ExitUnlessOk(v.status(), what);
  return std::move(*v);
}

// The value of `arg` when it is "<name>=value", else nullptr.
inline const char* FlagValue(const char* arg, const char* name) {
  const size_t len = std::strlen(name);
  return std::strncmp(arg, name, len) == 0 && arg[len] == '=' ? arg + len + 1 : nullptr;
}

// The value of argv[*i] when it is "<name>=value", or of the next argument
// when it is "<name>" alone (then *i moves past it); else nullptr.
inline const char* FlagValueOrNext(int argc, char** argv, int* i, const char* name) {
  if (const char* v = FlagValue(argv[*i], name)) return v;
  if (std::strcmp(argv[*i], name) == 0 && *i + 1 < argc) return argv[++*i];
  return nullptr;
}

// A comma-separated list of integers, each in [lo, hi], at least one.
inline bool ParseIntList(absl::string_view v, int64_t lo, int64_t hi, std::vector<int64_t>* out) {
  out->clear();
  for (absl::string_view s : absl::StrSplit(v, ',', absl::SkipEmpty())) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(s, &n) || n < lo || n > hi) return false;
    out->push_back(n);
  }
  return !out->empty();
}

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

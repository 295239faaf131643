#include "services/common/random_id.h"

#include <cstdint>
#include <mutex>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera {

std::string RandomId(const std::string& prefix) {
  static std::mutex mu;
  static std::mt19937_64 rng = [] {
    std::random_device device;
    std::seed_seq seed{device(), device(), device(), device(), device(), device(), device(), device()};
    return std::mt19937_64(seed);
  }();
  uint64_t a, b;
  {
    std::lock_guard<std::mutex> lock(mu);
    a = rng();
    b = rng();
  }
  return absl::StrCat(prefix, absl::StrFormat("%016x%016x", a, b));
}

}  // namespace tessera

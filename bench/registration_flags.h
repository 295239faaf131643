// A registration benchmark's named-value flags (--metric=mi, --step=adam):
// the value, or a message naming the flag and exit(2).
#ifndef TESSERA_BENCH_REGISTRATION_FLAGS_H_
#define TESSERA_BENCH_REGISTRATION_FLAGS_H_

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/registration/pipeline/option_enums.h"

namespace tessera::registration {

template <typename E>
E OptionFlag(const std::string& value, const char* flag) {
  absl::StatusOr<E> v = ParseOption<E>(value, flag);
  if (!v.ok()) {
    std::fprintf(stderr, "%s\n", std::string(v.status().message()).c_str());
    std::exit(2);
  }
  return *v;
}

template <typename E>
std::vector<E> OptionListFlag(const std::vector<std::string>& values, const char* flag) {
  std::vector<E> out;
  for (const std::string& value : values) out.push_back(OptionFlag<E>(value, flag));
  return out;
}

}  // namespace tessera::registration

#endif  // TESSERA_BENCH_REGISTRATION_FLAGS_H_

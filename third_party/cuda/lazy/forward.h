// Internal to the *_lazy.cc files: the body of a forwarding definition.
#ifndef TESSERA_THIRD_PARTY_CUDA_LAZY_FORWARD_H_
#define TESSERA_THIRD_PARTY_CUDA_LAZY_FORWARD_H_

#include "third_party/cuda/lazy/lazy_library.h"

// Calls the real `fn` of `lib()` with the arguments, or returns `missing`
// when the library (or the symbol) is not there.
#define TESSERA_LAZY_FORWARD(lib, fn, missing, ...)                                     \
  static const auto real = ::tessera::cuda_lazy::Resolve<decltype(&fn)>(lib(), #fn); \
  return real == nullptr ? (missing) : real(__VA_ARGS__)

#endif  // TESSERA_THIRD_PARTY_CUDA_LAZY_FORWARD_H_

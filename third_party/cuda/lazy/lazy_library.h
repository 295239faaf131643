// CUDA math and communication libraries (cuFFT, cuSPARSE, NCCL) opened with
// dlopen on first call instead of linked: every `tessera` command otherwise
// loads and relocates them (with their libnvJitLink) at start, about a third
// of the process start-up of a CPU-only command on the dev VM (perf: loader,
// page faults and the libraries' own initialisers). The *_lazy.cc files in
// this folder define the libraries' C functions that the project calls, each
// forwarding to the real one; @local_cuda//:cufft, :cusparse and :nccl link
// these instead of -lcufft etc. (third_party/cuda/cuda_configure.bzl). A
// function not defined here fails the link, so nothing silently bypasses it.
#ifndef TESSERA_THIRD_PARTY_CUDA_LAZY_LAZY_LIBRARY_H_
#define TESSERA_THIRD_PARTY_CUDA_LAZY_LAZY_LIBRARY_H_

#include <initializer_list>
#include <string>

namespace tessera::cuda_lazy {

// One shared library, opened (RTLD_NOW | RTLD_LOCAL) by the first Symbol()
// call from the first of `names` that loads; the handle and the reason for a
// failure are written once (a function-local static) and only read after.
class LazyLibrary {
 public:
  explicit LazyLibrary(std::initializer_list<const char*> names);
  // The symbol's address, or nullptr (the library did not load or lacks it).
  void* Symbol(const char* name) const;
  // Why the library could not be opened; empty when it was.
  const std::string& error() const { return error_; }

 private:
  void* handle_ = nullptr;
  std::string error_;
};

const LazyLibrary& Cufft();
const LazyLibrary& Cusparse();
const LazyLibrary& Nccl();

// The function `name` of `lib` as type Fn, looked up once per call site (the
// caller keeps it in a function-local static).
template <typename Fn>
Fn Resolve(const LazyLibrary& lib, const char* name) {
  return reinterpret_cast<Fn>(lib.Symbol(name));
}

}  // namespace tessera::cuda_lazy

#endif  // TESSERA_THIRD_PARTY_CUDA_LAZY_LAZY_LIBRARY_H_

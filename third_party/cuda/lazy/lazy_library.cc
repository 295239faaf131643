#include "third_party/cuda/lazy/lazy_library.h"

#include <dlfcn.h>

namespace tessera::cuda_lazy {

LazyLibrary::LazyLibrary(std::initializer_list<const char*> names) {
  std::string tried;
  for (const char* name : names) {
    handle_ = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle_ != nullptr) return;
    const char* why = dlerror();
    tried += std::string(tried.empty() ? "" : "; ") + (why == nullptr ? name : why);
  }
  error_ = "cannot load " + tried;
}

void* LazyLibrary::Symbol(const char* name) const {
  return handle_ == nullptr ? nullptr : dlsym(handle_, name);
}

// The sonames the toolkit (CUDA 13.0) installs, then the unversioned names.
const LazyLibrary& Cufft() {
  static const LazyLibrary lib({"libcufft.so.12", "libcufft.so"});
  return lib;
}
const LazyLibrary& Cusparse() {
  static const LazyLibrary lib({"libcusparse.so.12", "libcusparse.so"});
  return lib;
}
const LazyLibrary& Nccl() {
  static const LazyLibrary lib({"libnccl.so.2", "libnccl.so"});
  return lib;
}

}  // namespace tessera::cuda_lazy

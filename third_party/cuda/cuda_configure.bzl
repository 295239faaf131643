"""Detects a local CUDA toolkit and exposes it as @local_cuda.

If nvcc is found (CUDA_PATH, else /usr/local/cuda) and TESSERA_NO_CUDA is not
set to 1, @local_cuda//:defs.bzl has CUDA_ENABLED = True and the library
targets link the toolkit. Otherwise every target is empty and the build is
CPU-only: nothing else in the tree needs to change.
"""

_LIBS = ["cublas", "cufft", "cusparse", "cusolver", "nccl"]

# Linked as stand-ins that dlopen the library on first call, so processes
# that never use them (every CPU-only command) do not load them at start.
_LAZY_LIBS = ["cufft", "cusparse", "nccl"]

def _local_cuda_impl(rctx):
    cuda_path = rctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    disabled = rctx.os.environ.get("TESSERA_NO_CUDA", "0") == "1"
    nvcc = rctx.path(cuda_path + "/bin/nvcc")
    enabled = (not disabled) and nvcc.exists
    lines = ['package(default_visibility = ["//visibility:public"])', ""]
    # Every target that may use CUDA sees TESSERA_WITH_CUDA as 0 or 1.
    lines.append('cc_library(name = "cuda_config", defines = ["TESSERA_WITH_CUDA=%d"])' % (1 if enabled else 0))
    if enabled:
        rctx.symlink(cuda_path + "/include", "include")
        lib_dir = cuda_path + "/lib64"
        rpath = "-Wl,-rpath," + lib_dir
        lines.append('cc_library(name = "cuda_headers", hdrs = glob(["include/**"]), includes = ["include"])')
        # cudart is linked statically so binaries carried to the GPU machine need
        # no matching libcudart there; the math libraries stay shared (they are large).
        lines.append('cc_library(name = "cudart", deps = [":cuda_headers"], linkopts = %s)' %
                     repr(["-L" + lib_dir, "-l:libcudart_static.a", "-ldl", "-lrt", "-lpthread", rpath]))
        for lib in _LIBS:
            if lib in _LAZY_LIBS:  # opened on first use: third_party/cuda/lazy/lazy_library.h
                lines.append('cc_library(name = "%s", deps = [":cudart", "@//third_party/cuda/lazy:%s"])' %
                             (lib, lib))
            else:
                lines.append('cc_library(name = "%s", deps = [":cudart"], linkopts = %s)' %
                             (lib, repr(["-L" + lib_dir, "-l" + lib, rpath])))
    else:
        for name in ["cuda_headers", "cudart"] + _LIBS:
            lines.append('cc_library(name = "%s")' % name)
    rctx.file("BUILD", "\n".join(lines) + "\n")
    rctx.file("defs.bzl", "CUDA_ENABLED = %s\nNVCC = %r\nCUDA_PATH = %r\n" %
                          (enabled, str(nvcc) if enabled else "", cuda_path if enabled else ""))
    rctx.file("WORKSPACE", 'workspace(name = "local_cuda")\n')

local_cuda = repository_rule(
    implementation = _local_cuda_impl,
    environ = ["CUDA_PATH", "TESSERA_NO_CUDA"],
    local = True,
)

"""cuda_library: C++ plus CUDA sources, compiled with nvcc when a toolkit exists.

With CUDA (see //third_party/cuda) each .cu file is compiled by nvcc for sm_90
with compute_90 PTX embedded (so newer GPUs can JIT it) and linked like any
object file. Without CUDA the .cu files are left out and TESSERA_WITH_CUDA is 0;
code keeps its CPU path behind `#if TESSERA_WITH_CUDA`.
"""

load("@local_cuda//:defs.bzl", "CUDA_ENABLED", "NVCC")

NVCC_FLAGS = [
    "-std=c++17",
    "-O3",
    "-lineinfo",
    "--expt-relaxed-constexpr",
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
    "-Xcompiler=-fPIC,-Wall",
    "-DTESSERA_WITH_CUDA=1",
]

def cuda_library(name, srcs = [], hdrs = [], deps = [], cu_hdrs = [], nvcc_flags = [], **kwargs):
    """A cc_library whose .cu sources are compiled by nvcc.

    Args:
      name: target name.
      srcs: .cc and .cu sources.
      hdrs: public headers.
      deps: cc_library dependencies.
      cu_hdrs: other headers (labels) the .cu files include; nvcc does not see
        Bazel's include graph, so they are listed explicitly.
      nvcc_flags: extra nvcc flags (e.g. -fmad=false where results must equal
        a CPU reference's float arithmetic).
      **kwargs: passed to cc_library.
    """
    cc_srcs = [s for s in srcs if not s.endswith(".cu")]
    cu_srcs = [s for s in srcs if s.endswith(".cu")]
    objs = []
    if CUDA_ENABLED:
        for src in cu_srcs:
            obj = "_nvcc/%s/%s.o" % (name, src[:-len(".cu")])
            native.genrule(
                name = "%s_nvcc_%s" % (name, src.replace("/", "_").replace(".", "_")),
                srcs = [src] + hdrs + cu_hdrs,
                outs = [obj],
                cmd = "%s %s -I. -I$(GENDIR) -c $(location %s) -o $@" % (NVCC, " ".join(NVCC_FLAGS + nvcc_flags), src),
                message = "nvcc " + src,
            )
            objs.append(obj)
    native.cc_library(
        name = name,
        srcs = cc_srcs + objs,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cuda_config"] + (["@local_cuda//:cudart"] if CUDA_ENABLED else []),
        **kwargs
    )

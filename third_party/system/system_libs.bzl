"""Wraps Debian's system libraries as Bazel cc_library targets.

Headers live in /usr/include (already on the compiler's search path), so each
target only carries link flags, read from pkg-config when the repository is
fetched. A missing library fails the fetch with the apt package to install.
"""

# target name -> (pkg-config modules or raw flags, Debian package that provides it)
_LIBS = {
    "grpc": (["grpc++"], "libgrpc++-dev"),
    "grpc_reflection": (["-lgrpc++_reflection", "-lgrpcpp_channelz"], "libgrpc++-dev"),
    "protobuf": (["protobuf"], "libprotobuf-dev"),
    "absl": ([
        "absl_status",
        "absl_statusor",
        "absl_strings",
        "absl_str_format",
        "absl_synchronization",
        "absl_time",
        "absl_flags",
        "absl_flags_parse",
        "absl_flags_usage",
        "absl_random_random",
        "absl_hash",
        "absl_raw_hash_set",
    ], "libabsl-dev"),
    "prometheus": (["prometheus-cpp-pull", "prometheus-cpp-core"], "prometheus-cpp-dev"),
    "gtest": (["gmock", "gtest"], "libgtest-dev libgmock-dev"),
    "gtest_main": (["gmock", "gtest_main", "gtest"], "libgtest-dev libgmock-dev"),
    "benchmark": (["benchmark"], "libbenchmark-dev"),
    "nifti": (["-lnifti2", "-lznz", "-lz", "-lm"], "libnifti2-dev"),
    "sqlite": (["sqlite3"], "libsqlite3-dev"),
    "libpq": (["libpq"], "libpq-dev"),
    "png": (["libpng"], "libpng-dev"),
    "tiff": (["libtiff-4"], "libtiff-dev"),
    "jpeg": (["libjpeg"], "libjpeg-dev"),
    "zlib": (["zlib"], "zlib1g-dev"),
    "crypto": (["libcrypto"], "libssl-dev"),
    "fftw": (["fftw3f", "fftw3"], "libfftw3-dev"),
    "deflate": (["libdeflate"], "libdeflate-dev"),
    # LAPACK (reference BLAS): Hermitian eigensolvers (zheevd) for ESPIRiT's calibration matrix.
    "lapack": (["lapack"], "liblapack-dev"),
    # Expat: the XML encoding of ANSI/NIST-ITL transactions (fingerprint formats).
    "expat": (["expat"], "libexpat1-dev"),
    # DCMTK: DICOM parsing and the JPEG / JPEG-LS / RLE decoders (common/dicom/).
    "dcmtk": (["-ldcmjpls", "-ldcmtkcharls", "-ldcmjpeg", "-lijg8", "-lijg12", "-lijg16", "-ldcmimage",
               "-ldcmimgle", "-ldcmdata", "-loflog", "-lofstd", "-lz"], "libdcmtk-dev"),
    # HDF5's headers live in /usr/include/hdf5/serial (see _INCLUDE_DIRS).
    "hdf5": (["hdf5"], "libhdf5-dev"),
    "ismrmrd": (["-lismrmrd"], "libismrmrd-dev"),
    # cpp-httplib: the HTTP/JSON gateway (services/gateway/). Debian compiles it as a library with
    # OpenSSL, zlib and brotli support; its -D flags (see _DEFINES_FROM_CFLAGS) change class layouts,
    # so every user must see the same ones.
    "httplib": (["cpp-httplib"], "libcpp-httplib-dev"),
}

# Targets whose pkg-config --cflags carry -D macros their headers depend on: exported as `defines`.
_DEFINES_FROM_CFLAGS = ["httplib"]

# Headers outside the compiler's default search path: target -> directory.
# The directory is linked into this repository and exported with `includes`.
_INCLUDE_DIRS = {
    "hdf5": "/usr/include/hdf5/serial",
    "ismrmrd": "/usr/include/hdf5/serial",  # ismrmrd/dataset.h includes <hdf5.h>
}

def _link_flags(rctx, name, modules, package):
    raw = [m for m in modules if m.startswith("-")]
    pkgs = [m for m in modules if not m.startswith("-")]
    flags = list(raw)
    if pkgs:
        res = rctx.execute(["pkg-config", "--libs"] + pkgs)
        if res.return_code != 0:
            fail("system library '%s' not found (pkg-config: %s). Install it with: apt-get install %s" %
                 (name, res.stderr.strip(), package))
        flags += res.stdout.strip().split(" ")
    for f in raw:
        if f.startswith("-l"):
            lib = f[2:]
            found = False
            for d in ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib", "/usr/local/lib"]:
                if rctx.path(d + "/lib" + lib + ".so").exists:
                    found = True
            if not found:
                fail("system library lib%s.so not found. Install it with: apt-get install %s" % (lib, package))
    return [f for f in flags if f]

def _defines(rctx, modules):
    res = rctx.execute(["pkg-config", "--cflags"] + [m for m in modules if not m.startswith("-")])
    if res.return_code != 0:
        fail("pkg-config --cflags %s: %s" % (modules, res.stderr.strip()))
    return [f[2:] for f in res.stdout.strip().split(" ") if f.startswith("-D")]

# Static archives for the `tessera` binary (issue 40: process start). Debian's
# gRPC, protobuf and Abseil are ~65 shared objects whose loading and symbol
# binding was most of a short command's start-up. Order matters for the
# archives only inside the group; their own dynamic deps follow.
_RPC_STATIC_ARCHIVES = ["grpc++_reflection", "grpcpp_channelz", "grpc++", "grpc", "address_sorting", "re2", "upb",
                        "cares", "gpr", "protobuf"]
_RPC_STATIC_DYNAMIC_DEPS = ["-lssl", "-lcrypto", "-lz", "-latomic", "-lrt", "-ldl", "-pthread"]

def _rpc_static_flags(rctx):
    """Link flags that pull gRPC, protobuf and Abseil from their .a archives.

    Placed before the other targets' flags with --as-needed, so the shared
    objects the other @system targets name are then unneeded and dropped.
    Empty (the shared libraries are used) where an archive is missing.
    """
    lib_dir = None
    for d in ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib", "/usr/local/lib"]:
        if rctx.path(d + "/libgrpc++.a").exists:
            lib_dir = d
            break
    if lib_dir == None:
        return []
    for a in _RPC_STATIC_ARCHIVES:
        if not rctx.path("%s/lib%s.a" % (lib_dir, a)).exists:
            return []
    res = rctx.execute(["sh", "-c", "ls %s/libabsl_*.a" % lib_dir])
    if res.return_code != 0:
        return []
    absl = [p.split("/")[-1][3:-2] for p in res.stdout.strip().split("\n") if p]
    flags = ["-Wl,--as-needed", "-Wl,-Bstatic", "-Wl,--start-group"]
    flags += ["-l" + a for a in _RPC_STATIC_ARCHIVES + sorted(absl)]
    flags += ["-Wl,--end-group", "-Wl,-Bdynamic"] + _RPC_STATIC_DYNAMIC_DEPS
    return flags

def _system_libs_impl(rctx):
    lines = ['package(default_visibility = ["//visibility:public"])', ""]
    lines.append("# gRPC, protobuf and Abseil linked statically: for the tessera binary only")
    lines.append("# (first in its deps; see _rpc_static_flags in system_libs.bzl).")
    lines.append("cc_library(")
    lines.append('    name = "rpc_static",')
    lines.append("    linkopts = %s," % repr(_rpc_static_flags(rctx)))
    lines.append(")")
    lines.append("")
    for name, (modules, package) in _LIBS.items():
        flags = _link_flags(rctx, name, modules, package)
        lines.append("cc_library(")
        lines.append('    name = "%s",' % name)
        lines.append("    linkopts = %s," % repr(flags))
        if name in _DEFINES_FROM_CFLAGS:
            lines.append("    defines = %s," % repr(_defines(rctx, modules)))
        if name in _INCLUDE_DIRS:
            local = "include_" + name
            rctx.symlink(_INCLUDE_DIRS[name], local)
            lines.append('    hdrs = glob(["%s/**/*.h"]),' % local)
            lines.append('    includes = ["%s"],' % local)
        lines.append(")")
        lines.append("")
    rctx.file("BUILD", "\n".join(lines))
    rctx.file("WORKSPACE", 'workspace(name = "%s")\n' % rctx.name)

system_libs = repository_rule(
    implementation = _system_libs_impl,
    local = True,
)

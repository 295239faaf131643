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

def _system_libs_impl(rctx):
    lines = ['package(default_visibility = ["//visibility:public"])', ""]
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

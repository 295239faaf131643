"""C++ protobuf + gRPC code generation with Debian's protoc and grpc_cpp_plugin.

All .proto files live under one package (//protos) whose directory is the
proto root, so `import "tessera/v1/common.proto"` and
`#include "tessera/v1/common.pb.h"` both work.
"""

def grpc_cc_proto_library(name, srcs, deps = [], grpc = True, **kwargs):
    """Generates and compiles C++ messages (and gRPC stubs) for `srcs`.

    Args:
      name: the cc_library to create.
      srcs: .proto files, relative to this package (the proto root).
      deps: other grpc_cc_proto_library targets whose .proto files are imported.
      grpc: also generate service stubs.
    """
    pkg = native.package_name()
    outs = []
    for src in srcs:
        base = src[:-len(".proto")]
        outs += [base + ".pb.h", base + ".pb.cc"]
        if grpc:
            outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
    grpc_flags = ""
    if grpc:
        grpc_flags = "--grpc_out=$(GENDIR)/%s --plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin)" % pkg
    native.genrule(
        name = name + "_codegen",
        srcs = srcs + [d + "_protos" for d in deps],
        outs = outs,
        cmd = "protoc --proto_path=%s --cpp_out=$(GENDIR)/%s %s %s" % (
            pkg or ".",
            pkg,
            grpc_flags,
            " ".join(["%s/%s" % (pkg, s) for s in srcs]),
        ),
    )
    native.filegroup(name = name + "_protos", srcs = srcs + [d + "_protos" for d in deps])
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        includes = ["."],
        deps = deps + ["@system//:protobuf"] + (["@system//:grpc"] if grpc else []),
        **kwargs
    )

"""The filegroup //tools/checks:layering_test reads in each kernel and
algorithm-library package (its sources and BUILD)."""

def layering_sources():
    native.filegroup(
        name = "layering_sources",
        srcs = native.glob(["*.h", "*.cc", "*.cu", "*.cuh"]) + ["BUILD"],
        visibility = ["//tools/checks:__pkg__"],
    )

"""test_helper_library: the shared helpers of tests, in `testing/` packages."""

def test_helper_library(name, deps = [], visibility = ["//visibility:public"]):
    """A testonly cc_library of <name>.h, and of <name>.cc when there is one.

    Args:
      name: the helper's name and its files' stem.
      deps: what its files include.
      visibility: who may use it (any test by default).
    """
    native.cc_library(
        name = name,
        testonly = True,
        srcs = native.glob([name + ".cc"]),
        hdrs = [name + ".h"],
        deps = deps,
        visibility = visibility,
    )

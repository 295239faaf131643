#!/usr/bin/env python3
"""A BART k-space stack from one slice (issue 40 bench): slice s is the input
k-space scaled by 1 + 0.05 s with its phase rotated by 0.1 s rad (images that
differ; one trajectory, one set of coil maps). Writes <out>/kspace (SLICE_DIM
13 = slices) and, for the one-job-per-slice baseline, <out>/slice<s>/kspace.

  bench/make_mri_stack.py --kspace mri128/kspace --slices 32 --out stack
"""
import argparse
import array
import cmath
import os


def read_cfl(base):
    with open(base + ".hdr") as f:
        lines = [l.strip() for l in f]
    dims = [int(x) for x in lines[lines.index("# Dimensions") + 1].split()]
    data = array.array("f")
    with open(base + ".cfl", "rb") as f:
        data.frombytes(f.read())
    return dims + [1] * (16 - len(dims)), data


def write_cfl(base, dims, data):
    with open(base + ".hdr", "w") as f:
        f.write("# Dimensions\n" + " ".join(str(d) for d in dims) + "\n")
    with open(base + ".cfl", "wb") as f:
        data.tofile(f)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kspace", required=True)
    p.add_argument("--slices", type=int, default=32)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    dims, k = read_cfl(a.kspace)
    if dims[13] != 1:
        raise SystemExit(f"{a.kspace}: already has {dims[13]} slices")
    stack = array.array("f")
    for s in range(a.slices):
        z = (1 + 0.05 * s) * cmath.exp(0.1j * s)
        one = array.array("f", bytes(len(k) * 4))
        for i in range(0, len(k), 2):
            v = complex(k[i], k[i + 1]) * z
            one[i], one[i + 1] = v.real, v.imag
        os.makedirs(f"{a.out}/slice{s}", exist_ok=True)
        write_cfl(f"{a.out}/slice{s}/kspace", dims, one)
        stack.extend(one)
    dims[13] = a.slices
    write_cfl(f"{a.out}/kspace", dims, stack)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A NIfTI sinogram stack from one 2-D sinogram (issue 40 bench): slice s is
the input scaled by 1 + 0.05 s. Writes <out>/stack.nii.gz (cols x projections x
slices) and, for the one-job-per-slice baseline, <out>/slice<s>.nii.gz.
float32 NIfTI-1 input (what `tessera phantom ct` writes).

  bench/make_sinogram_stack.py --sinogram ct/s.nii.gz --slices 32 --out ctstack
"""
import argparse
import array
import gzip
import os
import struct


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sinogram", required=True)
    p.add_argument("--slices", type=int, default=32)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    b = gzip.open(a.sinogram).read()
    dims = list(struct.unpack_from("<8h", b, 40))
    datatype = struct.unpack_from("<h", b, 70)[0]
    offset = int(struct.unpack_from("<f", b, 108)[0])
    if datatype != 16:
        raise SystemExit(f"{a.sinogram}: datatype {datatype}, expected float32 (16)")
    n = 1
    for d in dims[1:dims[0] + 1]:
        n *= d
    data = array.array("f")
    data.frombytes(b[offset:offset + 4 * n])
    header = bytearray(b[:offset])
    os.makedirs(a.out, exist_ok=True)
    stack = array.array("f")
    for s in range(a.slices):
        one = array.array("f", (v * (1 + 0.05 * s) for v in data))
        with gzip.open(f"{a.out}/slice{s}.nii.gz", "wb", compresslevel=1) as f:
            f.write(bytes(header) + one.tobytes())
        stack.extend(one)
    # (cols, projections[, 1...]) -> (cols, projections, slices)
    shape = [d for d in dims[1:dims[0] + 1] if d != 1]
    shape.append(a.slices)
    new_dims = [len(shape)] + shape + [1] * (7 - len(shape))
    struct.pack_into("<8h", header, 40, *new_dims)
    with gzip.open(f"{a.out}/stack.nii.gz", "wb", compresslevel=1) as f:
        f.write(bytes(header) + stack.tobytes())


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes a USTB .uff file (uff.channel_data, UFF v1.2.0) from Tessera's
PICMUS-layout channel data (formats/ultrasound_h5.h), the way USTB's MATLAB
uff.write_object lays objects out (github.com/unioslo/USTB, +uff/
write_object.m): a group per UFF object with attributes class/name/size/array,
numeric properties as single-precision datasets shaped like MATLAB's arrays
(column-major, so HDF5 dims are MATLAB's reversed: a scalar is [1][1], the
N x 7 probe geometry [7][N], samples x channels x waves x frames data
[frames][waves][channels][samples], trailing 1s dropped), complex data as a
group holding real and imag, arrays of objects as name_0001, name_0002, ...

Used by ultrasound_uff_test: the same simulated data in both layouts must give
the same image, and the --break options make malformed files.
"""
import argparse
import math

import h5py
import numpy as np


def fixed_string(s):
    return np.bytes_(s)  # a fixed-length string attribute, as MATLAB's h5writeatt writes


class Writer:
    def __init__(self, f, dtype, vlen_strings):
        self.f = f
        self.dtype = dtype
        self.vlen = vlen_strings

    def attr_string(self, obj, key, value):
        if self.vlen:
            obj.attrs[key] = value  # h5py: a variable-length string
        else:
            obj.attrs.create(key, fixed_string(value))

    def object_attrs(self, obj, cls, name, size=(1, 1), array=0):
        self.attr_string(obj, "class", cls)
        self.attr_string(obj, "name", name)
        obj.attrs["size"] = np.array(size, dtype=np.float64)
        obj.attrs["array"] = np.float64(array)

    def numeric(self, parent, name, values, matlab_class="double"):
        """values: a numpy array in HDF5 order (MATLAB's dims reversed)."""
        values = np.asarray(values)
        if values.ndim == 0:
            values = values.reshape(1, 1)
        if np.iscomplexobj(values):
            g = parent.create_group(name)
            for part, v, imaginary in (("real", values.real, 0), ("imag", values.imag, 1)):
                d = g.create_dataset(part, data=v.astype(self.dtype))
                self.attr_string(d, "class", matlab_class)
                self.attr_string(d, "name", name)
                d.attrs["imaginary"] = np.float64(imaginary)
            self.attr_string(g, "class", matlab_class)
            self.attr_string(g, "name", name)
            g.attrs["complex"] = np.float64(1)
            return g
        d = parent.create_dataset(name, data=values.astype(self.dtype))
        self.attr_string(d, "class", matlab_class)
        self.attr_string(d, "name", name)
        d.attrs["imaginary"] = np.float64(0)
        d.attrs["complex"] = np.float64(0)
        return d

    def point(self, parent, name, distance, azimuth, elevation):
        g = parent.create_group(name)
        self.numeric(g, "distance", distance)
        self.numeric(g, "azimuth", azimuth)
        self.numeric(g, "elevation", elevation)
        self.object_attrs(g, "uff.point", name)
        return g


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("input", help="Tessera/PICMUS HDF5 (/US/US_DATASET0000)")
    p.add_argument("output", help=".uff to write")
    p.add_argument("--float64", action="store_true", help="store doubles instead of MATLAB's single")
    p.add_argument("--data-layout", choices=["auto", "compound", "real"], default="auto",
                   help="auto: MATLAB's (real dataset for RF, real/imag group for IQ); compound: one dataset of "
                        "h5py's complex compound type; real: the real part only")
    p.add_argument("--frames", type=int, default=1, help="repeat the frame (frame k scaled by k + 1)")
    p.add_argument("--wavefront", action="store_true",
                   help="write each wave's wavefront enumeration (MATLAB's writer leaves it out)")
    p.add_argument("--vlen-strings", action="store_true", help="variable-length string attributes (h5py's)")
    p.add_argument("--drop", action="append", default=[], help="delete this path (malformed files)")
    p.add_argument("--set-class", action="append", default=[], help="PATH=CLASS: change a class attribute")
    p.add_argument("--drop-last-element", action="store_true", help="probe geometry one element short")
    p.add_argument("--diverging", action="store_true", help="wave 1 from a virtual source 10 mm behind the array")
    a = p.parse_args()

    src = h5py.File(a.input, "r")["US/US_DATASET0000"]
    one = lambda name: float(np.asarray(src[name]).reshape(-1)[0])
    fs, t0, c, fmod = one("sampling_frequency"), one("initial_time"), one("sound_speed"), one("modulation_frequency")
    geometry = np.asarray(src["probe_geometry"], dtype=np.float64)  # [3][channels]
    x = geometry[0]
    n = x.size
    width = one("element_width") if "element_width" in src else 0.0
    fc = one("center_frequency") if "center_frequency" in src else None
    real = np.asarray(src["data/real"])  # [waves][channels][samples]
    imag = np.asarray(src["data/imag"]) if "data/imag" in src else np.zeros_like(real)
    iq = fmod > 0 or np.any(imag != 0)
    data = real + 1j * imag if iq else real
    waves = real.shape[0]
    delays = np.asarray(src["transmit_delays"], dtype=np.float64) if "transmit_delays" in src else np.zeros(waves)
    if "transmit_elements" in src:
        elements = np.asarray(src["transmit_elements"]).astype(int)
        # uff.point of the firing element (z = 0): distance |x|, azimuth atan2(x, 0).
        sources = [(abs(x[e]), math.atan2(x[e], 0.0), 0.0) for e in elements]
        # USTB's STA convention: delay = distance / c makes time zero the firing;
        # our d_t adds to it.
        wave_delays = [s[0] / c + d for s, d in zip(sources, delays)]
        wavefront = 1
    else:
        angles = np.asarray(src["angles"], dtype=np.float64).reshape(-1)
        sources = [(math.inf, float(t), 0.0) for t in angles]
        wave_delays = list(delays)
        wavefront = 0
    if a.diverging:
        sources[0] = (10e-3, math.pi, 0.0)  # z = -10 mm
        wavefront = 1

    dtype = np.float64 if a.float64 else np.float32
    with h5py.File(a.output, "w") as f:
        w = Writer(f, dtype, a.vlen_strings)
        f.attrs.create("version", fixed_string("v1.2.0"))
        cd = f.create_group("channel_data")
        w.numeric(cd, "sampling_frequency", fs)
        w.numeric(cd, "initial_time", t0)
        w.numeric(cd, "sound_speed", c)
        w.numeric(cd, "modulation_frequency", fmod)
        # sequence: an array of uff.wave (one wave: the uff.wave itself)
        if waves == 1:
            seq_groups = [cd.create_group("sequence")]
            names = ["sequence"]
        else:
            seq = cd.create_group("sequence")
            names = ["sequence_%04d" % (i + 1) for i in range(waves)]
            seq_groups = [seq.create_group(nm) for nm in names]
        for i, (g, nm) in enumerate(zip(seq_groups, names)):
            if a.wavefront:
                d = g.create_dataset("wavefront", data=np.full((1, 1), wavefront if i or not a.diverging else 1,
                                                               dtype=np.int32))
                w.attr_string(d, "class", "uff.wavefront")
                w.attr_string(d, "name", "wavefront")
            w.point(g, "source", *sources[i])
            w.numeric(g, "delay", wave_delays[i])
            w.numeric(g, "sound_speed", c)
            w.object_attrs(g, "uff.wave", nm)
        if waves > 1:
            w.object_attrs(cd["sequence"], "uff.wave", "sequence", size=(1, waves), array=1)
        # probe: uff.linear_array with its geometry [7][N] (MATLAB's N x 7)
        probe = cd.create_group("probe")
        pitch = float((x[-1] - x[0]) / (n - 1)) if n > 1 else 0.0
        w.numeric(probe, "N", n)
        w.numeric(probe, "pitch", pitch)
        w.numeric(probe, "element_width", width)
        w.numeric(probe, "element_height", 10 * width)
        w.point(probe, "origin", 0.0, 0.0, 0.0)
        keep = n - 1 if a.drop_last_element else n
        geom = np.zeros((7, keep))
        geom[0] = x[:keep]
        geom[5] = width
        geom[6] = 10 * width
        w.numeric(probe, "geometry", geom)
        w.object_attrs(probe, "uff.linear_array", "probe")
        if fc is not None:
            pulse = cd.create_group("pulse")
            w.numeric(pulse, "center_frequency", fc)
            w.numeric(pulse, "fractional_bandwidth", 0.6)
            w.object_attrs(pulse, "uff.pulse", "pulse")
        # data: MATLAB samples x channels x waves [x frames] -> [frames][waves][channels][samples]
        frames = np.stack([data * (k + 1) for k in range(a.frames)]) if a.frames > 1 else data
        if waves == 1 and a.frames == 1:
            frames = frames[0]  # MATLAB drops the trailing 1
        if a.data_layout == "compound":
            ctype = np.complex128 if a.float64 else np.complex64
            d = cd.create_dataset("data", data=frames.astype(ctype))
            w.attr_string(d, "class", "single")
            w.attr_string(d, "name", "data")
        elif a.data_layout == "real":
            w.numeric(cd, "data", np.real(frames), "single")
        else:
            w.numeric(cd, "data", frames, "single")
        w.object_attrs(cd, "uff.channel_data", "channel_data")
        for path in a.drop:
            del f[path]
        for spec in a.set_class:
            path, cls = spec.split("=", 1)
            w.attr_string(f[path], "class", cls)


if __name__ == "__main__":
    main()

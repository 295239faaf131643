#!/usr/bin/env bash
# Issue 40, multi-slice: a 32-slice 2-D radial MRI stack (128^2, 4 coils, 67
# spokes: `tessera phantom mri`'s slice, scaled and phase-rotated per slice by
# bench/make_mri_stack.py; one trajectory, one set of maps) reconstructed in
# ONE job (k-space with SLICE_DIM 13 = 32) against 32 jobs of one slice
# (whole commands, `tessera recon mri ... --device cpu`, one after another),
# for cgsense (30 iterations, Toeplitz) and adjoint; and a CT 2-D FBP stack
# (parallel 256^2, 403 views: `tessera phantom ct`'s sinogram scaled per slice
# by bench/make_sinogram_stack.py, one NIfTI cols x views x slices) the same
# way. Interleaved repetitions, medians; then each slice of the stack's NIfTI
# against the same slice's one-slice job (max |difference|: 0 means
# bit-identical).
#
#   bench/recon_slices.sh [--reps 3] [--slices 32] [--dir /tmp/recon_slices] [--device cpu]
set -euo pipefail
reps=3
slices=32
dir=/tmp/recon_slices
device=cpu
while [[ $# -gt 0 ]]; do
  case "$1" in
    --reps) reps="$2"; shift 2 ;;
    --slices) slices="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --device) device="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
bazel build //cli:tessera >&2   # .bazelrc: -c opt by default
root=$PWD
mkdir -p "$dir"
# A private copy: another bazel command in the same tree may repoint bazel-bin.
cp -f "$root/bazel-bin/cli/tessera" "$dir/tessera"
T="$dir/tessera"
cd "$dir"
rm -rf mri128 stack ct ctstack
mkdir -p mri128 ct
"$T" phantom mri --kind radial --size 128 --coils 4 --spokes 67 --out-dir mri128 > /dev/null 2>&1
python3 "$root/bench/make_mri_stack.py" --kspace mri128/kspace --slices "$slices" --out stack
"$T" phantom geometry --type parallel --size 256 --out ct/g.json > /dev/null
"$T" phantom ct --geometry ct/g.json --sinogram-out ct/s.nii.gz --volume-out ct/v.nii.gz > /dev/null
python3 "$root/bench/make_sinogram_stack.py" --sinogram ct/s.nii.gz --slices "$slices" --out ctstack

echo "# tessera recon mri / ct: $slices-slice stack in one job vs one job per slice"
echo "# $(nproc) CPU threads, $(date -u '+%F %T') UTC, commit $(git -C "$root" rev-parse --short HEAD), device $device"
echo "# uptime: $(uptime)"
echo
python3 - "$reps" "$slices" "$T" "$device" << 'EOF'
import gzip, statistics, struct, subprocess, sys, time
reps, slices, T, device = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
mri = ["mri", "--traj", "mri128/traj", "--coils", "mri128/coils", "--device", device, "--quiet"]
ct = ["ct", "--geometry", "ct/g.json", "--device", device, "--quiet"]
# label -> (arguments, the stack's input flag and file, a slice's input file)
methods = {
    "mri cgsense 30 it": (mri + ["--method", "cgsense", "--iterations", "30"], "--kspace", "stack/kspace",
                          "stack/slice{s}/kspace"),
    "mri adjoint": (mri + ["--method", "adjoint"], "--kspace", "stack/kspace", "stack/slice{s}/kspace"),
    "ct fbp 256^2": (ct + ["--method", "fbp"], "--sinogram", "ctstack/stack.nii.gz", "ctstack/slice{s}.nii.gz"),
}

def run(args):
    p = subprocess.run([T, "recon"] + args, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(args)}: exit {p.returncode}\n{p.stderr[-2000:]}")

def tag(m):
    return "_".join(m.split()[:2]).replace("^", "")

times = {(m, kind): [] for m in methods for kind in ("stack", "jobs")}
for _ in range(reps):
    for m, (margs, flag, stack_in, slice_in) in methods.items():
        t0 = time.perf_counter()
        run(margs + [flag, stack_in, "--out", f"stack_{tag(m)}.nii.gz"])
        times[(m, "stack")].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for s in range(slices):
            run(margs + [flag, slice_in.format(s=s), "--out", f"slice{s}_{tag(m)}.nii.gz"])
        times[(m, "jobs")].append(time.perf_counter() - t0)

def nifti(path):
    b = gzip.open(path).read()
    dims = struct.unpack_from("<8h", b, 40)
    offset = int(struct.unpack_from("<f", b, 108)[0])
    n = 1
    for d in dims[1:dims[0] + 1]:
        n *= d
    return dims[1:dims[0] + 1], struct.unpack_from(f"<{n}f", b, offset)

print(f"| method | one job, {slices} slices: wall s (median of {reps}) | {slices} jobs of one slice: wall s | "
      "per slice, one job | per slice, one job each | ratio | max abs diff per slice (stack vs alone) | max |image| |")
print("|---|---|---|---|---|---|---|---|")
for m in methods:
    st = statistics.median(times[(m, "stack")])
    jobs = statistics.median(times[(m, "jobs")])
    dims, vol = nifti(f"stack_{tag(m)}.nii.gz")
    plane = dims[0] * dims[1]
    diff = 0.0
    for s in range(slices):
        _, one = nifti(f"slice{s}_{tag(m)}.nii.gz")
        diff = max(diff, max(abs(a - b) for a, b in zip(vol[s * plane:(s + 1) * plane], one)))
    print(f"| {m} | {st:.3f} ({min(times[(m, 'stack')]):.3f}..{max(times[(m, 'stack')]):.3f}) | "
          f"{jobs:.3f} ({min(times[(m, 'jobs')]):.3f}..{max(times[(m, 'jobs')]):.3f}) | {st / slices:.4f} | "
          f"{jobs / slices:.4f} | {st / jobs:.3f} | {diff:.3g} | {max(vol):.3g} |")
EOF

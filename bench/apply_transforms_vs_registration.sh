#!/bin/bash
# Issue 34: apply-transforms reproduces a registration's own outputs. On the
# elastix comparison cases (bench/registration_cases.cc; the 2 mm ones by
# default), `tessera register --metric mi --device cpu` writes warped.nii.gz,
# warped_labels.nii.gz, 0Warp.nii.gz and 0GenericAffine.mat; then
# `tessera apply-transforms` with those files (-t 0Warp -t 0GenericAffine, as
# antsApplyTransforms) resamples the moving image (linear) and labels
# (nearest) onto the fixed grid. Prints one markdown table: max |difference|
# of the voxels (expected 0: the same sampling code), and the apply times
# (wall time of the whole command: reading, composing, sampling, writing).
# Usage: bench/apply_transforms_vs_registration.sh [--work DIR] [--device cpu|cuda] [CASE...]
set -euo pipefail
cd "$(dirname "$0")/.."
work=/tmp/tessera-apply-transforms
device=cpu
if [[ "${1:-}" == "--work" ]]; then work=$2; shift 2; fi
if [[ "${1:-}" == "--device" ]]; then device=$2; shift 2; fi
# TESSERA / CASES: binaries copied aside (a shared checkout may rebuild bazel-bin mid-run).
if [[ -z "${TESSERA:-}" || -z "${CASES:-}" ]]; then
  bazel build //cli:tessera //bench:registration_cases >&2
  mkdir -p "$work/bin" && cp -f bazel-bin/cli/tessera bazel-bin/bench/registration_cases "$work/bin/"
fi
tessera=${TESSERA:-$work/bin/tessera}
cases=${CASES:-$work/bin/registration_cases}
[[ $# -gt 0 ]] || set -- nonmonotonic_reoriented t2like_bias_noise inverted_partial_fov \
  nonmonotonic_noise_bias_flipped ch2bet_t2like same_modality_gamma
now() { date +%s.%N; }
# max |a - b| over the voxels of two NIfTI files (any of float32 / int16 / int32 data).
maxdiff() {
  python3 - "$1" "$2" <<'PY'
import gzip, struct, sys, array
def load(p):
    raw = (gzip.open if p.endswith('.gz') else open)(p, 'rb').read()
    dt = struct.unpack('<h', raw[70:72])[0]
    off = int(struct.unpack('<f', raw[108:112])[0])
    code = {2: 'B', 4: 'h', 8: 'i', 16: 'f', 64: 'd', 512: 'H', 768: 'I'}[dt]
    a = array.array(code); a.frombytes(raw[off:off + (len(raw) - off) // a.itemsize * a.itemsize])
    return a
a, b = load(sys.argv[1]), load(sys.argv[2])
assert len(a) == len(b), (len(a), len(b))
print(max((abs(float(x) - float(y)) for x, y in zip(a, b)), default=0.0))
PY
}
echo "| case | fixed grid | register s | image max abs diff | labels max abs diff | apply image s | apply labels s |"
echo "|---|---|---|---|---|---|---|"
for c in "$@"; do
  d=$work/$c
  rm -rf "$d" && mkdir -p "$d"
  $cases make --case "$c" --dir "$d" > "$d/make.log"
  a=$(now)
  $tessera register --fixed "$d/fixed.nii.gz" --moving "$d/moving.nii.gz" --moving-labels "$d/moving_labels.nii.gz" \
    --metric mi --device "$device" --quiet --out "$d/reg" > "$d/reg.json" 2> "$d/reg.log"
  b=$(now)
  $tessera apply-transforms --reference "$d/fixed.nii.gz" --input "$d/moving.nii.gz" \
    --transform "$d/reg/0Warp.nii.gz" --transform "$d/reg/0GenericAffine.mat" --device "$device" \
    --out "$d/applied.nii.gz" > "$d/apply.json" 2> "$d/apply.log"
  e=$(now)
  $tessera apply-transforms --reference "$d/fixed.nii.gz" --input "$d/moving_labels.nii.gz" \
    --transform "$d/reg/0Warp.nii.gz" --transform "$d/reg/0GenericAffine.mat" --interpolation nearest \
    --device "$device" --out "$d/applied_labels.nii.gz" > "$d/apply_labels.json" 2> "$d/apply_labels.log"
  f=$(now)
  dims=$(python3 -c "import gzip,struct; h=gzip.open('$d/fixed.nii.gz').read(348); d=struct.unpack('<8h',h[40:56]); print('%dx%dx%d' % d[1:4])")
  img=$(maxdiff "$d/reg/warped.nii.gz" "$d/applied.nii.gz")
  lab=$(maxdiff "$d/reg/warped_labels.nii.gz" "$d/applied_labels.nii.gz")
  printf "| %s | %s | %.1f | %s | %s | %.2f | %.2f |\n" "$c" "$dims" "$(echo "$b - $a" | bc)" "$img" "$lab" \
    "$(echo "$e - $b" | bc)" "$(echo "$f - $e" | bc)"
done

#!/bin/bash
# Issue 17: tessera register vs Debian's elastix 5.0.1 on the same multimodal
# cases (bench/registration_cases.cc: real mricron-data volumes warped by a
# smooth deformation neither program knows), scored by one Dice scorer.
#   elastix: affine then B-spline (bench/elastix/*.txt: Mattes MI, 4 levels,
#            ASGD, 2048 / 4096 random samples), -threads 2; labels through
#            transformix (nearest neighbour), folding from transformix -jac.
#   tessera: tessera register --metric mi --device cpu (default schedule), once
#            with each deformable model: greedy (the dense field, default) and
#            bspline (--deformable-model bspline, default 10 mm grid; override
#            with BSPLINE_SPACING_MM=...). Wall time of the whole command.
# Prints one markdown table. Needs: apt-get install -y elastix (bench only).
# The map rms column: each program's map vs the generator's true map over
# labelled fixed voxels (registration_cases truth, untimed; its whole report,
# with Dice per label size, is WORK/CASE/truth.txt).
# Usage: bench/registration_vs_elastix.sh [--work DIR] [CASE...]   (default: all cases)
set -euo pipefail
cd "$(dirname "$0")/.."
work=/tmp/tessera-vs-elastix
if [[ "${1:-}" == "--work" ]]; then work=$2; shift 2; fi
command -v elastix >/dev/null || { echo "elastix missing: apt-get install -y elastix" >&2; exit 1; }
# TESSERA / CASES: binaries copied aside (a shared checkout may rebuild bazel-bin mid-run).
if [[ -z "${TESSERA:-}" || -z "${CASES:-}" ]]; then bazel build //cli:tessera //bench:registration_cases >&2; fi
tessera=${TESSERA:-bazel-bin/cli/tessera}
cases=${CASES:-bazel-bin/bench/registration_cases}
[[ $# -gt 0 ]] || set -- $($cases list)
params=$PWD/bench/elastix
now() { date +%s.%N; }
spacing=${BSPLINE_SPACING_MM:-10}
echo "| case | Dice before (all / large) | elastix Dice after | tessera greedy | tessera bspline ${spacing} mm | map rms mm elastix / greedy / bspline | elastix s | greedy s | bspline s | elastix folded | greedy folded | bspline folded |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for c in "$@"; do
  d=$work/$c
  rm -rf "$d" && mkdir -p "$d/elastix" "$d/tessera" "$d/bspline" "$d/labels" "$d/jac" "$d/def"
  $cases make --case "$c" --dir "$d"
  before=$($cases dice --fixed_labels "$d/fixed_labels.nii.gz" --labels "$d/moving_labels.nii.gz")
  # elastix + transformix
  t0=$(now)
  elastix -f "$d/fixed.nii.gz" -m "$d/moving.nii.gz" -p "$params/affine.txt" -p "$params/bspline.txt" \
    -out "$d/elastix" -threads 2 > "$d/elastix.log" 2>&1
  t1=$(now)
  sed -e 's/(FinalBSplineInterpolationOrder [0-9])/(FinalBSplineInterpolationOrder 0)/' \
      -e 's/(ResultImagePixelType "float")/(ResultImagePixelType "int")/' \
      "$d/elastix/TransformParameters.1.txt" > "$d/elastix/labels.1.txt"
  transformix -in "$d/moving_labels.nii.gz" -tp "$d/elastix/labels.1.txt" -out "$d/labels" -threads 2 > "$d/transformix.log" 2>&1
  transformix -jac all -tp "$d/elastix/TransformParameters.1.txt" -out "$d/jac" -threads 2 > "$d/jacobian.log" 2>&1
  # elastix's whole map as a displacement field, for `registration_cases truth --elastix .` (not timed)
  transformix -def all -tp "$d/elastix/TransformParameters.1.txt" -out "$d/def" -threads 2 > "$d/deformation.log" 2>&1
  e_dice=$($cases dice --fixed_labels "$d/fixed_labels.nii.gz" --labels "$d/labels/result.nii")
  e_fold=$($cases folded --jacobian "$d/jac/spatialJacobian.nii")
  # tessera, each deformable model: "<Dice all> <Dice large> <seconds> <folded voxels>"
  voxels=$(python3 -c "import gzip,struct; h=gzip.open('$d/fixed.nii.gz').read(348); d=struct.unpack('<8h',h[40:56]); print(d[1]*d[2]*d[3])")
  run_tessera() {  # OUT_SUBDIR FLAGS...
    local out=$d/$1; shift
    local a b
    a=$(now)
    $tessera register --fixed "$d/fixed.nii.gz" --moving "$d/moving.nii.gz" --fixed-labels "$d/fixed_labels.nii.gz" \
      --moving-labels "$d/moving_labels.nii.gz" --metric mi --device cpu --quiet --out "$out" "$@" > "$out.json" 2> "$out.log"
    b=$(now)
    local dice fold
    dice=$($cases dice --fixed_labels "$d/fixed_labels.nii.gz" --labels "$out/warped_labels.nii.gz")
    fold=$(python3 -c "import json; print(round(json.load(open('$out.json')).get('folded_percent') / 100 * $voxels))")
    echo "$dice $(echo "$b - $a" | bc) $fold"
  }
  greedy=$(run_tessera tessera)
  bspline=$(run_tessera bspline --deformable-model bspline --bspline-spacing-mm "$spacing")
  # Map error vs the generator's true map (untimed; the full report stays in truth.txt).
  $cases truth --case "$c" --dir "$d" --tessera greedy:tessera,bspline:bspline --elastix . > "$d/truth.txt" 2> "$d/truth.log"
  rms() { grep "^$1: map error" "$d/truth.txt" | sed 's/.*rms \([0-9.]*\) mm.*/\1/'; }
  fmt() { echo "$1" | awk '{printf "%.3f / %.3f", $1, $2}'; }
  col() { echo "$1" | awk -v i="$2" '{print $i}'; }
  printf "| %s | %s | %s | %s | %s | %s / %s / %s | %.1f | %.1f | %.1f | %s | %s | %s |\n" "$c" "$(fmt "$before")" \
    "$(fmt "$e_dice")" "$(fmt "$greedy")" "$(fmt "$bspline")" "$(rms elastix)" "$(rms greedy)" "$(rms bspline)" \
    "$(echo "$t1 - $t0" | bc)" "$(col "$greedy" 3)" "$(col "$bspline" 3)" "$e_fold" "$(col "$greedy" 4)" "$(col "$bspline" 4)"
done

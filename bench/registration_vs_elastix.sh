#!/bin/bash
# Issue 17: tessera register vs Debian's elastix 5.0.1 on the same multimodal
# cases (bench/registration_cases.cc: real mricron-data volumes warped by a
# smooth deformation neither program knows), scored by one Dice scorer.
#   elastix: affine then B-spline (bench/elastix/*.txt: Mattes MI, 4 levels,
#            ASGD, 2048 / 4096 random samples), -threads 2; labels through
#            transformix (nearest neighbour), folding from transformix -jac.
#   tessera: tessera register --metric mi --device cpu (default schedule);
#            "tessera sigma 1": the default before issue 17's sigma change
#            (registration_cases register --grad_sigma 1, the same engine;
#            Dice only, no I/O in its time); "tessera step halving": the same
#            engine with the deformable step control on (registration_cases
#            register --halve_after 3, opt-in since issue 17; Dice only).
# Prints one markdown table. Needs: apt-get install -y elastix (bench only).
# Usage: bench/registration_vs_elastix.sh [--work DIR] [CASE...]   (default: all cases)
set -euo pipefail
cd "$(dirname "$0")/.."
work=/tmp/tessera-vs-elastix
if [[ "${1:-}" == "--work" ]]; then work=$2; shift 2; fi
command -v elastix >/dev/null || { echo "elastix missing: apt-get install -y elastix" >&2; exit 1; }
bazel build //cli:tessera //bench:registration_cases >&2
tessera=bazel-bin/cli/tessera
cases=bazel-bin/bench/registration_cases
[[ $# -gt 0 ]] || set -- $($cases list)
params=$PWD/bench/elastix
now() { date +%s.%N; }
echo "| case | Dice before (all / large) | elastix Dice after | tessera sigma 1 (old) | tessera step halving | tessera Dice after | elastix s | tessera s | elastix folded | tessera folded |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for c in "$@"; do
  d=$work/$c
  rm -rf "$d" && mkdir -p "$d/elastix" "$d/tessera" "$d/labels" "$d/jac"
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
  e_dice=$($cases dice --fixed_labels "$d/fixed_labels.nii.gz" --labels "$d/labels/result.nii")
  e_fold=$($cases folded --jacobian "$d/jac/spatialJacobian.nii")
  # tessera
  t2=$(now)
  $tessera register --fixed "$d/fixed.nii.gz" --moving "$d/moving.nii.gz" --fixed-labels "$d/fixed_labels.nii.gz" \
    --moving-labels "$d/moving_labels.nii.gz" --metric mi --device cpu --quiet --out "$d/tessera" > "$d/tessera.json" 2> "$d/tessera.log"
  t3=$(now)
  t_dice=$($cases dice --fixed_labels "$d/fixed_labels.nii.gz" --labels "$d/tessera/warped_labels.nii.gz")
  t_fold=$(python3 -c "import json,sys; j=json.load(open('$d/tessera.json')); print(j.get('folded_percent'))")
  voxels=$(python3 -c "import gzip,struct; h=gzip.open('$d/fixed.nii.gz').read(348); d=struct.unpack('<8h',h[40:56]); print(d[1]*d[2]*d[3])")
  t_fold=$(python3 -c "print(round($t_fold / 100 * $voxels))")
  old=$($cases register --dir "$d" --grad_sigma 1 2> /dev/null | head -1)
  halving=$($cases register --dir "$d" --halve_after 3 2> /dev/null | head -1)
  fmt() { echo "$1" | awk '{printf "%.3f / %.3f", $1, $2}'; }
  printf "| %s | %s | %s | %s | %s | %s | %.1f | %.1f | %s | %s |\n" "$c" "$(fmt "$before")" "$(fmt "$e_dice")" "$(fmt "$old")" \
    "$(fmt "$halving")" "$(fmt "$t_dice")" \
    "$(echo "$t1 - $t0" | bc)" "$(echo "$t3 - $t2" | bc)" "$e_fold" "$t_fold"
done

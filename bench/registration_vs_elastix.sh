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
#            with BSPLINE_SPACING_MM=..., or BSPLINE_SPACING_MM=off to skip
#            that model). Wall time of the whole command. TESSERA_METRIC=lncc
#            (or any --metric value) changes the metric; TESSERA_METRIC=default
#            passes none: what a new user's `tessera register` runs (LNCC).
# Prints one markdown table. Needs: apt-get install -y elastix (bench only).
# The map rms column: each program's map vs the generator's true map over
# labelled fixed voxels (registration_cases truth, untimed; its whole report,
# with Dice per label size, is WORK/RES/CASE/truth.txt, RES bench or full).
# Resolutions (issue 38): "bench" makes each case at its own downsampling
# (Colin27 2 mm, macaque 1.5 mm: the table of issue 17), "full" at the
# source's resolution (registration_cases make --downsample 1: Colin27 1 mm,
# 181x217x181; macaque native 0.5 mm, 168x206x128), "both" (default) runs
# every case at each and prints one table with a resolution column. Besides
# the wall time, each program's CPU time (user + sys, /usr/bin/time) is
# reported: on a shared machine it varies less. Each tessera run's per-level
# log (iterations, loss, seconds) stays in WORK/RES/CASE/{tessera,bspline}.levels.
# Usage: bench/registration_vs_elastix.sh [--work DIR] [--resolution bench|full|both] [CASE...]
#   (default: all cases, both resolutions)
set -euo pipefail
cd "$(dirname "$0")/.."
work=/tmp/tessera-vs-elastix
resolution=both
while [[ $# -gt 0 ]]; do
  case "$1" in
    --work) work=$2; shift 2 ;;
    --resolution) resolution=$2; shift 2 ;;
    *) break ;;
  esac
done
case "$resolution" in
  bench) resolutions=(bench) ;;
  full) resolutions=(full) ;;
  both) resolutions=(bench full) ;;
  *) echo "--resolution must be bench, full or both, not '$resolution'" >&2; exit 2 ;;
esac
command -v elastix >/dev/null || { echo "elastix missing: apt-get install -y elastix" >&2; exit 1; }
# TESSERA / CASES: binaries copied aside (a shared checkout may rebuild bazel-bin mid-run).
if [[ -z "${TESSERA:-}" || -z "${CASES:-}" ]]; then bazel build //cli:tessera //bench:registration_cases >&2; fi
tessera=${TESSERA:-bazel-bin/cli/tessera}
cases=${CASES:-bazel-bin/bench/registration_cases}
[[ $# -gt 0 ]] || set -- $($cases list)
params=$PWD/bench/elastix
now() { date +%s.%N; }
# timed CPU_FILE CMD...: runs CMD, writes its user + sys CPU seconds to CPU_FILE.
timed() { local f=$1; shift; /usr/bin/time -f "%U %S" -o "$f" "$@"; }
cpu_of() { tail -1 "$1" | awk '{printf "%.1f", $1 + $2}'; }
spacing=${BSPLINE_SPACING_MM:-10}
metric=${TESSERA_METRIC:-mi}
metric_flags=(--metric "$metric"); [[ $metric == default ]] && metric_flags=()
echo "tessera metric: $metric" >&2
echo "| case | resolution | Dice before (all / large) | elastix Dice after | tessera greedy | tessera bspline ${spacing} mm | map rms mm elastix / greedy / bspline | elastix s | greedy s | bspline s | CPU s elastix / greedy / bspline | elastix folded | greedy folded | bspline folded |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for res in "${resolutions[@]}"; do
for c in "$@"; do
  d=$work/$res/$c
  rm -rf "$d" && mkdir -p "$d/elastix" "$d/tessera" "$d/bspline" "$d/labels" "$d/jac" "$d/def"
  if [[ $res == full ]]; then $cases make --case "$c" --dir "$d" --downsample 1; else $cases make --case "$c" --dir "$d"; fi
  # The fixed grid's voxel size (NIfTI pixdim) names the resolution actually run.
  mm=$(python3 -c "import gzip,struct; h=gzip.open('$d/fixed.nii.gz').read(348); p=struct.unpack('<8f',h[76:108]); print('%.3g mm' % max(p[1:4]))")
  before=$($cases dice --fixed_labels "$d/fixed_labels.nii.gz" --labels "$d/moving_labels.nii.gz")
  # elastix + transformix
  t0=$(now)
  timed "$d/elastix.cpu" elastix -f "$d/fixed.nii.gz" -m "$d/moving.nii.gz" -p "$params/affine.txt" -p "$params/bspline.txt" \
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
    timed "$out.cpu" $tessera register --fixed "$d/fixed.nii.gz" --moving "$d/moving.nii.gz" --fixed-labels "$d/fixed_labels.nii.gz" \
      --moving-labels "$d/moving_labels.nii.gz" "${metric_flags[@]}" --device cpu --quiet --out "$out" "$@" > "$out.json" 2> "$out.log"
    b=$(now)
    local dice fold
    dice=$($cases dice --fixed_labels "$d/fixed_labels.nii.gz" --labels "$out/warped_labels.nii.gz")
    fold=$(python3 -c "import json; print(round(json.load(open('$out.json')).get('folded_percent') / 100 * $voxels))")
    python3 -c "import json; print('\\n'.join(json.load(open('$out.json')).get('log', [])))" > "$out.levels"
    echo "$dice $(echo "$b - $a" | bc) $fold $(cpu_of "$out.cpu")"
  }
  greedy=$(run_tessera tessera)
  models=greedy:tessera
  if [[ $spacing == off ]]; then
    bspline="- - - - -"
  else
    bspline=$(run_tessera bspline --deformable-model bspline --bspline-spacing-mm "$spacing")
    models+=,bspline:bspline
  fi
  # Map error vs the generator's true map (untimed; the full report stays in truth.txt).
  $cases truth --case "$c" --dir "$d" --tessera "$models" --elastix . > "$d/truth.txt" 2> "$d/truth.log"
  rms() { local r; r=$(grep "^$1: map error" "$d/truth.txt" | sed 's/.*rms \([0-9.]*\) mm.*/\1/'); echo "${r:--}"; }
  fmt() { echo "$1" | awk '$1 == "-" {printf "-"; next} {printf "%.3f / %.3f", $1, $2}'; }
  col() { echo "$1" | awk -v i="$2" '{print $i}'; }
  sec() { if [[ $1 == - ]]; then echo -; else printf "%.1f" "$1"; fi; }
  printf "| %s | %s | %s | %s | %s | %s | %s / %s / %s | %.1f | %.1f | %s | %s / %s / %s | %s | %s | %s |\n" "$c" "$mm" \
    "$(fmt "$before")" "$(fmt "$e_dice")" "$(fmt "$greedy")" "$(fmt "$bspline")" "$(rms elastix)" "$(rms greedy)" \
    "$(rms bspline)" "$(echo "$t1 - $t0" | bc)" "$(col "$greedy" 3)" "$(sec "$(col "$bspline" 3)")" "$(cpu_of "$d/elastix.cpu")" \
    "$(col "$greedy" 5)" "$(col "$bspline" 5)" "$e_fold" "$(col "$greedy" 4)" "$(col "$bspline" 4)"
done
done

#!/usr/bin/env bash
# 3-D ESPIRiT coil maps, ours (kernels/reconstruction/mri/espirit3d.h) against
# `bart ecalib -m1` on the same 3-D k-space (issue 36), in one run. For each
# case N:C BART makes the problem: `bart phantom -3 -k -s C -x N` (analytic
# k-space of the 3-D Shepp-Logan with C coils), its image (`-3 -x N`) and its
# coil sensitivities (`-3 -S C -x N`). Both tools calibrate with BART's ecalib
# defaults (24^3 centre, 6^3 kernel, threshold 0.001, crop 0.8).
# Reported: times (ours in-process, median of 3, k-space in memory; BART the
# wall time of `bart ecalib`, median of --bart-reps, which includes reading and
# writing .cfl files), the kernels kept, the per-voxel agreement |<S_a, S_b>|
# (mean / min over the object) of ours vs BART's and each vs the simulated
# sensitivities, and CG-SENSE with each map set, run by the same tool
# (`bart pics -l2 -r 0.001 -i 20`) on the k-space kept on an R = 2 x 2 (y, z)
# grid plus the 24^2 centre, scored as the magnitude NRMSE against the image
# (best real scale).
#
#   bench/espirit3d_vs_bart.sh [--cases "48:8 64:8"] [--bart-reps 1] [--dir /tmp/espirit3d_vs_bart]
set -euo pipefail
cases="48:8 64:8"
bart_reps=1
dir=/tmp/espirit3d_vs_bart
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cases) cases="$2"; shift 2 ;;
    --bart-reps) bart_reps="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
command -v bart > /dev/null || { echo "bart is not installed (apt-get install bart)" >&2; exit 1; }
cd "$(dirname "$0")/.."
bazel build //bench:espirit3d_bench >&2
mkdir -p "$dir"
bench=$dir/espirit3d_bench  # a private copy: bazel-bin may be repointed by other commands
cp -f bazel-bin/bench/espirit3d_bench "$bench"

median() { printf "%s\n" "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

echo "# 3-D ESPIRiT vs bart ecalib -m1 ($(bart version), $(nproc) CPU threads, $(date -u +%F))"
echo
echo "| case | kernels (ours) | ours s | bart s | bart/ours | ours vs bart mean / min | ours vs true | bart vs true | pics NRMSE true maps | ours maps | bart maps | ours/bart NRMSE |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for c in $cases; do
  IFS=: read -r n coils <<< "$c"
  (cd "$dir" && bart phantom -3 -k -s "$coils" -x "$n" kspace && bart phantom -3 -x "$n" truth &&
    bart phantom -3 -S "$coils" -x "$n" maps_true)
  read -r _ ours_s kernels < <("$bench" --mode=espirit --dir="$dir" --reps=3)
  times=()
  for _ in $(seq "$bart_reps"); do
    start=$(date +%s.%N)
    (cd "$dir" && bart ecalib -m1 kspace maps_bart > /dev/null)
    end=$(date +%s.%N)
    times+=("$(echo "$end - $start" | bc -l)")
  done
  bart_s=$(median "${times[@]}")
  read -r _ _ ob_mean ob_min _ < <("$bench" --mode=compare --dir="$dir" --maps=maps_ours --against=maps_bart)
  read -r _ _ ot_mean ot_min _ < <("$bench" --mode=compare --dir="$dir" --maps=maps_ours --against=maps_true)
  read -r _ _ bt_mean bt_min _ < <("$bench" --mode=compare --dir="$dir" --maps=maps_bart --against=maps_true)
  "$bench" --mode=mask --dir="$dir" --ry=2 --rz=2 2> /dev/null
  nrmse=()
  for m in maps_true maps_ours maps_bart; do
    (cd "$dir" && bart pics -S -l2 -r 0.001 -i 20 kspace_us "$m" "recon_$m" > /dev/null 2>&1)
    read -r _ e < <("$bench" --mode=nrmse --dir="$dir" --recon="recon_$m" --truth=truth)
    nrmse+=("$e")
  done
  printf "| %s | %s | %.3f | %.3f | %.2f | %s / %s | %s / %s | %s / %s | %s | %s | %s | %.3f |\n" "$n^3 x $coils" \
    "$kernels" "$ours_s" "$bart_s" "$(echo "$bart_s / $ours_s" | bc -l)" "$ob_mean" "$ob_min" "$ot_mean" "$ot_min" \
    "$bt_mean" "$bt_min" "${nrmse[0]}" "${nrmse[1]}" "${nrmse[2]}" "$(echo "${nrmse[1]} / ${nrmse[2]}" | bc -l)"
done

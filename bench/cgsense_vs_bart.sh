#!/usr/bin/env bash
# CG-SENSE against BART's `bart pics -l2` on the same exact radial data, in one
# run (issue 12). For each problem size: bench/mri_bench --mode=write makes an
# analytic radial Shepp-Logan problem (golden-angle spokes, 2n samples each,
# 8 birdcage coils, k-space exact for the band-limited maps: no inverse crime)
# as .cfl files; then for each iteration count our CG-SENSE (CPU, in-process
# time incl. NUFFT planning) and `bart pics -l2 -r R -i N -t traj kspace maps`
# (wall time of the process) reconstruct it, and both are scored against the
# pixel-averaged phantom. nrmse_scaled removes the best complex scale first
# (BART rescales data internally, so its raw NRMSE is not comparable).
#
#   bench/cgsense_vs_bart.sh [--sizes "128:101 256:201"] [--iterations "5 10 20"]
#                            [--lambda 1e-4] [--bart_r 0.001] [--dir /tmp/cgsense_vs_bart]
set -euo pipefail
sizes="128:101 256:201"
iterations="5 10 20"
lambda=1e-4
bart_r=0.001
dir=/tmp/cgsense_vs_bart
while [[ $# -gt 0 ]]; do
  case "$1" in
    --sizes) sizes="$2"; shift 2 ;;
    --iterations) iterations="$2"; shift 2 ;;
    --lambda) lambda="$2"; shift 2 ;;
    --bart_r) bart_r="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
command -v bart > /dev/null || { echo "bart is not installed (apt-get install bart)" >&2; exit 1; }
cd "$(dirname "$0")/.."
bazel build //bench:mri_bench >&2
bench=bazel-bin/bench/mri_bench
mkdir -p "$dir"

echo "# CG-SENSE vs bart pics -l2 ($(bart version), $(nproc) CPU threads, $(date -u +%F))"
echo
echo "| n | spokes | iterations | ours s | bart s | time ratio bart/ours | ours NRMSE | bart NRMSE (scaled) | ours NRMSE (scaled) |"
echo "|---|---|---|---|---|---|---|---|---|"
for size in $sizes; do
  n="${size%%:*}"; spokes="${size##*:}"
  "$bench" --mode=write --dir="$dir" --n="$n" --spokes="$spokes" 2> /dev/null
  for it in $iterations; do
    read -r _ ours_s ours_raw ours_scaled < <("$bench" --mode=recon --dir="$dir" --iterations="$it" --lambda="$lambda" 2> /dev/null)
    start=$(date +%s.%N)
    (cd "$dir" && bart pics -S -l2 -r "$bart_r" -i "$it" -t traj kspace maps bart_out > /dev/null 2>&1)
    end=$(date +%s.%N)
    bart_s=$(echo "$end - $start" | bc -l)
    read -r _ _ bart_scaled < <("$bench" --mode=compare --dir="$dir" --image="$dir/bart_out" 2> /dev/null)
    ratio=$(echo "$bart_s / $ours_s" | bc -l)
    printf "| %s | %s | %s | %.3f | %.3f | %.2f | %s | %s | %s |\n" "$n" "$spokes" "$it" "$ours_s" "$bart_s" "$ratio" \
      "$ours_raw" "$bart_scaled" "$ours_scaled"
  done
done

#!/usr/bin/env bash
# ESPIRiT coil maps, ours against `bart ecalib -m1` on the same k-space (issue
# 36), in one run. For each case bench/espirit_bench --mode=write makes an exact
# Shepp-Logan problem (8 birdcage coils, analytic k-space: no inverse crime):
#   cartesian:N    full N x N Cartesian k-space; both tools calibrate on it
#                  (24^2 centre, 6x6 kernels, threshold 0.001, crop 0.8); the
#                  CG-SENSE test data are its R = 2 lines + 24 centre lines.
#   radial:N:S     S golden-angle spokes of 2N samples; ours grids the centre
#                  in-process (espirit_gridding.h); BART follows its radial
#                  workflow: extract the spokes' centre 48 samples (|k| < 12),
#                  bart nufft -i -d24:24:1, bart fft -u 3, bart resize -c to
#                  N x N, bart ecalib -m1 (the whole chain timed).
# Then CG-SENSE (ours, CPU, 20 iterations, lambda 1e-4, Toeplitz) with the true
# maps, our maps and BART's maps, scored as the magnitude NRMSE against the
# pixel-averaged phantom (best real scale: BART rescales and phases differ).
# Times: ours in-process (median of 3, k-space already in memory); BART the
# wall time of its process(es) (median of 3), which includes reading and
# writing .cfl files and process start (~10 ms each).
#
#   bench/espirit_vs_bart.sh [--cases "cartesian:128 cartesian:256 radial:128:101 radial:256:201"]
#                            [--dir /tmp/espirit_vs_bart]
set -euo pipefail
cases="cartesian:128 cartesian:256 radial:128:101 radial:256:201"
dir=/tmp/espirit_vs_bart
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cases) cases="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
command -v bart > /dev/null || { echo "bart is not installed (apt-get install bart)" >&2; exit 1; }
cd "$(dirname "$0")/.."
bazel build //bench:espirit_bench >&2
bench=$PWD/bazel-bin/bench/espirit_bench
mkdir -p "$dir"

median3() { printf "%s\n" "$@" | sort -g | sed -n 2p; }

bart_chain() {  # kind n: BART's maps into $dir/maps_bart; prints the wall time
  local kind=$1 n=$2 start end
  start=$(date +%s.%N)
  if [[ $kind == cartesian ]]; then
    bart ecalib -m1 kspace maps_bart > /dev/null
  else
    bart extract 1 $((n - 24)) $((n + 24)) traj traj_c
    bart extract 1 $((n - 24)) $((n + 24)) kspace kspace_c
    bart nufft -i -d24:24:1 traj_c kspace_c img_c > /dev/null
    bart fft -u 3 img_c cal_c
    bart resize -c 0 "$n" 1 "$n" cal_c cal_full
    bart ecalib -m1 cal_full maps_bart > /dev/null
  fi
  end=$(date +%s.%N)
  echo "$end - $start" | bc -l
}

echo "# ESPIRiT vs bart ecalib -m1 ($(bart version), $(nproc) CPU threads, $(date -u +%F))"
echo
echo "| case | kernels (ours) | ours s | bart s | bart/ours | CG-SENSE NRMSE true maps | ours maps | bart maps | ours/bart NRMSE |"
echo "|---|---|---|---|---|---|---|---|---|"
for c in $cases; do
  IFS=: read -r kind n spokes <<< "$c"
  spokes=${spokes:-1}
  "$bench" --mode=write --kind="$kind" --n="$n" --spokes="$spokes" --dir="$dir" 2> /dev/null
  read -r _ ours_s kernels < <("$bench" --mode=espirit --dir="$dir" --reps=3)
  t1=$(cd "$dir" && bart_chain "$kind" "$n"); t2=$(cd "$dir" && bart_chain "$kind" "$n"); t3=$(cd "$dir" && bart_chain "$kind" "$n")
  bart_s=$(median3 "$t1" "$t2" "$t3")
  read -r _ e_true < <("$bench" --mode=cgsense --dir="$dir" --maps=maps_true)
  read -r _ e_ours < <("$bench" --mode=cgsense --dir="$dir" --maps=maps_ours)
  read -r _ e_bart < <("$bench" --mode=cgsense --dir="$dir" --maps=maps_bart)
  printf "| %s | %s | %.3f | %.3f | %.2f | %s | %s | %s | %.3f |\n" "$c" "$kernels" "$ours_s" "$bart_s" \
    "$(echo "$bart_s / $ours_s" | bc -l)" "$e_true" "$e_ours" "$e_bart" "$(echo "$e_ours / $e_bart" | bc -l)"
done

#!/usr/bin/env bash
# Compressed sensing against BART's `bart pics -R W:7:0:lambda` (L1-wavelet)
# and `-R T:7:0:lambda` (TV) on the same exact radial data, in one run
# (issue 36). For each undersampling: bench/mri_bench --mode=write makes the
# analytic radial Shepp-Logan problem (golden-angle spokes, 2n samples each,
# 8 birdcage coils, k-space exact: no inverse crime) as .cfl files; "4x" and
# "8x" are relative to radial Nyquist, pi n / 2 spokes (n = 128: 201 spokes;
# 4x = 50, 8x = 25). For each lambda of the grid, ours (bench/cs_bench, CPU,
# in-process time incl. the Toeplitz kernel, Lipschitz estimate and data
# scale) and `bart pics -e -R <R>:7:0:lambda -i N -t traj kspace maps`
# (process wall time; -e: step 0.95 / max eigenvalue, without it pics
# diverges (NaN) on this unweighted radial data; BART's default data scaling
# and random wavelet shifts) reconstruct it with the same lambda and
# iterations, and both are scored against the pixel-averaged phantom after
# the best complex scale (BART returns its image in its scaled units).
#
#   bench/cs_vs_bart.sh [--n 128] [--spokes "50 25"] [--lambdas "0.001 0.002 0.005 0.01 0.02"]
#                       [--iterations 100] [--regularizers "W T"] [--dir /tmp/cs_vs_bart]
#                       [--shifts 4] [--bin DIR]   # mri_bench and cs_bench already built there (no bazel call)
# --shifts: wavelet shifts averaged per FISTA iteration in ours (CsSense's
# default 4); the "ours K=1" column is BART's own scheme (one random shift);
# "ours 1.05 L" is ours with the step 1 / (1.05 x the power estimate) used
# before CsSense took the residual bound (cs_sense.h).
set -euo pipefail
n=128
spokes_list="50 25"
lambdas="0.001 0.002 0.005 0.01 0.02"
iterations=100
regularizers="W"
dir=/tmp/cs_vs_bart
prebuilt=""
shifts=4
while [[ $# -gt 0 ]]; do
  case "$1" in
    --n) n="$2"; shift 2 ;;
    --spokes) spokes_list="$2"; shift 2 ;;
    --lambdas) lambdas="$2"; shift 2 ;;
    --iterations) iterations="$2"; shift 2 ;;
    --regularizers) regularizers="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --bin) prebuilt="$2"; shift 2 ;;
    --shifts) shifts="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
command -v bart > /dev/null || { echo "bart is not installed (apt-get install bart)" >&2; exit 1; }
cd "$(dirname "$0")/.."
bin="$dir/bin"
mkdir -p "$bin"
if [[ -n "$prebuilt" ]]; then
  cp -f "$prebuilt/mri_bench" "$prebuilt/cs_bench" "$bin/"
else
  bazel build //bench:mri_bench //bench:cs_bench >&2
  # Private copies: bazel-bin may be repointed by other commands meanwhile.
  cp -f bazel-bin/bench/mri_bench bazel-bin/bench/cs_bench "$bin/"
fi

echo "# CS (FISTA) vs bart pics -e -R ($(bart version), $(nproc) CPU threads, $(date -u +%F)), n = $n, $iterations iterations"
echo
echo "| R | spokes (accel.) | lambda | ours s | bart s | time ratio bart/ours | ours NRMSE | bart NRMSE | ours <= bart | ours K=1 NRMSE | ours 1.05 L NRMSE |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
nyquist=$(echo "3.14159265 * $n / 2" | bc -l)
for spokes in $spokes_list; do
  case_dir="$dir/s$spokes"
  mkdir -p "$case_dir"
  "$bin/mri_bench" --mode=write --dir="$case_dir" --n="$n" --spokes="$spokes" 2> /dev/null
  accel=$(printf "%.1f" "$(echo "$nyquist / $spokes" | bc -l)")
  for r in $regularizers; do
    name=$([[ "$r" == W ]] && echo l1-wavelet || echo tv)
    for lambda in $lambdas; do
      read -r _ ours_s _ _ < <("$bin/cs_bench" --mode=recon --dir="$case_dir" --regularizer="$name" \
        --lambda="$lambda" --iterations="$iterations" --shifts="$shifts" --out=ours 2> /dev/null)
      "$bin/cs_bench" --mode=recon --dir="$case_dir" --regularizer="$name" --lambda="$lambda" \
        --iterations="$iterations" --shifts=1 --out=ours_k1 > /dev/null 2>&1
      "$bin/cs_bench" --mode=recon --dir="$case_dir" --regularizer="$name" --lambda="$lambda" \
        --iterations="$iterations" --shifts="$shifts" --fixed_margin --out=ours_fixed > /dev/null 2>&1
      start=$(date +%s.%N)
      (cd "$case_dir" && bart pics -e -R "$r:7:0:$lambda" -i "$iterations" -t traj kspace maps bart > /dev/null 2>&1)
      end=$(date +%s.%N)
      bart_s=$(echo "$end - $start" | bc -l)
      read -r _ _ ours_e < <("$bin/cs_bench" --mode=compare --dir="$case_dir" --image="$case_dir/ours")
      read -r _ _ bart_e < <("$bin/cs_bench" --mode=compare --dir="$case_dir" --image="$case_dir/bart")
      read -r _ _ k1_e < <("$bin/cs_bench" --mode=compare --dir="$case_dir" --image="$case_dir/ours_k1")
      read -r _ _ fixed_e < <("$bin/cs_bench" --mode=compare --dir="$case_dir" --image="$case_dir/ours_fixed")
      ratio=$(echo "$bart_s / $ours_s" | bc -l)
      ok=$(echo "$ours_e <= $bart_e" | bc -l)
      printf "| %s | %s (%sx) | %s | %.3f | %.3f | %.2f | %s | %s | %s | %s | %s |\n" "$r" "$spokes" "$accel" "$lambda" \
        "$ours_s" "$bart_s" "$ratio" "$ours_e" "$bart_e" "$([[ $ok == 1 ]] && echo yes || echo no)" "$k1_e" "$fixed_e"
    done
  done
done

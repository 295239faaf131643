#!/usr/bin/env bash
# Our CPU NUFFT (type 2, float) against `bart nufft` on the same random 2-D
# trajectory and image, in one run (issue 12): time and error against the
# direct sum (our NUDFT in double on the first --exact_points samples; BART's
# output is compared after the best complex scale, since BART scales its
# NUFFT). Ours: in-process plan + SetPoints + Execute; BART: wall time of the
# process (includes reading/writing the .cfl files).
#
#   bench/nufft_vs_bart.sh [--n 256] [--points 1000000] [--tols "1e-2 1e-3 1e-4 1e-5 1e-6"]
set -euo pipefail
n=256
points=1000000
tols="1e-2 1e-3 1e-4 1e-5 1e-6"
dir=/tmp/nufft_vs_bart
while [[ $# -gt 0 ]]; do
  case "$1" in
    --n) n="$2"; shift 2 ;;
    --points) points="$2"; shift 2 ;;
    --tols) tols="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
command -v bart > /dev/null || { echo "bart is not installed (apt-get install bart)" >&2; exit 1; }
cd "$(dirname "$0")/.."
bazel build //bench:nufft_vs_bart >&2
tool=bazel-bin/bench/nufft_vs_bart
mkdir -p "$dir"
"$tool" --mode=write --dir="$dir" --n="$n" --points="$points"
"$tool" --mode=exact --dir="$dir" --n="$n"

start=$(date +%s.%N)
(cd "$dir" && bart nufft traj img bart > /dev/null 2>&1)
end=$(date +%s.%N)
bart_s=$(echo "$end - $start" | bc -l)
read -r _ bart_raw bart_err < <("$tool" --mode=compare --dir="$dir" --n="$n" --a=bart)

echo "# NUFFT type 2 (forward), ours (CPU, float) vs bart nufft ($(bart version), $(nproc) CPU threads, $(date -u +%F))"
echo
echo "${n}x${n} image, ${points} random points; bart nufft: ${bart_s} s, error ${bart_err} (scaled; raw ${bart_raw})"
echo
echo "| our tol | ours s | ours error | bart s | bart error | bart s / ours s |"
echo "|---|---|---|---|---|---|"
for tol in $tols; do
  read -r _ ours_s < <("$tool" --mode=ours --dir="$dir" --n="$n" --tol="$tol")
  read -r _ ours_err _ < <("$tool" --mode=compare --dir="$dir" --n="$n" --a=ours)
  printf "| %s | %.3f | %s | %.3f | %s | %.2f |\n" "$tol" "$ours_s" "$ours_err" "$bart_s" "$bart_err" \
    "$(echo "$bart_s / $ours_s" | bc -l)"
done

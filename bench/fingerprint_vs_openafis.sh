#!/usr/bin/env bash
# Our CPU MCC matchers (LSS-R, LSS) vs OpenAFIS on the same FVC2002 DB1-DB4
# set B templates and the same core, side by side in one run (issue 16:
# "CPU throughput per core at least OpenAFIS's").
#   bench/fingerprint_vs_openafis.sh [ROUNDS=3]
# OpenAFIS is built OUTSIDE the repository from its public source: set
# OPENAFIS_SRC to a checkout (e.g. what the `fetch` tool brings:
# git --git-dir=/work/.mirror/neilharan+openafis/repo archive HEAD | tar -x -C DIR),
# or OPENAFIS_CLI to a built openafis-cli (OURS_BIN: a built
# fingerprint_cpu_bench, to run where there is no Bazel). Both programs run pinned to one
# core (taskset -c CORE, default 0), alternating ROUNDS times; the table
# shows the best round of each (the machine may be shared).
# OpenAFIS: `one-many` of one probe against the 320 templates loaded
# --load-factor times (default 300: 96,000 candidates), its own fp/s.
# Ours: bench/fingerprint_cpu_bench's single-thread LSS-R and LSS rates over
# all 80 x 80 pairs of each database (probe preparation excluded, as
# OpenAFIS prepares its probe once too), in thread CPU time (OpenAFIS reports
# wall time: compare on an idle core).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-3}"
CORE="${CORE:-0}"
LOAD_FACTOR="${LOAD_FACTOR:-300}"
DATA="${DATA:-$ROOT/../shared/data/fingerprint/fvc2002}"
[ -d "$DATA/DB1_B" ] || { echo "no FVC2002 templates in $DATA (set DATA)" >&2; exit 1; }

CLI="${OPENAFIS_CLI:-}"
if [ -z "$CLI" ]; then
  SRC="${OPENAFIS_SRC:-}"
  if [ -z "$SRC" ] && [ -d /work/.mirror/neilharan+openafis/repo ]; then
    SRC=/tmp/openafis-src
    if [ ! -f "$SRC/CMakeLists.txt" ]; then
      mkdir -p "$SRC"
      git --git-dir=/work/.mirror/neilharan+openafis/repo archive HEAD | tar -x -C "$SRC"
    fi
  fi
  [ -n "$SRC" ] || { echo "set OPENAFIS_SRC (an OpenAFIS checkout) or OPENAFIS_CLI" >&2; exit 1; }
  BUILD="${OPENAFIS_BUILD:-/tmp/openafis-build}"
  if [ ! -x "$BUILD/cli/openafis-cli" ]; then
    # GCC 12 needs <cstddef>/<cstdint> that OpenAFIS's headers do not include.
    cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS="-include cstddef -include cstdint" >&2
    make -C "$BUILD" -j"$(nproc)" >&2
  fi
  CLI="$BUILD/cli/openafis-cli"
fi
OURS="${OURS_BIN:-}"  # a built fingerprint_cpu_bench (e.g. on a machine without Bazel)
if [ -z "$OURS" ]; then
  cd "$ROOT"
  bazel build //bench:fingerprint_cpu_bench >&2
  OURS="$(bazel info bazel-bin 2>/dev/null)/bench/fingerprint_cpu_bench"
fi

best_openafis=0 best_lssr=0 best_lss=0
for round in $(seq 1 "$ROUNDS"); do
  # OpenAFIS: best of its three passes.
  oa=$(taskset -c "$CORE" "$CLI" one-many --f1 DB1_B/101_2.iso --load-factor "$LOAD_FACTOR" --path "$DATA" 2>&1 |
       sed -n 's/.*Completed in [0-9]*ms (\([0-9.]*\) fp\/s).*/\1/p' | sort -g | tail -1)
  line=$(taskset -c "$CORE" "$OURS" --reps=1 --threads=1 --data="$(dirname "$DATA")" 2>&1 | grep '^all  LSS-R')
  path=$(echo "$line" | sed -n 's/.*per core (\([a-z0-9-]*\);.*/\1/p')
  lssr=$(echo "$line" | sed -n 's/^all  LSS-R \([0-9.]*\) K matches\/s per core.*/\1/p')
  lss=$(echo "$line" | sed -n 's/.*LSS \([0-9.]*\) K per core.*/\1/p')
  echo "round $round: OpenAFIS ${oa:-?} fp/s, LSS-R ${lssr:-?} K/s, LSS ${lss:-?} K/s" >&2
  best_openafis=$(awk -v a="$best_openafis" -v b="${oa:-0}" 'BEGIN{print (b>a)?b:a}')
  best_lssr=$(awk -v a="$best_lssr" -v b="${lssr:-0}" 'BEGIN{print (b*1000>a)?b*1000:a}')
  best_lss=$(awk -v a="$best_lss" -v b="${lss:-0}" 'BEGIN{print (b*1000>a)?b*1000:a}')
done
echo
echo "Same core ($CORE), FVC2002 DB1-DB4 set B, best of $ROUNDS alternating rounds ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "Ours: matches per second of thread CPU time, popcount path ${path:-?}; OpenAFIS: its own fp/s (wall time),"
echo "so on a loaded machine the ratios flatter ours."
echo
echo "| matcher | matches/s on one core | vs OpenAFIS |"
echo "|---|---|---|"
awk -v oa="$best_openafis" -v r="$best_lssr" -v l="$best_lss" 'BEGIN{
  printf "| OpenAFIS one-many (%s) | %.0f | 1.00x |\n", "scalar build", oa;
  printf "| Tessera LSS-R | %.0f | %.2fx |\n", r, (oa > 0 ? r / oa : 0);
  printf "| Tessera LSS | %.0f | %.2fx |\n", l, (oa > 0 ? l / oa : 0);
}'

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
# core (taskset -c CORE, default 0), alternating ROUNDS times; the tables
# give the median and the best round of each (the machine may be shared).
# Two pair sets, each run by both programs (a match costs more the more
# minutiae its probe has, so only the same pairs compare):
#  1. one-many: OpenAFIS's own 1:N test, probe PROBE (default DB1_B/101_2,
#     16 minutiae; set B averages 32) against the 320 templates loaded
#     LOAD_FACTOR times (default 300: 96,000 candidates); OpenAFIS's fp/s
#     (best of its 3 passes), ours `fingerprint_cpu_bench --one_many`.
#  2. all pairs: the 80 x 80 ordered pairs of each database, 25,600 in all;
#     OpenAFIS `many-many --path DBn_B` per database (its fp/s from the summed
#     times), ours the bench's per-path LSS-R rates over the same pairs.
# Ours: single-thread LSS-R (probe preparation excluded, as OpenAFIS prepares
# its probe once too) in thread CPU time; OpenAFIS reports wall time
# (compare on an idle core; its thread pool runs on the one pinned core).
# Every CPU path the core runs is timed in each round (LssConstants::cpu_path;
# CPU_PATHS=all by default, or e.g. CPU_PATHS=auto,scalar-popcnt), one row per
# path, the automatic choice marked.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-3}"
CORE="${CORE:-0}"
LOAD_FACTOR="${LOAD_FACTOR:-300}"
PROBE="${PROBE:-DB1_B/101_2}"
CPU_PATHS="${CPU_PATHS:-all}"
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

# One line per round and measurement: "ROUND SET WHO RATE" (RATE in matches/s).
ROWS="$(mktemp)"
RUNDIR="$(mktemp -d)"  # many-many writes a CSV of its scores into the working directory
trap 'rm -rf "$ROWS" "$RUNDIR"' EXIT
auto_label="?"
for round in $(seq 1 "$ROUNDS"); do
  # 1. one-many: OpenAFIS (best of its three passes), then ours on the same pairs.
  oa=$(cd "$RUNDIR" && taskset -c "$CORE" "$CLI" one-many --f1 "$PROBE.iso" --load-factor "$LOAD_FACTOR" --path "$DATA" 2>&1 |
       sed -n 's/.*Completed in [0-9]*ms (\([0-9.]*\) fp\/s).*/\1/p' | sort -g | tail -1)
  echo "$round one-many OpenAFIS ${oa:-0}" >> "$ROWS"
  out=$(taskset -c "$CORE" "$OURS" --reps=1 --one_many="$PROBE" --load_factor="$LOAD_FACTOR" --cpu_paths="$CPU_PATHS" \
        --data="$(dirname "$DATA")" 2>&1)
  # "one-many PATH: probe ... LSS-R X K matches/s per core"
  echo "$out" | sed -n 's/^one-many \([a-z0-9=-]*\): .* LSS-R \([0-9.]*\) K matches\/s per core/\1 \2/p' |
    awk -v r="$round" '{ printf "%s one-many %s %.0f\n", r, $1, $2 * 1000 }' >> "$ROWS"
  # 2. all pairs: OpenAFIS many-many per database (summed times), then ours.
  total_ms=0
  for db in DB1_B DB2_B DB3_B DB4_B; do
    ms=$(cd "$RUNDIR" && taskset -c "$CORE" "$CLI" many-many --path "$DATA/$db" 2>&1 |
         sed -n 's/.*Completed in \([0-9]*\)ms.*/\1/p' | head -1)
    total_ms=$((total_ms + ${ms:-0}))
  done
  awk -v r="$round" -v ms="$total_ms" 'BEGIN { printf "%s all-pairs OpenAFIS %.0f\n", r, (ms > 0 ? 25600 / ms * 1000 : 0) }' >> "$ROWS"
  out=$(taskset -c "$CORE" "$OURS" --reps=1 --threads=1 --cpu_paths="$CPU_PATHS" --data="$(dirname "$DATA")" 2>&1)
  auto_label=$(echo "$out" | sed -n 's/.*(default constants: \([a-z0-9-]*\)).*/\1/p' | head -1)
  # "path NAME: LSS-R X K matches/s per core, LSS Y K per core"
  rates=$(echo "$out" | sed -n 's/^path \([a-z0-9=-]*\): LSS-R \([0-9.]*\) K matches\/s per core, LSS \([0-9.]*\) K per core/\1 \2 \3/p')
  [ -n "$rates" ] || { echo "round $round: no 'path' lines from $OURS:" >&2; echo "$out" | tail -5 >&2; exit 1; }
  echo "$rates" | awk -v r="$round" '{ printf "%s all-pairs %s %.0f\n%s all-pairs-LSS %s %.0f\n", r, $1, $2 * 1000, r, $1, $3 * 1000 }' >> "$ROWS"
  echo "round $round:" $(awk -v r="$round" '$1 == r { printf "%s %s %s; ", $2, $3, $4 }' "$ROWS") >&2
done
echo
echo "Same core ($CORE), FVC2002 DB1-DB4 set B, $ROUNDS alternating rounds ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
echo "CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1); automatic path: ${auto_label:-?}"
echo
echo "Ours: matches per second of thread CPU time; OpenAFIS: its own fp/s (wall time), so on a loaded machine the"
echo "ratios flatter ours. Ratio columns: ours / OpenAFIS of the same pair set, median (best) over the rounds."
echo
echo "| pair set | matcher | CPU path | median matches/s | best | vs OpenAFIS, median | vs OpenAFIS, best |"
echo "|---|---|---|---:|---:|---:|---:|"
# Median and best per (set, who); the ratios against OpenAFIS of the same set.
awk -v auto="${auto_label:-}" '
  { key = $2 SUBSEP $3; v[key, ++n[key]] = $4; if (!(key in order)) { order[key] = ++k; keys[k] = key } }
  function median(key,   i, j, t, m, a) {
    m = n[key]; for (i = 1; i <= m; ++i) a[i] = v[key, i]
    for (i = 2; i <= m; ++i) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; --j) a[j + 1] = a[j]; a[j + 1] = t }
    return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
  }
  function best(key,   i, b) { b = 0; for (i = 1; i <= n[key]; ++i) if (v[key, i] > b) b = v[key, i]; return b }
  END {
    for (i = 1; i <= k; ++i) { split(keys[i], p, SUBSEP); med[keys[i]] = median(keys[i]); bst[keys[i]] = best(keys[i]) }
    for (i = 1; i <= k; ++i) {
      split(keys[i], p, SUBSEP); set = p[1]; who = p[2]
      base = (set == "all-pairs-LSS") ? "all-pairs" : set
      oa = base SUBSEP "OpenAFIS"
      if (who == "OpenAFIS") { printf "| %s | OpenAFIS | (its build) | %.0f | %.0f | 1.00x | 1.00x |\n", set, med[keys[i]], bst[keys[i]]; continue }
      tag = (who == auto || who == "auto=" auto) ? " (auto)" : ""
      printf "| %s | Tessera %s | %s%s | %.0f | %.0f | %.2fx | %.2fx |\n", set, (set == "all-pairs-LSS" ? "LSS" : "LSS-R"),
             who, tag, med[keys[i]], bst[keys[i]], (med[oa] > 0 ? med[keys[i]] / med[oa] : 0), (bst[oa] > 0 ? bst[keys[i]] / bst[oa] : 0)
    }
  }' "$ROWS"

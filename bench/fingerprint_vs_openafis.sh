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
# wall time: compare on an idle core), on every CPU path the core runs
# (LssConstants::cpu_path; CPU_PATHS=all by default, or e.g.
# CPU_PATHS=auto,scalar-popcnt), all paths timed within each round: the table
# has one row per path, the automatic choice marked, so one run compares
# the paths with each other and with OpenAFIS.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-3}"
CORE="${CORE:-0}"
LOAD_FACTOR="${LOAD_FACTOR:-300}"
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

# Best rate per path over the rounds: "PATH LSSR LSS" lines in $BEST.
BEST="$(mktemp)"
trap 'rm -f "$BEST"' EXIT
best_openafis=0 auto_label="?"
for round in $(seq 1 "$ROUNDS"); do
  # OpenAFIS: best of its three passes.
  oa=$(taskset -c "$CORE" "$CLI" one-many --f1 DB1_B/101_2.iso --load-factor "$LOAD_FACTOR" --path "$DATA" 2>&1 |
       sed -n 's/.*Completed in [0-9]*ms (\([0-9.]*\) fp\/s).*/\1/p' | sort -g | tail -1)
  out=$(taskset -c "$CORE" "$OURS" --reps=1 --threads=1 --cpu_paths="$CPU_PATHS" --data="$(dirname "$DATA")" 2>&1)
  auto_label=$(echo "$out" | sed -n 's/.*(default constants: \([a-z0-9-]*\)).*/\1/p' | head -1)
  # "path NAME: LSS-R X K matches/s per core, LSS Y K per core"
  rates=$(echo "$out" | sed -n 's/^path \([a-z0-9=-]*\): LSS-R \([0-9.]*\) K matches\/s per core, LSS \([0-9.]*\) K per core/\1 \2 \3/p')
  [ -n "$rates" ] || { echo "round $round: no 'path' lines from $OURS:" >&2; echo "$out" | tail -5 >&2; exit 1; }
  echo "round $round: OpenAFIS ${oa:-?} fp/s;" $(echo "$rates" | awk '{printf "%s LSS-R %s K/s, LSS %s K/s; ", $1, $2, $3}') >&2
  best_openafis=$(awk -v a="$best_openafis" -v b="${oa:-0}" 'BEGIN{print (b>a)?b:a}')
  { cat "$BEST"; echo "$rates"; } |
    awk '{ if (!($1 in r) || $2 > r[$1]) r[$1] = $2; if (!($1 in l) || $3 > l[$1]) l[$1] = $3; if (!($1 in o)) o[$1] = n++ }
         END { for (p in o) print o[p], p, r[p], l[p] }' | sort -n | cut -d' ' -f2- > "$BEST.new"
  mv "$BEST.new" "$BEST"
done
echo
echo "Same core ($CORE), FVC2002 DB1-DB4 set B, best of $ROUNDS alternating rounds ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
echo "CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1); automatic path: ${auto_label:-?}"
echo
echo "Ours: matches per second of thread CPU time, every CPU path timed in each round; OpenAFIS: its own fp/s (wall"
echo "time), so on a loaded machine the ratios flatter ours."
echo
echo "| matcher | CPU path | matches/s on one core | vs OpenAFIS |"
echo "|---|---|---:|---:|"
awk -v oa="$best_openafis" -v auto="${auto_label:-}" '
  BEGIN { printf "| OpenAFIS one-many | (scalar build) | %.0f | 1.00x |\n", oa }
  { name[NR] = $1; r[NR] = $2 * 1000; l[NR] = $3 * 1000; if (r[NR] > best) best = r[NR] }
  END {
    for (i = 1; i <= NR; ++i) {
      tag = (name[i] == auto || name[i] == "auto=" auto) ? " (auto)" : "";
      fmt = (r[i] == best) ? "| Tessera LSS-R | %s%s | **%.0f** | **%.2fx** |\n" : "| Tessera LSS-R | %s%s | %.0f | %.2fx |\n";
      printf fmt, name[i], tag, r[i], (oa > 0 ? r[i] / oa : 0);
    }
    for (i = 1; i <= NR; ++i) printf "| Tessera LSS | %s | %.0f | %.2fx |\n", name[i], l[i], (oa > 0 ? l[i] / oa : 0);
  }' "$BEST"

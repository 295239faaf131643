#!/usr/bin/env bash
# Time to held-out QE, our CPU SOM against somoclu, side by side in one run
# (issue 16). somoclu is built OUTSIDE the repository from its sources
# (github.com/peterwittek/somoclu, src/*.cpp, MIT) with its own configure flags
# (-O3 -ffast-math -march=native -fopenmp; no MPI, CUDA, R or Python), then
# bench/som_vs_somoclu trains both on the same genes x GO split and prints the
# markdown table.
#   bench/som_vs_somoclu.sh [som_vs_somoclu flags, e.g. --edges=16,32,64 --epochs=3,10,conv]
# Environment:
#   SOMOCLU_SRC   somoclu's src/ directory (default /tmp/somoclu/src)
#   SOMOCLU_BIN   the binary to use or build (default /tmp/somoclu/somoclu)
#   THREADS       threads for both (default 2)
# The corpus comes from ~/.cache/tessera/som_data (tools/som_data/build_go_corpora.sh,
# or the first `tessera som train`).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SOMOCLU_SRC="${SOMOCLU_SRC:-/tmp/somoclu/src}"
SOMOCLU_BIN="${SOMOCLU_BIN:-/tmp/somoclu/somoclu}"
THREADS="${THREADS:-2}"

case "$(cd "$(dirname "$SOMOCLU_BIN")" 2>/dev/null && pwd)/" in
  "$ROOT"/*) echo "som_vs_somoclu.sh: build somoclu outside the repository (SOMOCLU_BIN=$SOMOCLU_BIN)" >&2; exit 2 ;;
esac
if [ ! -x "$SOMOCLU_BIN" ]; then
  if [ ! -f "$SOMOCLU_SRC/sparseCpuKernels.cpp" ]; then
    echo "som_vs_somoclu.sh: no somoclu sources in $SOMOCLU_SRC (clone github.com/peterwittek/somoclu outside" \
         "the repository and set SOMOCLU_SRC to its src/)" >&2
    exit 2
  fi
  mkdir -p "$(dirname "$SOMOCLU_BIN")"
  echo "building somoclu from $SOMOCLU_SRC into $SOMOCLU_BIN" >&2
  (cd "$SOMOCLU_SRC" && g++ -O3 -ffast-math -march=native -fopenmp -fPIC -I. \
     denseCpuKernels.cpp io.cpp mapDistanceFunctions.cpp somoclu.cpp sparseCpuKernels.cpp training.cpp uMatrix.cpp \
     -o "$SOMOCLU_BIN")
fi

cd "$ROOT"
bazel build //bench:som_vs_somoclu >&2
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# somoclu: $SOMOCLU_BIN; command: bench/som_vs_somoclu.sh $*"
bazel-bin/bench/som_vs_somoclu --somoclu="$SOMOCLU_BIN" --threads="$THREADS" "$@"
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

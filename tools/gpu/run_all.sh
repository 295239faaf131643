#!/usr/bin/env bash
# On the GPU machine: runs every gathered GPU test, then every benchmark,
# writing one log per binary (and GoogleTest XML) into LOGDIR, a summary to
# LOGDIR/summary.txt and all of it as LOGDIR/logs.tar.gz.
#   .gpu/run_all.sh LOGDIR [filter-regex]
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOGDIR="${1:?usage: run_all.sh LOGDIR [filter]}"
FILTER="${2:-.}"
mkdir -p "$LOGDIR"
export LD_LIBRARY_PATH="$HERE/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
if [ -d "$HERE/data" ] && [ ! -f /usr/share/mricron/templates/ch2.nii.gz ]; then
  mkdir -p /usr/share/mricron/templates && cp "$HERE"/data/*.nii.gz /usr/share/mricron/templates/ 2>/dev/null
fi
SUMMARY="$LOGDIR/summary.txt"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
} >"$SUMMARY"
status=0
for kind in test bench; do
  for bin in "$HERE"/bin/*_"$kind"; do
    [ -e "$bin" ] || continue
    name="$(basename "$bin")"
    echo "$name" | grep -Eq "$FILTER" || continue
    start=$(date +%s%N)
    if [ "$kind" = test ]; then
      "$bin" --gtest_output="xml:$LOGDIR/$name.xml" >"$LOGDIR/$name.log" 2>&1
    else
      "$bin" >"$LOGDIR/$name.log" 2>&1
    fi
    rc=$?
    secs=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
    line=$(grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$LOGDIR/$name.log" | tr '\n' ' ')
    printf '%-55s rc=%d  %ss  %s\n' "$name" "$rc" "$secs" "$line" | tee -a "$SUMMARY"
    [ $rc -eq 0 ] || status=1
  done
done
tar -C "$LOGDIR" -czf "$LOGDIR/logs.tar.gz" --exclude=logs.tar.gz . 2>/dev/null
exit $status

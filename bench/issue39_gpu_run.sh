#!/usr/bin/env bash
# Issue 39 part 2 on one GPU: the bit-identity tests and the CLI cases
# (tessera register --shards 1..4 --device cuda), old and new binaries side
# by side. Usage on the GPU machine, from the repository root:
#   bench/issue39_gpu_run.sh DIR OUT
# DIR: bin/ (test binaries, tessera, old/tessera.xz), lib/, data/ (mricron
# ch2, aal), cases/<case>/ (made here by registration_cases make).
set -u
D=$1; OUT=$2
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
mkdir -p /usr/share/mricron/templates && cp -n "$D"/data/*.nii.gz /usr/share/mricron/templates/ 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/summary.txt"
T=$OUT/tests.log; : > "$T"
for t in "$D"/bin/*_test; do
  echo "=== $t" >> "$T"
  timeout 240 "$t" --gtest_filter="${FILTER:-*}" >> "$T" 2>&1
  echo "$(basename "$t") rc=$? $(grep -cE '^\[       OK' "$T") ok so far; failed: $(grep -E '^\[  FAILED  \] [A-Za-z]' "$T" | sort -u | wc -l)" | tee -a "$OUT/summary.txt"
done
xz -dc "$D/old/tessera.xz" > /tmp/tessera_old && chmod +x /tmp/tessera_old
C=$OUT/cli.log; : > "$C"
run() {  # binary tag case metric shards
  local bin=$1 tag=$2 c=$3 m=$4 s=$5 dir=$D/cases/$3 out=/tmp/o_$2_$3_$4_$5
  rm -rf "$out"
  local t0=$(date +%s%N)
  "$bin" register --fixed "$dir/fixed.nii.gz" --moving "$dir/moving.nii.gz" --fixed-labels "$dir/fixed_labels.nii.gz" \
    --moving-labels "$dir/moving_labels.nii.gz" --metric "$m" --scales 2,1 --precision full --shards "$s" \
    --device cuda --out "$out" > "$out.log" 2>&1
  local rc=$? t1=$(date +%s%N)
  local w=$(sha256sum "$out/warped.nii.gz" 2>/dev/null | cut -c1-16) f=$(sha256sum "$out/0Warp.nii.gz" 2>/dev/null | cut -c1-16)
  echo "$tag $c $m shards=$s rc=$rc warped=$w warp=$f wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')" | tee -a "$OUT/summary.txt"
  { echo "=== $tag $c $m $s"; grep '^{' "$out.log" | tail -1; } >> "$C"
}
for tag in new old; do
  bin=$D/bin/tessera; [ $tag = old ] && bin=/tmp/tessera_old
  for s in 1 2 3 4; do
    run "$bin" $tag same_modality_gamma lncc $s
    run "$bin" $tag same_modality_gamma mse $s
    run "$bin" $tag ch2bet_t2like mi $s
  done
done

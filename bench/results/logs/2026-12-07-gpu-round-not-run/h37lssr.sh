# targets: //kernels/fingerprint:lss_multi_cuda_test //kernels/fingerprint:lss_cuda_test //bench:fingerprint_multi_latent_bench
# h37lssr (issue 37 item 4, LSS-R matches/s): (1) parity tests: every new option (sparse rho, count roots, many small
# blocks) bit-identical to the CPU; (2) the multi-latent bench at 10^6 templates x 16 latents, today's single-latent
# launches (baseline, same process) vs per-latent launches with the new options ("sets+...") and one multi-latent
# launch with them ("multi+..."; +sparse sparse rho, +roots count roots, +skip skipped MMA products, +pick
# register picks, +balN N templates per warp), plus the step clock; (3) 10^5 x 64 latents (batch-sized) for the same variants.
set -u
OUT="${OUT_DIR:?OUT_DIR not set}"
export TESSERA_FINGERPRINT_DATA="$PWD/data/fingerprint"
[ -d "$TESSERA_FINGERPRINT_DATA/fvc2002" ] || { echo "no $TESSERA_FINGERPRINT_DATA/fvc2002: synthetic templates" > "$OUT/data_missing.txt"; unset TESSERA_FINGERPRINT_DATA; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s); BUDGET=145
date -u > "$OUT/start.txt"
run() {  # name max_seconds cmd... (capped by what is left of the budget)
  local name=$1 t=$2; shift 2
  local left=$(( BUDGET - ($(date +%s) - T0) ))
  [ "$left" -lt "$t" ] && t=$left
  if [ "$t" -lt 5 ]; then echo "$name: skipped (budget)" >> "$OUT/summary.txt"; return; fi
  local t1=$(date +%s)
  timeout "$t" "$@" > "$OUT/$name.log" 2>&1
  echo "rc=$? wall=$(( $(date +%s) - t1 ))s cap=${t}s" >> "$OUT/$name.log"
  tail -1 "$OUT/$name.log" | sed "s/^/$name: /" >> "$OUT/summary.txt"
}
V="sets,sets+sparse,sets+roots,sets+skip,sets+sparse+pick,sets+sparse+pick+skip,sets+sparse+roots+pick+skip"
V="$V,sets+sparse+pick+skip+bal16,multi,multi+bal16,multi+bal4,multi+bal64,multi+sparse+pick+skip"
V="$V,multi+sparse+pick+skip+bal16,multi+sparse+roots+pick+skip+bal16,multi+sparse+pick+skip+bal4"
run lss_multi_cuda_test 25 bin/kernels_fingerprint__lss_multi_cuda_test
run lss_cuda_test 15 bin/kernels_fingerprint__lss_cuda_test
run multi_latent_1e6x16 75 bin/bench__fingerprint_multi_latent_bench --templates=1000000 --latents=16 \
    --repeats=2 --kinds=lssr --step_clock_latents=16 --cpu_check=1000 --variants="$V"
run multi_latent_1e5x64 25 bin/bench__fingerprint_multi_latent_bench --templates=100000 --latents=64 \
    --repeats=2 --kinds=lssr --step_clock_latents=0 --cpu_check=500 --variants="$V"
date -u > "$OUT/end.txt"

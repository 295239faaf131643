# targets: //kernels/fingerprint:lss_multi_cuda_test //kernels/fingerprint:lss_cuda_test //services/fingerprint/search:alfi_pipeline_cuda_test //services/fingerprint/search:searcher_cuda_test //bench:fingerprint_multi_latent_bench
# h37lssr (issue 37 item 4, LSS-R >= 80 M matches/s at 10^6 x 16 latents), code as of b78d748 + 9c0bfd5 + 0c4a797 (compact_lambda)
# commit: (1) parity tests: the cleaned-up kernel (losers deleted, register picks always on, templates_per_warp 4 by
# default) and the new options compact_rho / compact_lambda (every set) bit-identical to the CPU; the service path (ALFI pipeline / searcher, now multi-latent with the
# new defaults) GPU == CPU; (2) the multi-latent bench at 10^6 templates x 16 latents: single-latent launches
# (baseline, same process) vs the new default ("multi" = bal4), one wave (bal0), other balances, +compact
# (compact rho), +lam (compact lambda), per-latent launches ("sets") with them; step clock plain vs both;
# (3) 10^5 x 64 latents.
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
V="multi,multi+bal0,multi+bal2,multi+bal8,multi+compact,multi+lam,multi+compact+lam,multi+compact+lam+bal2"
V="$V,multi+compact+lam+bal8,sets,sets+compact+lam,sets+bal0+compact+lam"
run lss_multi_cuda_test 15 bin/kernels_fingerprint__lss_multi_cuda_test
run lss_cuda_test 12 bin/kernels_fingerprint__lss_cuda_test
run alfi_pipeline_cuda_test 12 bin/services_fingerprint_search__alfi_pipeline_cuda_test
run searcher_cuda_test 12 bin/services_fingerprint_search__searcher_cuda_test
run multi_latent_1e6x16 70 bin/bench__fingerprint_multi_latent_bench --templates=1000000 --latents=16 \
    --repeats=2 --kinds=lssr --step_clock_latents=16 --cpu_check=1000 --variants="$V"
run multi_latent_1e5x64 20 bin/bench__fingerprint_multi_latent_bench --templates=100000 --latents=64 \
    --repeats=2 --kinds=lssr --step_clock_latents=0 --cpu_check=500 --variants="multi,multi+bal0,multi+compact,multi+lam,multi+compact+lam"
date -u > "$OUT/end.txt"

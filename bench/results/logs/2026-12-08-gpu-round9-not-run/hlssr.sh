# targets: //kernels/fingerprint:lss_multi_cuda_test //kernels/fingerprint:lss_cuda_test //services/fingerprint/search:alfi_pipeline_cuda_test //services/fingerprint/search:searcher_cuda_test //bench:fingerprint_multi_latent_bench
# hlssr (issue 37 item 4, LSS-R >= 80 M matches/s at 10^6 x 16 latents), round 8: compact rho is now the only rho
# path of kWarpMma (selections <= 32; the dense loop stays for kBlock and p > 32), compact lambda deleted.
# (1) parity: the four LSS CUDA tests (every remaining path == CPU bit for bit: 4 launch shapes x step clock on/off x
# 3 scratch sizes; single-latent kWarpMma and kBlock); (2) templates_per_warp with compact rho, side by side in one
# process: single x L (baseline), multi (default bal4), bal2, bal3, bal8, and multi+bal4 again last (= multi: the
# run's noise), at 10^6 x 16 (step clock of the default) and 10^5 x 64.
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
V="multi,multi+bal2,multi+bal3,multi+bal8,multi+bal4"
run lss_multi_cuda_test 15 bin/kernels_fingerprint__lss_multi_cuda_test
run lss_cuda_test 12 bin/kernels_fingerprint__lss_cuda_test
run alfi_pipeline_cuda_test 12 bin/services_fingerprint_search__alfi_pipeline_cuda_test
run searcher_cuda_test 12 bin/services_fingerprint_search__searcher_cuda_test
run multi_latent_1e6x16 65 bin/bench__fingerprint_multi_latent_bench --templates=1000000 --latents=16 \
    --repeats=3 --kinds=lssr --step_clock_latents=16 --cpu_check=1000 --variants="$V"
run multi_latent_1e5x64 25 bin/bench__fingerprint_multi_latent_bench --templates=100000 --latents=64 \
    --repeats=3 --kinds=lssr --step_clock_latents=0 --cpu_check=500 --variants="$V"
date -u > "$OUT/end.txt"

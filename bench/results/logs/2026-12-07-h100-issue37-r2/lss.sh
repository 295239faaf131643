# targets: //kernels/fingerprint:lss_multi_cuda_test //kernels/fingerprint:lss_cuda_test //services/fingerprint/search:searcher_cuda_test //services/fingerprint/search:alfi_pipeline_cuda_test //bench:fingerprint_multi_latent_bench //bench:fingerprint_batching_bench
# lss (issue 37 item 4), the one GPU run: (1) parity tests of the multi-latent kernel, the refactored single-latent
# kernel and the service path now wired to it (searcher / ALFI pipeline GPU == CPU); (2) the kernel variants side by
# side at 10^6 templates x 16 latents (single x 16 launches vs one multi-latent launch, each option, all options;
# step-clock breakdown); (3) the batching bench at 10^6 templates, 64 clients (bulk set-up, cylinders on the GPU).
# (3) is last and may be cut by the 145 s budget: its per-row lines print as they finish.
set -u
OUT="${OUT_DIR:?OUT_DIR not set}"
export TESSERA_FINGERPRINT_DATA="$PWD/data/fingerprint"
[ -d "$TESSERA_FINGERPRINT_DATA/fvc2002" ] || { echo "no $TESSERA_FINGERPRINT_DATA/fvc2002: synthetic templates" > "$OUT/data_missing.txt"; unset TESSERA_FINGERPRINT_DATA; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
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
run lss_multi_cuda_test 12 bin/kernels_fingerprint__lss_multi_cuda_test
run lss_cuda_test 10 bin/kernels_fingerprint__lss_cuda_test
run searcher_cuda_test 10 bin/services_fingerprint_search__searcher_cuda_test
run alfi_pipeline_cuda_test 10 bin/services_fingerprint_search__alfi_pipeline_cuda_test
run multi_latent_bench_1e6 45 bin/bench__fingerprint_multi_latent_bench --templates=1000000 --latents=16 \
    --repeats=1 --kinds=lssr --step_clock_latents=16 --cpu_check=1000
run batching_bench_1e6 95 bin/bench__fingerprint_batching_bench --gallery=1000000 --clients=64 --seconds=5 \
    --device=cuda --max_queue_delay_ms=0 --setup=bulk
date -u > "$OUT/end.txt"

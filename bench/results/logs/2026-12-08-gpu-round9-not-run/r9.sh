#!/usr/bin/env bash
# Round 9 = round 8 (never ran) + helper hsomg's group bounds + the LNCC dispatcher change, in priority order.
# Each result goes to a file directly under $OUT so a timeout keeps what finished.
set -u
H=$(cd "$(dirname "$0")" && pwd); G=/tmp/g; mkdir -p $G
for p in $H/p*.tar.xz; do m=$G/.done_$(basename $p)_$(stat -c %s $p); [ ! -f $m ] && { xz -dc $p | tar -C $G -xf - ; touch $m; }; done
export LD_LIBRARY_PATH="$G/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
mkdir -p /usr/share/mricron/templates && cp $G/mricron/*.nii.gz /usr/share/mricron/templates/
cd $G
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; } | tee -a $OUT/tests.txt
t() { local f=$1 lim=$2; shift 2; local s=$(date +%s); echo "=== $* (limit ${lim}s)" >> $OUT/$f
  timeout $lim "$@" >> $OUT/$f 2>&1; echo "=== rc=$? $(( $(date +%s) - s ))s" >> $OUT/$f; }
for b in bin/kernels_fingerprint__lss_multi_cuda_test bin/kernels_fingerprint__lss_cuda_test bin/services_fingerprint_search__alfi_pipeline_cuda_test \
         bin/services_fingerprint_search__searcher_cuda_test bin/kernels_som__bmu_cuda_test bin/kernels_som__batch_update_cuda_test \
         bin/kernels_som__group_bounds_cuda_test bin/services_som__trainer_cuda_test \
         bin/kernels_registration__*_test bin/kernels_registration_sharded__*_test bin/kernels_registration_pipeline__*_test; do
  t tests.txt 40 $b; echo "$(basename $b): $(tail -3 $OUT/tests.txt | grep -E '^\[  (PASSED|FAILED) |rc=' | tr '\n' ' ')" >> $OUT/summary.txt; done
mkdir -p $OUT/hsomg; OUT_DIR=$OUT/hsomg timeout 150 bash $H/ready/hsomg.sh > $OUT/hsomg/stdout.txt 2>&1
t lss.txt 70 bin/bench__fingerprint_multi_latent_bench --templates=1000000 --latents=16 --repeats=3 --kinds=lssr \
  --step_clock_latents=16 --cpu_check=1000 --variants=multi,multi+bal2,multi+bal3,multi+bal8,multi+bal4
t reg.txt 40 bin/bench__lncc_variants_bench --sizes=512 --reps=20 "--variants=defaults float,defaults mixed,defaults no s16 mixed"
t reg.txt 30 bin/bench__registration_roofline_bench --size=512 --part=iteration --iterations=6 --iteration_sets=shipped
t som.txt 60 bin/bench__som_gpu_bench --no_bmu --train_edge=64 --max_docs=1000 --train_variants=device-quality:w32,device-quality
t reg.txt 70 bin/bench__registration_roofline_bench --size=1024 --part=iteration --iterations=3 --iteration_sets=shipped
date -u >> $OUT/tests.txt

#!/usr/bin/env bash
# Round 8 in priority order, each result appended to a file directly under $OUT (so a timeout keeps what finished):
# tests.txt (LSS, SOM, registration pipeline GPU tests), lss.txt, som.txt, reg.txt.
set -u
H=$(cd "$(dirname "$0")" && pwd); G=/tmp/g; mkdir -p $G
for p in $H/p*.tar.xz; do m=$G/.done_$(basename $p)_$(stat -c %s $p); [ ! -f $m ] && { xz -dc $p | tar -C $G -xf - ; touch $m; }; done
export LD_LIBRARY_PATH="$G/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
mkdir -p /usr/share/mricron/templates && cp $G/mricron/*.nii.gz /usr/share/mricron/templates/
cd $G
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; } | tee -a $OUT/tests.txt
t() { local f=$1 lim=$2; shift 2; local s=$(date +%s); echo "=== $* (limit ${lim}s)" >> $OUT/$f
  timeout $lim "$@" >> $OUT/$f 2>&1; echo "=== rc=$? $(( $(date +%s) - s ))s" >> $OUT/$f; }
for b in kernels_fingerprint__lss_multi_cuda_test kernels_fingerprint__lss_cuda_test services_fingerprint_search__alfi_pipeline_cuda_test \
         services_fingerprint_search__searcher_cuda_test kernels_som__bmu_cuda_test kernels_som__batch_update_cuda_test \
         services_som__trainer_cuda_test kernels_registration_pipeline__apply_transforms_cuda_test \
         kernels_registration_pipeline__bounded_run_gpu_test kernels_registration_pipeline__out_of_core_stage_gpu_test \
         kernels_registration_pipeline__sharded_deformable_stage_gpu_test; do
  t tests.txt 40 bin/$b; grep -E '^\[  (PASSED|FAILED) ' <(tail -40 $OUT/tests.txt) | tail -2 | sed "s/^/$b: /"; done
t lss.txt 70 bin/bench__fingerprint_multi_latent_bench --templates=1000000 --latents=16 --repeats=3 --kinds=lssr \
  --step_clock_latents=16 --cpu_check=1000 --variants=multi,multi+bal2,multi+bal3,multi+bal8,multi+bal4
t som.txt 80 bin/bench__som_gpu_bench --no_bmu --train_edge=64 --max_docs=1000 --train_variants=device-quality,device-quality:w32,device-quality
t reg.txt 40 bin/bench__lncc_variants_bench --sizes=512 --reps=20 "--variants=defaults float,defaults mixed,defaults no s16 mixed"
t reg.txt 30 bin/bench__registration_roofline_bench --size=512 --part=iteration --iterations=6 --iteration_sets=shipped
date -u >> $OUT/tests.txt

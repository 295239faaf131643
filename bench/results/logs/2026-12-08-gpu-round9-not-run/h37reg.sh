# targets: //kernels/registration:lncc_cuda_test //kernels/registration:lean_smooth_test //kernels/registration:lean_compose_test //kernels/registration:mixed_precision_cuda_test //kernels/registration:masked_metrics_cuda_test //kernels/registration/sharded:sharded_ops_gpu_test //kernels/registration/pipeline:bounded_run_gpu_test //kernels/registration/pipeline:out_of_core_stage_gpu_test //bench:lncc_variants_bench //bench:registration_roofline_bench
# helper h37reg (issue 37, registration kernels), round 7 (20:15): the round-6 winners flipped and the losers deleted.
# LNCC: approximate reciprocal always in the float epilogue; z pairs only with cuda_stage16 (mixed, nx % 8 == 0);
# padded 16-bit rows and the paired/zp/rcp options gone. Smoothing: the march's mirrored ring always.
# 1. GPU tests (every LNCC variant vs the CPU; same bits for staging and paired 16-bit access; slab bits;
#    smoothing tunings bit for bit; compose; mixed precision; masks; sharded ops).
#    LeanStageDeviceBytes now counts the compose slabs: bounded_run_gpu_test, out_of_core_stage_gpu_test.
# 2. LNCC w7 512^3 fwd+bwd, new defaults (float, mixed; the box march baselines are added by the bench),
#    plus the fallbacks round 6 also timed (no al float 3.572, no s16 mixed 3.619, no s16 no al mixed 4.008 ms):
#    now with the branch-free rcp epilogue (and no z pairs off the 16-bit cp.async path).
# 3. Greedy iteration 512^3 (2026-12-06 kernels vs shipped), then 1024^3 (goal 130 ms on an H200).
set -u
O="${OUT_DIR:?}"
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$O/gpu.txt" 2>&1
run() {  # run NAME TIMEOUT_S CMD...: stdout+stderr to $O/NAME.txt, then rc and seconds
  local name=$1 limit=$2 start=$(date +%s)
  shift 2
  timeout "$limit" "$@" > "$O/$name.txt" 2>&1
  echo "rc=$? seconds=$(( $(date +%s) - start ))" >> "$O/$name.txt"
}
run lncc_cuda_test 25 bin/kernels_registration__lncc_cuda_test
run lean_smooth_test 8 bin/kernels_registration__lean_smooth_test
run lean_compose_test 8 bin/kernels_registration__lean_compose_test
run mixed_precision_cuda_test 8 bin/kernels_registration__mixed_precision_cuda_test
run masked_metrics_cuda_test 8 bin/kernels_registration__masked_metrics_cuda_test
run sharded_ops_gpu_test 12 bin/kernels_registration_sharded__sharded_ops_gpu_test
run bounded_run_gpu_test 10 bin/kernels_registration_pipeline__bounded_run_gpu_test
run out_of_core_stage_gpu_test 10 bin/kernels_registration_pipeline__out_of_core_stage_gpu_test
run lncc_variants_bench_512 40 bin/bench__lncc_variants_bench --sizes=512 --reps=20 "--variants=defaults float,defaults no al float,defaults mixed,defaults no s16 mixed,defaults no s16 no al mixed"
run iteration_512 30 bin/bench__registration_roofline_bench --size=512 --part=iteration --iterations=6 --iteration_sets=shipped
LEFT=$(( 148 - ($(date +%s) - T0) ))
if [ "$LEFT" -gt 20 ]; then
  run iteration_1024 "$LEFT" bin/bench__registration_roofline_bench --size=1024 --part=iteration --iterations=3 --iteration_sets=shipped
else
  echo "skipped: ${LEFT}s left" > "$O/iteration_1024.txt"
fi
echo "total $(( $(date +%s) - T0 ))s" > "$O/total.txt"

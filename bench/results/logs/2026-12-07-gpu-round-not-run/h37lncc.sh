# targets: //bench:lncc_variants_bench //kernels/registration:lncc_cuda_test //kernels/registration:mixed_precision_cuda_test //kernels/registration:masked_metrics_cuda_test //kernels/registration/sharded:sharded_ops_gpu_test
# h37lncc (issue 37 item 1), round 2: LNCC w7 512^3 with the new defaults (8a2e0fb: cuda_aligned_rows + cuda_stage16 on)
# side by side with: zp = cuda_z_pairs, rcp = cuda_approx_reciprocal (forward epilogue rcp.approx), pad =
# cuda_stage16_padded (16-bit rows 96 apart), and the defaults with one option off (no al / no s16 / no fepi / no async
# / no ps / no paired). Tests first (every variant vs the CPU reference; slab bits; paired / staging same bits).
# Then the key variants again with 20 reps (noise).
set -u
O=$OUT_DIR
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $O/gpu.txt 2>&1
timeout 30 bin/kernels_registration__lncc_cuda_test > $O/lncc_cuda_test.txt 2>&1; echo "rc=$?" >> $O/lncc_cuda_test.txt
timeout 8 bin/kernels_registration__mixed_precision_cuda_test > $O/mixed_precision_cuda_test.txt 2>&1; echo "rc=$?" >> $O/mixed_precision_cuda_test.txt
timeout 6 bin/kernels_registration__masked_metrics_cuda_test --gtest_filter='*Lncc*' > $O/masked_metrics_cuda_test.txt 2>&1; echo "rc=$?" >> $O/masked_metrics_cuda_test.txt
timeout 6 bin/kernels_registration_sharded__sharded_ops_gpu_test --gtest_filter='*Lncc*:*lncc*' > $O/sharded_ops_gpu_test.txt 2>&1; echo "rc=$?" >> $O/sharded_ops_gpu_test.txt
M="defaults mixed,defaults zp mixed,defaults rcp mixed,defaults zp rcp mixed,defaults pad mixed,defaults pad zp mixed,defaults no s16 mixed,defaults no s16 no al mixed,defaults no ps mixed,defaults no paired mixed,defaults no fepi mixed,defaults no async mixed"
timeout 35 bin/bench__lncc_variants_bench --sizes=512 --reps=10 "--variants=$M" > $O/lncc_variants_bench_mixed.txt 2>&1; echo "rc=$?" >> $O/lncc_variants_bench_mixed.txt
F="defaults float,defaults zp float,defaults rcp float,defaults zp rcp float,defaults no al float,defaults no fepi float,defaults no async float"
timeout 30 bin/bench__lncc_variants_bench --sizes=512 --reps=10 "--variants=$F" > $O/lncc_variants_bench_float.txt 2>&1; echo "rc=$?" >> $O/lncc_variants_bench_float.txt
R="defaults zp rcp mixed,defaults rcp mixed,defaults zp mixed,defaults pad mixed,defaults rcp float,defaults zp float"
timeout 30 bin/bench__lncc_variants_bench --sizes=512 --reps=20 "--variants=$R" > $O/lncc_variants_bench_repeat.txt 2>&1; echo "rc=$?" >> $O/lncc_variants_bench_repeat.txt

# targets: //bench:lncc_variants_bench //kernels/registration:lncc_cuda_test //kernels/registration:mixed_precision_cuda_test //kernels/registration/sharded:sharded_ops_gpu_test //kernels/registration:masked_metrics_cuda_test //kernels/registration/pipeline:out_of_core_stage_gpu_test
# LNCC kernel variants (issue 37 item 1): side-by-side bench (box march baseline, column march variants,
# float and mixed storage, copy reference) and the CUDA parity/bit-identity tests.
set -u
O=$OUT_DIR
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $O/gpu.txt 2>&1
timeout 40 bin/kernels_registration__lncc_cuda_test > $O/lncc_cuda_test.txt 2>&1; echo "rc=$?" >> $O/lncc_cuda_test.txt
timeout 20 bin/kernels_registration__mixed_precision_cuda_test > $O/mixed_precision_cuda_test.txt 2>&1; echo "rc=$?" >> $O/mixed_precision_cuda_test.txt
timeout 30 bin/kernels_registration_sharded__sharded_ops_gpu_test --gtest_filter='*Lncc*:*lncc*' > $O/sharded_ops_gpu_test.txt 2>&1; echo "rc=$?" >> $O/sharded_ops_gpu_test.txt
timeout 20 bin/kernels_registration__masked_metrics_cuda_test --gtest_filter='*Lncc*' > $O/masked_metrics_cuda_test.txt 2>&1; echo "rc=$?" >> $O/masked_metrics_cuda_test.txt
timeout 30 bin/kernels_registration_pipeline__out_of_core_stage_gpu_test --gtest_filter='*Lncc*' > $O/out_of_core_stage_gpu_test.txt 2>&1; echo "rc=$?" >> $O/out_of_core_stage_gpu_test.txt
timeout 80 bin/bench__lncc_variants_bench --sizes=256,512 --reps=10 > $O/lncc_variants_bench.txt 2>&1; echo "rc=$?" >> $O/lncc_variants_bench.txt

# targets: //bench:som_gpu_bench //kernels/som:bmu_cuda_test //kernels/som:batch_update_cuda_test //services/som:trainer_cuda_test
# helper hsom (issue 37 item 5, SOM 64x64 on 29.9 M documents <= 8 s). HEAD fcd4ad5+:
# - warp_prefetch_documents removed (round 7: no gain) and bounded_bmu_skip deleted (CPU: 0 % skipped): the CUDA
#   tests must still pass bit for bit (bmu_cuda_test 40-rounds form without prefetch; batch update back to its
#   round-7 kernels).
# - w32 alone: round 7 measured 32 warps per block only together with :pre (11.56 vs 11.98 s); here
#   device-quality:w32 between two device-quality runs in the same process (run-order check). The
#   "codebook fnv1a" lines must be equal across the three.
set -u
O="${OUT_DIR:?}"
left() { local t=$((146 - SECONDS)); [ $t -lt 1 ] && t=1; [ $t -lt $1 ] && echo $t || echo $1; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > $O/gpu.txt 2>&1
timeout $(left 20) bin/services_som__trainer_cuda_test > $O/trainer_cuda_test.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/trainer_cuda_test.txt
timeout $(left 10) bin/kernels_som__batch_update_cuda_test > $O/batch_update_cuda_test.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/batch_update_cuda_test.txt
timeout $(left 20) bin/kernels_som__bmu_cuda_test > $O/bmu_cuda_test.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/bmu_cuda_test.txt
timeout $(left 90) bin/bench__som_gpu_bench --no_bmu --train_edge=64 --max_docs=1000 \
  --train_variants=device-quality,device-quality:w32,device-quality > $O/train64.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/train64.txt
echo "total $SECONDS s" > $O/done.txt

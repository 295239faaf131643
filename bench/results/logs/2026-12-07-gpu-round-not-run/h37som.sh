# targets: //bench:som_gpu_bench //kernels/som:bmu_cuda_test //services/som:trainer_cuda_test //kernels/som:staged_copy_cuda_test //kernels/som:batch_update_cuda_test
# helper h37som (issue 37 item 5, SOM 64x64 on 29.9 M documents <= 8 s), re-check of HEAD's defaults (aad4308: exact kernel
# in 24-warp blocks, 32 rounds; staged copies; split batch-update finalize): parity tests (larger blocks, rarest-feature
# order, screened search with 24-warp blocks, bit-equal norms), BMU rows at 64, then the end-to-end 64x64 training side by
# side: the morning's tuning (exact; screened = the morning's 14.09 s run) vs HEAD's default, + rarest-feature order, + screen.
set -u
O="${OUT_DIR:?}"
left() { local t=$((146 - SECONDS)); [ $t -lt 1 ] && t=1; [ $t -lt $1 ] && echo $t || echo $1; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > $O/gpu.txt 2>&1
timeout $(left 25) bin/kernels_som__bmu_cuda_test > $O/bmu_cuda_test.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/bmu_cuda_test.txt
timeout $(left 10) bin/kernels_som__batch_update_cuda_test > $O/batch_update_cuda_test.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/batch_update_cuda_test.txt
timeout $(left 10) bin/kernels_som__staged_copy_cuda_test > $O/staged_copy_cuda_test.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/staged_copy_cuda_test.txt
timeout $(left 15) bin/services_som__trainer_cuda_test > $O/trainer_cuda_test.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/trainer_cuda_test.txt
timeout $(left 10) bin/bench__som_gpu_bench --no_train --issue16 --edges=64 --max_docs=1000000 --reps=3 --cpu_check_docs=200 \
  --span_rows=4:8:512,4:32:512:24,4:32:512:24:2,4:64:512:24:2,4:32:1024:24:2 > $O/bmu_sweep.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/bmu_sweep.txt
timeout $(left 100) bin/bench__som_gpu_bench --no_bmu --train_edge=64 --max_docs=1000 --train_variants=screened:morning,device-quality,device-quality:key,screened:key,device-quality:morning > $O/train64.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/train64.txt
echo "total $SECONDS s" > $O/done.txt

# targets: //kernels/som:group_bounds_cuda_test //services/som:trainer_cuda_test //kernels/som:batch_update_cuda_test //kernels/som:bmu_cuda_test //bench:som_gpu_bench
# helper hsomg (issue 37 item 5, SOM 64x64 on 29.9 M documents <= 8 s): score-space group bounds
# (TrainOptions::group_bounds, kernels/som/group_bounds.{h,cc,cu}; default off). First GPU run of this code.
# 1. group_bounds_cuda_test: the fused group-bounded kernel == CPU reference (BMU and score bits, bounds <= exact
#    group minima, strips 4/8/16/32/64, fp32/fp16, ragged last group) and the update's drift on the device.
# 2. End to end 64x64 on 29.9 M documents, side by side (two processes, so that a failure of one variant does not
#    lose the rest): a) device-quality (baseline), :gbound (strips of 16, bounded from the small radius on: epoch 9
#    sets the bounds, 10.. bounded), :gbound:gall (bounded from epoch 1); b) :gbound8 (strips of 8: 2.4-9 % of the
#    pairs left on the CPU at 32x32 against 7-19 % with 16, but 61 GB of bounds: peak ~69 GB of the 80), device-quality
#    again. Every "codebook fnv1a" line must be equal (same bits); per epoch
#    "pairs searched" / "docs skipped" and the BMU seconds are printed.
# 3. trainer_cuda_test (GroupBoundsTrainTheSameMap: bounded CUDA == plain CUDA bit for bit, fp32/fp16),
#    batch_update_cuda_test (FinalizeWeightsKernel gained a drift template), bmu_cuda_test.
set -u
O="${OUT_DIR:?}"
left() { local t=$((146 - SECONDS)); [ $t -lt 1 ] && t=1; [ $t -lt $1 ] && echo $t || echo $1; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > $O/gpu.txt 2>&1
timeout $(left 10) bin/kernels_som__group_bounds_cuda_test > $O/group_bounds_cuda_test.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/group_bounds_cuda_test.txt
timeout $(left 60) bin/bench__som_gpu_bench --no_bmu --train_edge=64 --max_docs=1000 \
  --train_variants=device-quality,device-quality:gbound,device-quality:gbound:gall \
  > $O/train64_a.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/train64_a.txt
timeout $(left 45) bin/bench__som_gpu_bench --no_bmu --train_edge=64 --max_docs=1000 \
  --train_variants=device-quality:gbound8,device-quality \
  > $O/train64_b.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/train64_b.txt
timeout $(left 25) bin/services_som__trainer_cuda_test > $O/trainer_cuda_test.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/trainer_cuda_test.txt
timeout $(left 8) bin/kernels_som__batch_update_cuda_test > $O/batch_update_cuda_test.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/batch_update_cuda_test.txt
timeout $(left 20) bin/kernels_som__bmu_cuda_test > $O/bmu_cuda_test.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/bmu_cuda_test.txt
echo "total $SECONDS s" > $O/done.txt

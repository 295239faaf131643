# targets: //bench:som_gpu_bench //kernels/som:bmu_cuda_test //services/som:trainer_cuda_test //kernels/som:staged_copy_cuda_test //kernels/som:batch_update_cuda_test
# helper h37som (issue 37 item 5, SOM 64x64 on 29.9 M documents <= 8 s). HEAD 29b952f: key order (previous BMU, rarest
# feature) is the default; new option warp_prefetch_documents (document headers of a warp's 32 rounds loaded in one batch,
# next round's first indices and next feature's shuffle issued ahead, also in the screening kernel; same bits). Parity tests (orders + prefetch, bit for
# bit), staged_copy refactor test, BMU rows at 64 (default vs prefetch, groups 512..2048, 64 rounds, fp32 g256 = an L2-sized
# slice, 2 and 4 spans in 32-warp blocks; fp32/fp16; span rows S:R:G:W:K:P, K keyed, P prefetch), then the
# end-to-end 64x64 training side by side: today's default vs :pre, :pre:g1024, screened:pre, :pre:w32, :pre:s2:w32. --fixed_costs: the
# kernel on empty documents (headers + scoring + top-2 + partials, random vs storage order, with/without prefetch) and on
# copies of one document (sums at perfect locality).
set -u
O="${OUT_DIR:?}"
left() { local t=$((146 - SECONDS)); [ $t -lt 1 ] && t=1; [ $t -lt $1 ] && echo $t || echo $1; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > $O/gpu.txt 2>&1
timeout $(left 30) bin/kernels_som__bmu_cuda_test > $O/bmu_cuda_test.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/bmu_cuda_test.txt
timeout $(left 10) bin/kernels_som__batch_update_cuda_test > $O/batch_update_cuda_test.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/batch_update_cuda_test.txt
timeout $(left 10) bin/kernels_som__staged_copy_cuda_test > $O/staged_copy_cuda_test.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/staged_copy_cuda_test.txt
timeout $(left 15) bin/services_som__trainer_cuda_test > $O/trainer_cuda_test.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/trainer_cuda_test.txt
timeout $(left 20) bin/bench__som_gpu_bench --no_train --issue16 --fixed_costs --edges=64 --max_docs=1000000 --reps=3 --cpu_check_docs=200 \
  --span_rows=4:32:512:24:2:0,4:32:512:24:2:1,4:32:1024:24:2:0,4:32:1024:24:2:1,4:32:2048:24:2:1,4:64:512:24:2:1,2:32:256:24:2:1,2:32:512:32:2:0,2:32:512:32:2:1,4:32:512:32:2:1 \
  > $O/bmu_sweep.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/bmu_sweep.txt
timeout $(left 100) bin/bench__som_gpu_bench --no_bmu --train_edge=64 --max_docs=1000 \
  --train_variants=device-quality,device-quality:pre,device-quality:pre:g1024,screened:pre,device-quality:pre:w32,device-quality:pre:s2:w32 > $O/train64.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/train64.txt
echo "total $SECONDS s" > $O/done.txt

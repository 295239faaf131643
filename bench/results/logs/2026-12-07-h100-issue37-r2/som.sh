# targets: //bench:som_gpu_bench //kernels/som:bmu_cuda_test //services/som:trainer_cuda_test
# SOM issue 37 item 5 (round 2): parity tests (screened BMU search, whole-map and grouped, vs the CPU; trainer:
# screened = exact bit for bit, device quality pass), end-to-end 64x64 on 29.9 M documents side by side
# (host-quality = the trainer before; screened; screened-grouped; screened-grouped with a 7-epoch radius decay),
# then the BMU kernel table (exact span kernel vs screened forms) at edges 64 and 256.
set -u
O=$OUT_DIR
left() { local t=$((148 - SECONDS)); [ $t -lt 1 ] && t=1; [ $t -lt $1 ] && echo $t || echo $1; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $O/gpu.txt 2>&1
timeout $(left 30) bin/kernels_som__bmu_cuda_test > $O/bmu_cuda_test.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/bmu_cuda_test.txt
timeout $(left 25) bin/services_som__trainer_cuda_test > $O/trainer_cuda_test.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/trainer_cuda_test.txt
timeout $(left 80) bin/bench__som_gpu_bench --no_bmu --train_edge=64 --train_variants=host-quality,screened,screened-grouped,screened-grouped:d7 > $O/train64.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/train64.txt
timeout $(left 20) bin/bench__som_gpu_bench --no_train --issue16 --edges=64 --max_docs=1000000 --reps=2 --span_rows=4:8:0,4:8:4096 > $O/bmu64.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/bmu64.txt
T=$(left 60); [ $T -gt 10 ] && { timeout $T bin/bench__som_gpu_bench --no_train --issue16 --edges=256 --max_docs=1000000 --reps=2 --span_rows=4:8:0 --cpu_check_docs=300 > $O/bmu256.txt 2>&1; echo "rc=$? t=$SECONDS" >> $O/bmu256.txt; }
echo "total $SECONDS s" > $O/done.txt

# targets: //bench:registration_roofline_bench //kernels/registration:grid_sampler_cuda_test //kernels/registration:lean_smooth_test //kernels/registration:lean_compose_test //kernels/registration:mixed_precision_cuda_test
# Issue 37 (helper "sampler"): sampler variants vs a same-run copy, the greedy
# lean LNCC iteration step by step (today vs new), and the parity tests.
set -u
OUT="${OUT_DIR:?}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
timeout 20 bin/kernels_registration__grid_sampler_cuda_test > "$OUT/grid_sampler_cuda_test.txt" 2>&1; echo "rc=$?" >> "$OUT/grid_sampler_cuda_test.txt"
timeout 10 bin/kernels_registration__lean_smooth_test > "$OUT/lean_smooth_test.txt" 2>&1; echo "rc=$?" >> "$OUT/lean_smooth_test.txt"
timeout 10 bin/kernels_registration__lean_compose_test > "$OUT/lean_compose_test.txt" 2>&1; echo "rc=$?" >> "$OUT/lean_compose_test.txt"
timeout 10 bin/kernels_registration__mixed_precision_cuda_test > "$OUT/mixed_precision_cuda_test.txt" 2>&1; echo "rc=$?" >> "$OUT/mixed_precision_cuda_test.txt"
timeout 40 bin/bench__registration_roofline_bench --size=512 --part=iteration --iterations=6 > "$OUT/iteration_512.txt" 2>&1; echo "rc=$?" >> "$OUT/iteration_512.txt"
timeout 55 bin/bench__registration_roofline_bench --size=512 --part=sampler --reps=15 > "$OUT/sampler_512.txt" 2>&1; echo "rc=$?" >> "$OUT/sampler_512.txt"

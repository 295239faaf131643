# targets: //bench:registration_roofline_bench //kernels/registration:lean_smooth_test //kernels/registration:lean_compose_test //kernels/registration:mixed_precision_cuda_test //kernels/registration:gaussian_smooth_test
# helper h37iter (issue 37 item 3, greedy iteration): smoothing/composition options side by side + parity tests.
set -u
OUT="${OUT_DIR:?}"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
for t in lean_smooth_test lean_compose_test mixed_precision_cuda_test gaussian_smooth_test; do
  timeout 12 bin/kernels_registration__$t > "$OUT/$t.txt" 2>&1; echo "rc=$?" >> "$OUT/$t.txt"
done
timeout 40 bin/bench__registration_roofline_bench --size=512 --part=smooth --reps=10 > "$OUT/smooth_512.txt" 2>&1; echo "rc=$?" >> "$OUT/smooth_512.txt"
timeout 60 bin/bench__registration_roofline_bench --size=512 --part=iteration --iterations=6 > "$OUT/iteration_512.txt" 2>&1; echo "rc=$?" >> "$OUT/iteration_512.txt"

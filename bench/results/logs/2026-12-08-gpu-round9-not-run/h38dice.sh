# targets: //kernels/registration/pipeline:fixed_blur_cuda_test //kernels/registration/pipeline:registrar_concurrency_test //kernels/registration/pipeline:bounded_run_gpu_test //kernels/registration/pipeline:out_of_core_stage_gpu_test
# helper h38dice (issue 38, macaque Dice): the fixed image's blur before the deformable stage now applies to LNCC
# as to MI (commit 36a4329), on CUDA too. 1. fixed_blur_cuda_test: a CUDA LNCC run logs the blur, its final loss
# follows the CPU's (mixed / full, blurred / sharp, 2e-3). 2. registrar_concurrency_test: in-core LNCC runs (now
# blurred) on CUDA, concurrent vs alone bit for bit (phantoms). 3-4. bounded_run_gpu_test / out_of_core_stage_gpu_test:
# blur off there since 1551605 (in-core vs bounded comparisons; need the Colin27 data). Expected < 90 s.
set -u
O="${OUT_DIR:?}"
run() {  # run NAME TIMEOUT_S CMD...
  local name=$1 limit=$2 start=$(date +%s)
  shift 2
  timeout "$limit" "$@" > "$O/$name.txt" 2>&1
  echo "rc=$? seconds=$(( $(date +%s) - start ))" >> "$O/$name.txt"
}
run fixed_blur_cuda_test 40 bin/kernels_registration_pipeline__fixed_blur_cuda_test
run registrar_concurrency_test 60 bin/kernels_registration_pipeline__registrar_concurrency_test
run bounded_run_gpu_test 40 bin/kernels_registration_pipeline__bounded_run_gpu_test
run out_of_core_stage_gpu_test 40 bin/kernels_registration_pipeline__out_of_core_stage_gpu_test

#!/usr/bin/env bash
# Build every GPU target of round 9 at the working tree and pack them, stripped, with the Colin27/AAL templates
# (the pipeline GPU tests read /usr/share/mricron/templates) into one xz: /tmp/hold/pX.tar.xz (~20 MB).
# Then copy this folder's scripts to .gpu51/ready (r9.sh runs ready/hsomg.sh). The libraries' pack pL.tar.xz
# (27 MB, `ldd` of the binaries minus the system's; see logs/2026-12-07-h100-issue37-round5 notes) goes beside it.
set -uo pipefail
cd /work/main
HERE=bench/results/logs/2026-12-08-gpu-round9-not-run
T=$(bazel query 'attr(tags, gpu, tests(//kernels/registration:all))' 2>/dev/null | tr '\n' ' ')
P=$(bazel query 'attr(tags, gpu, tests(//kernels/registration/pipeline:all))' 2>/dev/null | tr '\n' ' ')
P="$P //kernels/registration/pipeline:registrar_concurrency_test"
S="//kernels/registration/sharded:sharded_ops_gpu_test //kernels/registration/sharded:parallel_gpu_test"
R="//kernels/reconstruction/ultrasound:beamform_cuda_test //kernels/reconstruction/solvers:tv_solvers_cuda_test //kernels/reconstruction/solvers:solvers_cuda_test //kernels/reconstruction/regularizers:tv_cuda_test //kernels/reconstruction/pet:pet_cuda_test //kernels/reconstruction/mri:cs_sense_cuda_test //kernels/reconstruction/mri:cg_sense_cuda_test //kernels/reconstruction/mri:sense_unfold_cuda_test //kernels/reconstruction/mri:mri3d_cuda_test //kernels/reconstruction/regularizers:wavelet_cuda_test //kernels/reconstruction/linalg:conjugate_gradient_cuda_test"
H=$(for f in $HERE/h*.sh; do head -1 $f | sed 's/^# targets://'; done | tr ' ' '\n' | grep '^//' | sort -u | tr '\n' ' ')
ALL=$(echo $T $P $S $R $H | tr ' ' '\n' | sort -u | tr '\n' ' ')
echo "targets: $ALL"
bazel build $ALL 2>&1 | tail -3 || exit 1
BIN="$(bazel info bazel-bin 2>/dev/null)"
D=/tmp/pk_all; rm -rf $D/bin; mkdir -p $D/bin $D/mricron /tmp/hold
cp /usr/share/mricron/templates/ch2.nii.gz /usr/share/mricron/templates/aal.nii.gz $D/mricron/
for t in $ALL; do rel="${t#//}"; pkg="${rel%%:*}"; name="${rel##*:}"; cp "$BIN/$pkg/$name" "$D/bin/${pkg//\//_}__${name}"; done
chmod u+w $D/bin/*; strip --strip-unneeded $D/bin/* 2>/dev/null || true
tar -C $D -cf - bin mricron | xz -T1 --lzma2=preset=6,dict=768MiB > /tmp/hold/pX.tar.xz
ls -la /tmp/hold/pX.tar.xz
rm -rf .gpu51/ready; mkdir -p .gpu51/ready; cp $HERE/h*.sh .gpu51/ready/; cp $HERE/r9.sh $HERE/run.sh .gpu51/
git log --oneline -1 > .gpu51/ready/HEAD.txt; git diff --stat >> .gpu51/ready/HEAD.txt

#!/usr/bin/env bash
# Build every GPU target of this round at the working tree and pack them into one deduplicated xz (/tmp/hold/pX.tar.xz).
set -uo pipefail
cd /work/main
T=$(cat /tmp/t1.txt)
P="//kernels/registration/pipeline:sharded_deformable_stage_gpu_test //kernels/registration/pipeline:registrar_masks_gpu_test //kernels/registration/pipeline:registrar_concurrency_test //kernels/registration/pipeline:out_of_core_stage_gpu_test //kernels/registration/pipeline:bounded_run_gpu_test //kernels/registration/pipeline:apply_transforms_cuda_test"
S="//kernels/registration/sharded:sharded_ops_gpu_test //kernels/registration/sharded:parallel_gpu_test"
R="//kernels/reconstruction/ultrasound:beamform_cuda_test //kernels/reconstruction/solvers:tv_solvers_cuda_test //kernels/reconstruction/solvers:solvers_cuda_test //kernels/reconstruction/regularizers:tv_cuda_test //kernels/reconstruction/pet:pet_cuda_test //kernels/reconstruction/mri:cs_sense_cuda_test //kernels/reconstruction/mri:cg_sense_cuda_test //kernels/reconstruction/mri:sense_unfold_cuda_test //kernels/reconstruction/mri:mri3d_cuda_test //kernels/reconstruction/regularizers:wavelet_cuda_test //kernels/reconstruction/linalg:conjugate_gradient_cuda_test"
X=""
H=$(for f in /tmp/gpu_ready/*.sh; do head -1 $f | sed 's/^# targets://'; done | tr ' ' '\n' | grep '^//' | sort -u | tr '\n' ' ')
ALL=$(echo $T $P $S $R $X $H | tr ' ' '\n' | sort -u | tr '\n' ' ')
echo "targets: $ALL"
bazel build $ALL 2>&1 | tail -3 || exit 1
BIN="$(bazel info bazel-bin 2>/dev/null)"
D=/tmp/pk_all; rm -rf $D/bin; mkdir -p $D/bin $D/mricron
cp /usr/share/mricron/templates/ch2.nii.gz /usr/share/mricron/templates/aal.nii.gz $D/mricron/
for t in $ALL; do rel="${t#//}"; pkg="${rel%%:*}"; name="${rel##*:}"; cp "$BIN/$pkg/$name" "$D/bin/${pkg//\//_}__${name}"; done
chmod u+w $D/bin/*; strip --strip-unneeded $D/bin/* 2>/dev/null || true
tar -C $D -cf - bin mricron | xz -T1 --lzma2=preset=6,dict=768MiB > /tmp/hold/pX.tar.xz
ls -la /tmp/hold/pX.tar.xz
rm -rf /work/main/.gpu51/ready; mkdir -p /work/main/.gpu51/ready; cp /tmp/gpu_ready/*.sh /work/main/.gpu51/ready/
git -C /work/main log --oneline -1 > /work/main/.gpu51/ready/HEAD.txt; git -C /work/main diff --stat >> /work/main/.gpu51/ready/HEAD.txt

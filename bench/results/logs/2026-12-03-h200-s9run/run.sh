#!/bin/bash
# Session 9 GPU run: registration GPU tests + the seven elastix cases on CUDA (new defaults).
set -u
H=$(cd "$(dirname "$0")" && pwd)
L=$1; mkdir -p $L
export LD_LIBRARY_PATH=$H/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p /usr/share/mricron/templates && cp $H/data/*.nii.gz /usr/share/mricron/templates/ 2>/dev/null
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } > $L/summary.txt
for t in registrar_concurrency_test sharded_deformable_stage_gpu_test out_of_core_stage_gpu_test bounded_run_gpu_test; do
  s=$(date +%s.%N); $H/bin/$t > $L/$t.log 2>&1; rc=$?; e=$(date +%s.%N)
  echo "$t rc=$rc $(echo "$e - $s" | bc) s $(grep -E '^\[  (PASSED|FAILED) ' $L/$t.log | tr '\n' ' ')" >> $L/summary.txt
done
# Two 1 mm pairs (Colin27 at full resolution, 181x217x181), made here from the same generator.
for c in t2like_bias_noise nonmonotonic_reoriented; do
  mkdir -p $H/cases/1mm_$c && $H/bin/registration_cases make --case $c --dir $H/cases/1mm_$c --downsample 1 > /dev/null 2>&1
done
echo "| case | seed | Dice all / large | registration s | whole command s |" > $L/cases.md
echo "|---|---|---|---|---|" >> $L/cases.md
for rep in 1 2; do
for c in $(ls $H/cases); do
  d=$H/cases/$c; o=/tmp/out-$c-$rep; rm -rf $o
  s=$(date +%s.%N)
  $H/bin/tessera register --fixed $d/fixed.nii.gz --moving $d/moving.nii.gz --fixed-labels $d/fixed_labels.nii.gz \
    --moving-labels $d/moving_labels.nii.gz --metric mi --device cuda --quiet --out $o > $L/$c-$rep.json 2> $L/$c-$rep.log
  e=$(date +%s.%N)
  dice=$($H/bin/registration_cases dice --fixed_labels $d/fixed_labels.nii.gz --labels $o/warped_labels.nii.gz 2>/dev/null)
  reg=$(python3 -c "import json; print(json.load(open('$L/$c-$rep.json')).get('seconds'))" 2>/dev/null)
  echo "| $c | 1 (run $rep) | $dice | $reg | $(echo "$e - $s" | bc) |" >> $L/cases.md
done
done
cat $L/summary.txt $L/cases.md

# targets: //cli:tessera //bench:registration_cases //kernels/registration/pipeline:registrar_masks_gpu_test //kernels/registration/pipeline:registrar_concurrency_test //kernels/registration/pipeline:bounded_run_gpu_test
# Whole 1 mm registrations (issue 37 item 6): command wall time and the run's timing lines; round 2: the
# binary with the overlapped set-up (cli__tessera) and the 10:45 one with set-up sub-timers on stderr
# (cli__tessera_setup_timers, old set-up), interleaved; plus the registrar GPU tests.
set -u
O=$OUT_DIR; C=/tmp/cases1mm; mkdir -p $C
for c in t2like_bias_noise nonmonotonic_reoriented; do
  [ -f $C/$c/fixed.nii.gz ] || { mkdir -p $C/$c && timeout 60 bin/bench__registration_cases make --case $c --dir $C/$c --downsample 1 > /dev/null 2>&1; }
done
for rep in 1 2 3; do for c in t2like_bias_noise nonmonotonic_reoriented; do for v in timers after; do
  exe=bin/cli__tessera; [ $v = timers ] && exe=bin/cli__tessera_setup_timers; [ -x $exe ] || continue
  d=$C/$c; o=/tmp/o-$c-$rep; rm -rf $o
  t0=$(date +%s.%N)
  timeout 60 $exe register --fixed $d/fixed.nii.gz --moving $d/moving.nii.gz --fixed-labels $d/fixed_labels.nii.gz \
    --moving-labels $d/moving_labels.nii.gz --metric mi --device cuda --quiet --out $o > $O/$c-$rep-$v.json 2> $O/$c-$rep-$v.err
  w=$(python3 -c "print(round($(date +%s.%N)-$t0,3))")
  python3 - "$O/$c-$rep-$v.json" "$c $v" "$rep" "$w" <<'PY' | tee -a $O/times.txt
import json,sys
d=json.load(open(sys.argv[1])); print(f"{sys.argv[2]} rep {sys.argv[3]}: command {sys.argv[4]} s, Register {d.get('seconds')} s, dice {d.get('dice_after')}")
for l in d.get('log',[]):
    if 'timing' in l: print('   ', l)
PY
  grep SETUP $O/$c-$rep-$v.err | tr '\n' ' ' | sed 's/^/    /' | tee -a $O/times.txt; echo | tee -a $O/times.txt
done; done; done

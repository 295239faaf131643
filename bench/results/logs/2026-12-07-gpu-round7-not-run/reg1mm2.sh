#!/usr/bin/env bash
# Whole 1 mm registrations, round 4 (issue 37 item 6): the CLI cold (3 runs per case, --quiet, as round 3),
# one run per case with every output line time-stamped (stage progress), process start/exit baselines,
# and the warm engine (registration_warm_bench).
set -u
O=$1; G=/tmp/g; C=/tmp/cases1mm; H=$(cd "$(dirname "$0")" && pwd); mkdir -p $C
for c in t2like_bias_noise nonmonotonic_reoriented; do
  [ -f $C/$c/fixed.nii.gz ] || { mkdir -p $C/$c && timeout 60 $G/bin/bench__registration_cases make --case $c --dir $C/$c --downsample 1 > $O/make-$c.log 2>&1; }
done
for rep in 1 2 3; do for c in t2like_bias_noise nonmonotonic_reoriented; do
  d=$C/$c; o=/tmp/o-$c-$rep; rm -rf $o
  t0=$(date +%s.%N)
  timeout 60 $G/bin/cli__tessera register --fixed $d/fixed.nii.gz --moving $d/moving.nii.gz --fixed-labels $d/fixed_labels.nii.gz \
    --moving-labels $d/moving_labels.nii.gz --metric mi --device cuda --quiet --out $o > $O/$c-$rep.json 2> $O/$c-$rep.err
  w=$(python3 -c "print(round($(date +%s.%N)-$t0,3))")
  python3 - "$O/$c-$rep.json" "$c" "$rep" "$w" <<'PY' | tee -a $O/summary.txt
import json,sys
try:
  d=json.load(open(sys.argv[1]))
except Exception as e:
  print(sys.argv[2], 'rep', sys.argv[3], 'no json', e); sys.exit()
print(f"{sys.argv[2]} rep {sys.argv[3]}: command {sys.argv[4]} s, Register {d.get('seconds')} s, dice {d.get('dice_after')} (before {d.get('dice_before')})")
for l in d.get('log',[]):
    if 'timing' in l: print('   ', l)
PY
done; done
echo "== process baselines (stamped)" >> $O/summary.txt
python3 $H/stamp.py $G/bin/cli__tessera >> $O/summary.txt 2>&1
python3 $H/stamp.py $G/bin/cli__tessera devices >> $O/summary.txt 2>&1
for c in t2like_bias_noise nonmonotonic_reoriented; do d=$C/$c
  echo "== stamped register $c" >> $O/summary.txt
  python3 $H/stamp.py $G/bin/cli__tessera register --fixed $d/fixed.nii.gz --moving $d/moving.nii.gz --fixed-labels $d/fixed_labels.nii.gz \
    --moving-labels $d/moving_labels.nii.gz --metric mi --device cuda --out /tmp/os-$c > $O/stamp-$c.txt 2>&1
  grep -v '^ *[0-9.]* out {' $O/stamp-$c.txt | tail -40 >> $O/summary.txt
done
for c in t2like_bias_noise nonmonotonic_reoriented; do d=$C/$c
  timeout 90 $G/bin/bench__registration_warm_bench --fixed=$d/fixed.nii.gz --moving=$d/moving.nii.gz --fixed-labels=$d/fixed_labels.nii.gz \
    --moving-labels=$d/moving_labels.nii.gz --metric=mi --device=cuda --reps=4 --out=/tmp/warm-$c 2>&1 | tee -a $O/warm-$c.txt >> $O/summary.txt
done

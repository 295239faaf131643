#!/usr/bin/env bash
# usage: .gpu51/run.sh STAGES...  (every .gpu51/p*.tar.xz is extracted into /tmp/g first)
set -u
G=/tmp/g; mkdir -p $G; H=$(cd "$(dirname "$0")" && pwd)
for p in $H/p*.tar.xz; do m=$G/.done_$(basename $p)_$(stat -c %s $p); [ -f $p ] && [ ! -f $m ] && { xz -dc $p | tar -C $G -xf - ; touch $m; echo "extracted $(basename $p)"; }; done
export LD_LIBRARY_PATH="$G/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
[ -d $G/mricron ] && mkdir -p /usr/share/mricron/templates && cp $G/mricron/*.nii.gz /usr/share/mricron/templates/
export TESSERA_FINGERPRINT_DATA=$G/data/fingerprint
runtests() { for b in "$@"; do n=$(basename $b); s=$(date +%s.%N)
  ( cd $G && timeout 150 $b > $L/$n.log 2>&1 ); rc=$?
  printf '%-70s rc=%d %6.1fs %s\n' $n $rc $(python3 -c "print($(date +%s.%N)-$s)") "$(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/$n.log | tr '\n' ' ')" | tee -a $L/summary.txt
done; }
for st in "$@"; do
L=$OUT/$st; mkdir -p $L
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; } | tee -a $L/summary.txt
case $st in
  c) runtests $G/bin/kernels_registration__*_test $G/bin/kernels_registration_sharded__*_test $G/bin/common__*_test ;;
  b) runtests $G/bin/kernels_registration_pipeline__*_test; grep -h 'deformable x1' $L/*.log | head -5 >> $L/summary.txt ;;
  x) runtests $G/bin/kernels_reconstruction_*_test ;;
  r) bash $H/reg1mm2.sh $L ;;
  h) for s in $H/ready/${HS:-*}.sh; do n=$(basename $s .sh); mkdir -p $L/$n
       ( cd $G && OUT_DIR=$L/$n timeout 200 bash $s > $L/$n/stdout.txt 2> $L/$n/stderr.txt; echo "$n rc=$?" | tee -a $L/summary.txt ); done ;;
esac
( cd $OUT && n=all_$st${HS:+_${HS//[^A-Za-z0-9]/}}.tgz && tar -czf $n $st && rm -rf $st )
done

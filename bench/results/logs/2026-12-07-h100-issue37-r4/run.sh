#!/usr/bin/env bash
# usage: .gpu51/run.sh STAGE  (packs named in STAGE's carry are extracted into /tmp/g)
set -u
G=/tmp/g; mkdir -p $G; H=$(cd "$(dirname "$0")" && pwd)
for p in $H/p*.tar.xz; do [ -f $p ] && { xz -dc $p | tar -C $G -xf - ; echo "extracted $(basename $p)"; }; done
export LD_LIBRARY_PATH="$G/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
[ -d $G/mricron ] && mkdir -p /usr/share/mricron/templates && cp $G/mricron/*.nii.gz /usr/share/mricron/templates/
export TESSERA_FINGERPRINT_DATA=$G/data/fingerprint
L=$OUT/$1; mkdir -p $L
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; } | tee -a $L/summary.txt
runtests() { for b in "$@"; do n=$(basename $b); s=$(date +%s.%N)
  ( cd $G && timeout 150 $b > $L/$n.log 2>&1 ); rc=$?
  printf '%-70s rc=%d %6.1fs %s\n' $n $rc $(python3 -c "print($(date +%s.%N)-$s)") "$(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/$n.log | tr '\n' ' ')" | tee -a $L/summary.txt
done; }
case $1 in
  c) runtests $G/bin/kernels_registration__*_test $G/bin/kernels_registration_sharded__*_test $G/bin/kernels_fingerprint__*_test $G/bin/services_*_test
     ( cd $G && timeout 120 bin/bench__registration_roofline_bench --size=512 --part=iteration --iterations=6 > $L/roofline_iteration.log 2>&1; echo "roofline rc=$?" | tee -a $L/summary.txt ) ;;
  b) runtests $G/bin/kernels_registration_pipeline__*_test ;;
  a) bash $H/reg1mm.sh $L
     ( cd $G && timeout 300 bin/bench__fingerprint_batching_bench --gallery=1000000 --clients=64 --seconds=10 --device=cuda --gallery_dir=/tmp/gal1m > $L/batching_1m.log 2>&1; echo "batching rc=$?" | tee -a $L/summary.txt ) ;;
  r) bash $H/reg1mm2.sh $L ;;
  h) # helpers' scripts (copied from /tmp/gpu_ready into .gpu51/ready), each with OUT_DIR=$L/<name>
     for s in $H/ready/*.sh; do n=$(basename $s .sh); mkdir -p $L/$n
       ( cd $G && OUT_DIR=$L/$n timeout 200 bash $s > $L/$n/stdout.txt 2> $L/$n/stderr.txt; echo "$n rc=$?" | tee -a $L/summary.txt ); done ;;
esac
tail -c 3000 $L/summary.txt >/dev/null
cd $OUT && tar -czf all_$1.tgz $1 && rm -rf $1

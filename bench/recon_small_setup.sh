#!/usr/bin/env bash
# Issue 40 "before" measurements: whole-command wall time of `tessera recon`
# on each modality's small 2-D case, where set-up (process start, input
# reading, NUFFT plan / density / Toeplitz kernel, writing) is not amortised.
#
# MRI: `tessera phantom mri` radial Shepp-Logan (analytic k-space, golden-angle
# spokes) at 128^2/4 coils/67 spokes (the issue's case) and 256^2/8 coils/201
# spokes; tessera cgsense 30 it, adjoint, cgsense --no-toeplitz against
# `bart pics -S -l2 -r 0.001 -i 30` (as bench/cgsense_vs_bart.sh) and
# `bart nufft -a`. NRMSE (raw, and after the best complex scale) from
# `mri_bench --mode=compare` (the existing scorer; BART's raw NRMSE is not
# comparable, it rescales; `bart nufft -a` gives per-coil images: not scored).
# CT 2-D 256^2 parallel FBP (+ 1 CGLS iteration), PET 2-D 128^2 OSEM/MLEM
# (+ 1 iteration), ultrasound DAS/MV 256x256 (128 channels, 11 plane waves).
#
# Each row is run --reps times, the rows interleaved round-robin (so load
# changes hit all rows alike); the table gives the median wall time of the
# process and the median of the engine's own "seconds" (JSON; ReconstructionRun
# from reading inputs to writing the output, i.e. excluding process start,
# engine creation and the CLI's final rename). Then a stage breakdown: the
# tessera adjoint / cgsense runs' stderr progress lines timestamped on arrival
# (relative to fork), /usr/bin/time -v (RSS, user/sys), and `perf record`
# top symbols, if perf is installed.
#
#   bench/recon_small_setup.sh [--reps 5] [--dir /tmp/recon_small_setup] [--device cpu]
set -euo pipefail
reps=5
dir=/tmp/recon_small_setup
device=cpu
while [[ $# -gt 0 ]]; do
  case "$1" in
    --reps) reps="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --device) device="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
command -v bart > /dev/null || { echo "bart is not installed (apt-get install bart)" >&2; exit 1; }
cd "$(dirname "$0")/.."
bazel build //cli:tessera //bench:mri_bench >&2   # .bazelrc: -c opt by default
root=$PWD
T="$root/bazel-bin/cli/tessera"
B="$root/bazel-bin/bench/mri_bench"
mkdir -p "$dir"
cd "$dir"

# --- inputs -------------------------------------------------------------------
for c in 128:4:67 256:8:201; do
  IFS=: read -r n coils spokes <<< "$c"
  mkdir -p "mri$n"
  "$T" phantom mri --kind radial --size "$n" --coils "$coils" --spokes "$spokes" --out-dir "mri$n" > /dev/null 2>&1
done
mkdir -p ct pet us
"$T" phantom geometry --type parallel --size 256 --out ct/g.json > /dev/null
"$T" phantom ct --geometry ct/g.json --sinogram-out ct/s.nii.gz --volume-out ct/v.nii.gz > /dev/null
"$T" phantom geometry --type parallel --size 128 --out pet/g.json > /dev/null
"$T" phantom pet --geometry pet/g.json --sinogram-out pet/s.nii.gz --activity-out pet/a.nii.gz \
  --attenuation-out pet/mu.nii.gz > /dev/null
"$T" phantom us --kind points --out us/p.h5 > /dev/null

# --- the rows: "label<TAB>directory<TAB>command" --------------------------------
R="$T recon"
q="--device $device --quiet"
rows=()
# Process start alone (loading the binary and its shared libraries, static
# initialisers, flag parsing): the floor under every tessera row.
rows+=("process start: tessera --help	.	$T --help")
for n in 128 256; do
  m="--kspace kspace --traj traj --coils coils"
  rows+=("mri$n tessera cgsense 30 it	mri$n	$R mri $m --method cgsense --iterations 30 $q --out cg.nii.gz")
  rows+=("mri$n tessera cgsense 30 it --no-toeplitz	mri$n	$R mri $m --method cgsense --iterations 30 --no-toeplitz $q --out cgnt.nii.gz")
  rows+=("mri$n tessera adjoint	mri$n	$R mri $m --method adjoint $q --out adj.nii.gz")
  rows+=("mri$n tessera adjoint --device auto	mri$n	$R mri $m --method adjoint --device auto --quiet --out adja.nii.gz")
  rows+=("mri$n bart pics -l2 -r 0.001 -i 30	mri$n	bart pics -S -l2 -r 0.001 -i 30 -t traj kspace coils bart_pics")
  rows+=("mri$n bart nufft -a	mri$n	bart nufft -a traj kspace bart_nufft_a")
done
rows+=("ct256 tessera fbp	ct	$R ct --geometry g.json --sinogram s.nii.gz --method fbp $q --out fbp.nii.gz")
rows+=("ct256 tessera cgls 1 it	ct	$R ct --geometry g.json --sinogram s.nii.gz --method cgls --iterations 1 $q --out cgls1.nii.gz")
rows+=("pet128 tessera osem (default)	pet	$R pet --geometry g.json --sinogram s.nii.gz --attenuation mu.nii.gz --method osem $q --out osem.nii.gz")
rows+=("pet128 tessera mlem (default)	pet	$R pet --geometry g.json --sinogram s.nii.gz --attenuation mu.nii.gz --method mlem $q --out mlem.nii.gz")
rows+=("pet128 tessera mlem 1 it	pet	$R pet --geometry g.json --sinogram s.nii.gz --attenuation mu.nii.gz --method mlem --iterations 1 $q --out mlem1.nii.gz")
rows+=("us256 tessera das	us	$R us --rf p.h5 --method das $q --out das.nii.gz")
rows+=("us256 tessera mv	us	$R us --rf p.h5 --method mv $q --out mv.nii.gz")
printf '%s\n' "${rows[@]}" > rows.tsv

# --- timing: interleaved repetitions, medians (python3 for the clock) -----------
echo "# tessera recon small cases: set-up vs solve (issue 40 before; $(nproc) CPU threads, $(date -u '+%F %T') UTC)"
echo "# uptime: $(uptime)"
echo "# $(bart version 2>/dev/null | sed 's/^/bart /')"
echo
python3 - "$reps" "$B" << 'EOF'
import json, os, statistics, subprocess, sys, time
reps, scorer = int(sys.argv[1]), sys.argv[2]
rows = [l.rstrip("\n").split("\t") for l in open("rows.tsv") if l.strip()]
wall = {r[0]: [] for r in rows}
engine = {r[0]: [] for r in rows}
for _ in range(reps):
    for label, d, cmd in rows:
        t0 = time.perf_counter()
        p = subprocess.run(cmd, shell=True, cwd=d, capture_output=True, text=True)
        wall[label].append(time.perf_counter() - t0)
        if p.returncode != 0:
            sys.exit(f"{label}: exit {p.returncode}\n{p.stderr[-2000:]}")
        try:
            engine[label].append(json.loads(p.stdout.strip().splitlines()[-1])["seconds"])
        except Exception:
            pass
def nrmse(label, d, cmd):
    # The existing scorer (bench/mri_bench --mode=compare) reads cfl images against d/truth.
    if not d.startswith("mri") or "nufft" in label:
        return "n/a", "n/a"
    image = cmd.split()[-1].replace(".nii.gz", "")
    out = subprocess.run([scorer, "--mode=compare", f"--dir={d}", f"--image={d}/{image}"],
                         capture_output=True, text=True).stdout.split()
    return (out[1] if "bart" not in label else "(rescaled)"), out[2]
print(f"| case / command | wall s (median of {reps}) | min..max | engine \"seconds\" (median) | wall - engine | NRMSE raw | NRMSE scaled |")
print("|---|---|---|---|---|---|---|")
for label, d, cmd in rows:
    w = statistics.median(wall[label])
    e = statistics.median(engine[label]) if engine[label] else None
    raw, scaled = nrmse(label, d, cmd)
    print(f"| {label} | {w:.3f} | {min(wall[label]):.3f}..{max(wall[label]):.3f} | "
          f"{'-' if e is None else f'{e:.3f}'} | {'-' if e is None else f'{w - e:.3f}'} | {raw} | {scaled} |")
EOF

# --- stage breakdown of the small MRI case ------------------------------------
# Progress lines (stderr) stamped when they arrive: each line is printed when
# a stage starts, so the gap to the next line is that stage's time.
stamp() {
  python3 -c '
import subprocess, sys, time
t0 = time.perf_counter()
p = subprocess.Popen(sys.argv[1:], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
for line in p.stderr:
    print(f"  {time.perf_counter() - t0:7.3f} s  {line.rstrip()}")
p.wait()
print(f"  {time.perf_counter() - t0:7.3f} s  (exit {p.returncode})")' "$@"
}
m="--kspace kspace --traj traj --coils coils"
for n in 128 256; do
  for method in adjoint "cgsense --iterations 30"; do
    echo
    echo "## mri$n $method: progress lines stamped on arrival (--device $device)"
    echo
    echo '```'
    (cd "mri$n" && stamp $R mri $m --method $method --device "$device" --out stage.nii.gz)
    echo '```'
  done
done
echo
echo "## mri128 adjoint: /usr/bin/time -v"
echo
echo '```'
(cd mri128 && /usr/bin/time -v $R mri $m --method adjoint $q --out tv.nii.gz 2>&1 > /dev/null |
  grep -E 'Elapsed|User time|System time|Maximum resident|page faults|context switches')
echo '```'
if command -v perf > /dev/null; then
  echo
  echo "## process start (tessera --help): perf record -F 8000, self time by shared object"
  echo
  echo '```'
  echo "$(ldd "$T" | wc -l) shared objects (ldd)"
  perf record -q -F 8000 -o perf_help.data "$T" --help > /dev/null 2>&1
  perf report -i perf_help.data --no-children --sort dso --stdio 2> /dev/null | grep '%' | sed -n 1,10p
  echo '```'
  # Self time by shared object, then the top symbols (libfftw3f has no symbols).
  for run in "128 adjoint" "256 adjoint" "128 cgsense --iterations 30" "256 cgsense --iterations 30"; do
    read -r n method <<< "$run"
    echo
    echo "## mri$n $method: perf record -F 4000 (self time: by shared object, then top symbols)"
    echo
    echo '```'
    (cd "mri$n" && perf record -q -F 4000 -o perf.data $R mri $m --method $method $q --out perf.nii.gz > /dev/null 2>&1 &&
      perf report -i perf.data --no-children --sort dso --stdio 2> /dev/null | grep '%' | sed -n 1,6p &&
      echo "--" &&
      perf report -i perf.data --no-children --sort dso,symbol --stdio 2> /dev/null | grep '%' | grep -v 'libfftw3f.*0x' |
      sed -n 1,8p | cut -c1-160)
    echo '```'
  done
fi

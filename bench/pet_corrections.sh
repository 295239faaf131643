#!/usr/bin/env bash
# PET corrections (issue 36) through the CLI, as a user runs them: a torso
# phantom whose Poisson counts include known randoms, scatter and detection
# efficiencies (`tessera phantom pet --randoms-out --scatter-out
# --normalization-out`), reconstructed by OSEM with all corrections, without
# randoms/scatter, without normalization, and the noise-free trues alone (the
# reference at the same resolution). Prints ROI means against the truth
# (soft tissue, lungs: eroded by 2 voxels), the hot lesions against the
# reference, the NRMSE against the reference inside the body, and each
# reconstruction's wall time.
#
#   bench/pet_corrections.sh [work_dir]     (SIZE=128 COUNTS=2e7 ITER=10 SUBSETS=8 DEVICE=cpu)
set -euo pipefail
T=${TESSERA:-$PWD/bazel-bin/cli/tessera}
D=${1:-/tmp/pet_corrections_bench}
SIZE=${SIZE:-128}; COUNTS=${COUNTS:-2e7}; ITER=${ITER:-10}; SUBSETS=${SUBSETS:-8}; DEVICE=${DEVICE:-cpu}
mkdir -p "$D"
cd "$D"
"$T" phantom geometry --type fanflat --size "$SIZE" --out g.json > /dev/null
"$T" phantom pet --geometry g.json --counts "$COUNTS" --seed 5 --sinogram-out counts.nii.gz \
  --activity-out activity.nii.gz --attenuation-out mu.nii.gz --randoms-out randoms.nii.gz \
  --scatter-out scatter.nii.gz --normalization-out norm.nii.gz --randoms-fraction 0.4 --scatter-fraction 0.3 \
  | tee phantom.txt
"$T" phantom pet --geometry g.json --counts "$COUNTS" --noise none --sinogram-out trues.nii.gz > /dev/null

common="--geometry g.json --attenuation mu.nii.gz --method osem --iterations $ITER --subsets $SUBSETS --device $DEVICE --quiet"
run() {  # name, sinogram, extra flags
  local name=$1 sino=$2; shift 2
  local t0=$(date +%s.%N)
  "$T" recon pet $common --sinogram "$sino" "$@" --out "$name.nii.gz" > /dev/null
  echo "$name $(echo "$(date +%s.%N) - $t0" | bc)" >> times.txt
}
rm -f times.txt
run reference trues.nii.gz
run all counts.nii.gz --randoms randoms.nii.gz --scatter scatter.nii.gz --normalization norm.nii.gz
run no_background counts.nii.gz --normalization norm.nii.gz
run no_norm counts.nii.gz --randoms randoms.nii.gz --scatter scatter.nii.gz
run none counts.nii.gz

python3 - <<'EOF'
import gzip, struct, math
def read(path):
    b = gzip.open(path).read()
    dims = struct.unpack('<8h', b[40:56])
    datatype = struct.unpack('<h', b[70:72])[0]
    assert datatype == 16, path  # float32
    off = int(struct.unpack('<f', b[108:112])[0])
    n = 1
    for d in dims[1:1 + dims[0]]: n *= d
    return dims[1], dims[2], struct.unpack('<%df' % n, b[off:off + 4 * n])
scale = float([l.split()[-1] for l in open('phantom.txt') if l.startswith('activity scale')][0])
nx, ny, truth = read('activity.nii.gz')
def region(level, erode):
    out = []
    for y in range(ny):
        for x in range(nx):
            if abs(truth[x + nx * y] - level) > 1e-3 * level: continue
            if all(0 <= x + dx < nx and 0 <= y + dy < ny and abs(truth[x + dx + nx * (y + dy)] - level) <= 1e-3 * level
                   for dy in range(-erode, erode + 1) for dx in range(-erode, erode + 1)):
                out.append(x + nx * y)
    return out
tissue, lungs = region(1.0, 2), region(0.25, 2)
hot = [i for i, v in enumerate(truth) if v >= 3.5]
body = [i for i, v in enumerate(truth) if v > 0]
mean = lambda img, r: sum(img[i] for i in r) / len(r)
times = dict(l.split() for l in open('times.txt'))
ref = read('reference.nii.gz')[2]
print(f"ROIs: tissue {len(tissue)} voxels, lungs {len(lungs)}, hot {len(hot)}, body {len(body)}; activity scale {scale:.6g}")
print(f"{'OSEM':28s} {'tissue/truth':>12s} {'lungs/truth':>12s} {'hot/ref':>8s} {'NRMSE/ref':>10s} {'wall s':>7s}")
for name, label in [('reference', 'trues only (reference)'), ('all', 'all corrections'),
                    ('no_background', 'no randoms/scatter'), ('no_norm', 'no normalization'), ('none', 'no corrections')]:
    img = read(name + '.nii.gz')[2]
    nrmse = math.sqrt(sum((img[i] - ref[i]) ** 2 for i in body) / sum(ref[i] ** 2 for i in body))
    print(f"{label:28s} {mean(img, tissue) / scale:12.4f} {mean(img, lungs) / (0.25 * scale):12.4f} "
          f"{mean(img, hot) / mean(ref, hot):8.4f} {nrmse:10.4f} {float(times[name]):7.2f}")
EOF

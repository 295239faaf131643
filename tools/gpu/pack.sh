#!/usr/bin/env bash
# gather.sh's layout split into packs that each fit the device tool's carry
# limit (64 MiB including the working tree, ~12 MiB today): .gpupack0/ holds
# the shared libraries and run_all.sh, .gpupackd/ the data (mricron volumes,
# the fingerprint templates), .gpupack1/, .gpupack2/, ... the binaries, at most
# --max-raw-mb of them (stripped, before xz) each. Every pack is one p.tar.xz
# of .gpuall/; binary packs list their binaries in .gpuall/packN.re (a regex
# for run_all.sh's filter). The sizes are printed: carry as many per call as
# fit beside the tree.
#   tools/gpu/pack.sh [--max-raw-mb 100] [//target ...]   (default: every target tagged gpu)
# On the device, one call after another while the machine stays warm (it goes
# back after ~30 s idle; what was extracted in /tmp survives between calls):
#   tar -C /tmp -xJf .gpupack0/p.tar.xz && tar -C /tmp -xJf .gpupack1/p.tar.xz &&
#     /tmp/.gpuall/run_all.sh $OUT/logs "$(cat /tmp/.gpuall/pack1.re)"            carry [".gpupack0", ".gpupack1"]
#   tar -C /tmp -xJf .gpupackd/p.tar.xz && tar -C /tmp -xJf .gpupack2/p.tar.xz &&
#     /tmp/.gpuall/run_all.sh $OUT/logs "$(cat /tmp/.gpuall/pack2.re)"            carry [".gpupackd", ".gpupack2"]
# The device has no `bc`: keep arithmetic in run scripts to awk or python3.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
max_raw_mb=100
if [[ "${1:-}" == "--max-raw-mb" ]]; then max_raw_mb=$2; shift 2; fi
if [[ $# -gt 0 ]]; then
  targets=("$@")
else
  mapfile -t targets < <(bazel query 'attr(tags, "\bgpu\b", kind("cc_(test|binary)", //...))' 2>/dev/null | sort)
fi
[ ${#targets[@]} -gt 0 ] || { echo "no targets" >&2; exit 1; }
bazel build "${targets[@]}" >&2
BIN="$(bazel info bazel-bin 2>/dev/null)"
STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/bin"
for t in "${targets[@]}"; do
  rel="${t#//}"; pkg="${rel%%:*}"; name="${rel##*:}"
  cp "$BIN/$pkg/$name" "$STAGE/bin/${pkg//\//_}__${name}"
done
strip --strip-unneeded "$STAGE"/bin/* 2>/dev/null || true

# Pack 0: libraries (as gather.sh chooses them) and the run script; pack d: data.
P0="$STAGE/p0/.gpuall"; PD="$STAGE/pd/.gpuall"; mkdir -p "$P0/lib" "$P0/bin" "$PD/data"
for f in "$STAGE"/bin/*; do ldd "$f" | awk '/=> \// {print $3}'; done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
    libcuda.so*|libcudart*|libcublas*|libcufft*|libcusparse*|libnccl*|libnvJitLink*|libcusolver*|libcurand*) ;;
    *) cp -L "$lib" "$P0/lib/" ;;
  esac
done
strip --strip-unneeded "$P0"/lib/* 2>/dev/null || true
cp /usr/share/mricron/templates/ch2.nii.gz /usr/share/mricron/templates/aal.nii.gz "$PD/data/"
if [ -d ../shared/data/fingerprint ]; then cp -r ../shared/data/fingerprint "$PD/data/"; fi
cp tools/gpu/run_all.sh "$P0/"

# Packs 1..: binaries, largest first, each pack up to max_raw_mb.
pack=1; used=0; mkdir -p "$STAGE/p$pack/.gpuall/bin"
while read -r size f; do
  mb=$(( size / 1048576 + 1 ))
  if (( used > 0 && used + mb > max_raw_mb )); then pack=$((pack + 1)); used=0; mkdir -p "$STAGE/p$pack/.gpuall/bin"; fi
  mv "$f" "$STAGE/p$pack/.gpuall/bin/"; used=$((used + mb))
done < <(find "$STAGE/bin" -type f -printf '%s %p\n' | sort -rn)
for d in "$STAGE"/p[0-9d]*; do
  n="${d##*/p}"
  if [[ "$n" != 0 && "$n" != d ]]; then
    (cd "$d/.gpuall/bin" && ls) | sed 's/^/^/; s/$/$/' | paste -sd'|' > "$d/.gpuall/pack$n.re"
  fi
  rm -rf ".gpupack$n"; mkdir -p ".gpupack$n"
  tar -C "$d" -cf - .gpuall | xz -T2 -6 > ".gpupack$n/p.tar.xz"
  printf '.gpupack%s/p.tar.xz %s MiB, %s binaries\n' "$n" "$(( $(stat -c %s ".gpupack$n/p.tar.xz") / 1048576 ))" \
    "$(ls "$d/.gpuall/bin" 2>/dev/null | wc -l)" >&2
done

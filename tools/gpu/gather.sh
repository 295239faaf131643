#!/usr/bin/env bash
# Builds every target tagged "gpu" (parity tests and benchmarks) and gathers
# the binaries, plus the shared libraries a bare CUDA machine lacks, into one
# git-ignored folder to pass as `carry` to the GPU machine:
#   tools/gpu/gather.sh [DEST=.gpu]
# Layout: DEST/bin/<package>__<target> (tests end in _test, benches in _bench),
#         DEST/lib/*.so*, DEST/data/ (mricron volumes), DEST/run_all.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
DEST="${1:-.gpu}"
# TESSERA_BAZEL_OUTPUT_BASE: build in that output base (e.g. the one you have
# been building in) instead of the default, so nothing is rebuilt from scratch.
bazel() { command bazel ${TESSERA_BAZEL_OUTPUT_BASE:+--output_base=$TESSERA_BAZEL_OUTPUT_BASE} "$@" ${TESSERA_BAZEL_OUTPUT_BASE:+$( [ "$1" = build ] && echo --symlink_prefix=/ )}; }

mapfile -t targets < <(bazel query 'attr(tags, "\bgpu\b", kind("cc_(test|binary)", //...))' 2>/dev/null | sort)
[ ${#targets[@]} -gt 0 ] || { echo "no targets tagged gpu" >&2; exit 1; }
echo "building ${#targets[@]} GPU targets..." >&2
bazel build "${targets[@]}" >&2
BIN="$(bazel info bazel-bin 2>/dev/null)"

rm -rf "$DEST"; mkdir -p "$DEST/bin" "$DEST/lib"
for t in "${targets[@]}"; do
  rel="${t#//}"; pkg="${rel%%:*}"; name="${rel##*:}"
  cp "$BIN/$pkg/$name" "$DEST/bin/${pkg//\//_}__${name}"
done

# Shared libraries: everything outside glibc/libstdc++/libgcc and the CUDA
# toolkit (the GPU machine has CUDA 13.0 and newer C++ runtimes of its own).
for f in "$DEST"/bin/*; do
  ldd "$f" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
    libcuda.so*|libcudart*|libcublas*|libcufft*|libcusparse*|libnccl*|libnvJitLink*|libcusolver*|libcurand*) ;;
    *) cp -L "$lib" "$DEST/lib/" ;;
  esac
done
# Real test data the GPU machine lacks (Debian's mricron-data): run_all.sh
# puts it where the tests look for it.
mkdir -p "$DEST/data"
cp /usr/share/mricron/templates/ch2.nii.gz /usr/share/mricron/templates/aal.nii.gz "$DEST/data/"
# The shared fingerprint templates (found by services/fingerprint/formats/fvc_data.cc
# next to the binaries as DEST/data/fingerprint).
if [ -d ../shared/data/fingerprint ]; then cp -r ../shared/data/fingerprint "$DEST/data/"; fi
strip --strip-unneeded "$DEST"/bin/* "$DEST"/lib/* 2>/dev/null || true
cp tools/gpu/run_all.sh "$DEST/"
du -sh "$DEST" >&2
ls "$DEST/bin" >&2

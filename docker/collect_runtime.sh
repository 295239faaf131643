#!/usr/bin/env bash
# Collects what a Tessera runtime image needs into DEST, the same way for the
# Dockerfile's runtime stage and for the registry-free image of
# docker/rootfs_image.sh: the `tessera` binary and every shared library it
# loads, except the C/C++ runtime every base image has.
#   docker/collect_runtime.sh BINARY DEST [--without-cuda]
# --without-cuda: leave out the CUDA toolkit's libraries (cuFFT, cuSPARSE, ...),
# which an nvidia/cuda runtime base image already provides.
# Layout: DEST/usr/local/bin/tessera, DEST/usr/local/lib/tessera/*.so*
# (the image sets LD_LIBRARY_PATH=/usr/local/lib/tessera).
set -euo pipefail
BINARY="${1:?usage: collect_runtime.sh BINARY DEST [--without-cuda]}"
DEST="${2:?usage: collect_runtime.sh BINARY DEST [--without-cuda]}"
WITH_CUDA=1
[ "${3:-}" = "--without-cuda" ] && WITH_CUDA=0
[ -x "$BINARY" ] || { echo "collect_runtime: $BINARY is not an executable" >&2; exit 2; }
mkdir -p "$DEST/usr/local/bin" "$DEST/usr/local/lib/tessera"
install -m 0755 "$(readlink -f "$BINARY")" "$DEST/usr/local/bin/tessera"
missing=$(ldd "$BINARY" | awk '/not found/ {print $1}')
[ -z "$missing" ] || { echo "collect_runtime: libraries not found: $missing" >&2; exit 1; }
ldd "$BINARY" | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) continue ;;
    libcuda.so*) continue ;;  # the driver's: the NVIDIA container runtime mounts it from the host
    libcudart*|libcublas*|libcufft*|libcusparse*|libnccl*|libnvJitLink*|libcusolver*|libcurand*)
      [ "$WITH_CUDA" = 1 ] || continue ;;
  esac
  cp -L "$lib" "$DEST/usr/local/lib/tessera/"
done
strip --strip-unneeded "$DEST/usr/local/bin/tessera" 2>/dev/null || true
echo "collect_runtime: $(ls "$DEST/usr/local/lib/tessera" | wc -l) libraries, $(du -sh "$DEST" | cut -f1) in $DEST" >&2

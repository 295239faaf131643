#!/usr/bin/env bash
# Builds the Tessera runtime image without an image registry (the machines
# that test it reach only Debian's mirror): a Debian bookworm root filesystem
# made by debootstrap --variant=minbase, the binary and its libraries added by
# docker/collect_runtime.sh (the same step as the Dockerfile's), a non-root
# user, then imported into podman with the image settings of the Dockerfile.
#   docker/rootfs_image.sh BINARY TAG
# Environment:
#   TESSERA_ROOTFS_CACHE  where the debootstrapped base is kept between runs
#                         (default /var/cache/tessera/rootfs)
#   TESSERA_DEBIAN_MIRROR the mirror (default: the first deb.debian.org-style
#                         URI of this machine's apt sources)
# Needs root (debootstrap, podman with its default storage).
set -euo pipefail
BINARY="${1:?usage: rootfs_image.sh BINARY TAG}"
TAG="${2:?usage: rootfs_image.sh BINARY TAG}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${TESSERA_ROOTFS_CACHE:-/var/cache/tessera/rootfs}"
mirror="${TESSERA_DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
  mirror=$(grep -hoE '^(URIs:|deb) +https?://[^ ]+' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
           | awk '{print $2}' | grep -v security | head -n 1 || true)
fi
mirror="${mirror:-http://deb.debian.org/debian}"
log() { printf '[rootfs_image] %s\n' "$*" >&2; }

# 1. The base, debootstrapped once and kept as a tarball (about 50-110 s).
base="$CACHE/bookworm-minbase.tar"
if [ ! -s "$base" ]; then
  mkdir -p "$CACHE"
  tmp="$(mktemp -d "$CACHE/debootstrap.XXXXXX")"
  log "debootstrap --variant=minbase bookworm from $mirror (once; cached in $base)"
  if ! debootstrap --variant=minbase bookworm "$tmp/root" "$mirror" >"$tmp/log" 2>&1; then
    tail -n 20 "$tmp/log" >&2; log "debootstrap failed"; rm -rf "$tmp"; exit 1
  fi
  rm -rf "$tmp/root/var/cache/apt/archives/"*.deb "$tmp/root/var/lib/apt/lists/"*
  tar -C "$tmp/root" -cf "$base.part" . && mv "$base.part" "$base"
  rm -rf "$tmp"
fi

# 2. The image's file system: base + binary + libraries + user + data dir.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir "$work/root"
tar -C "$work/root" -xf "$base"
"$HERE/collect_runtime.sh" "$BINARY" "$work/root"
# uid/gid 10001: outside the ranges of Debian's system and first human users,
# so a mounted volume's owner is never confused with a host account.
echo "tessera:x:10001:10001:Tessera:/data:/usr/sbin/nologin" >>"$work/root/etc/passwd"
echo "tessera:x:10001:" >>"$work/root/etc/group"
echo "tessera:!:19000::::::" >>"$work/root/etc/shadow"
mkdir -p "$work/root/data"
chown 10001:10001 "$work/root/data"

# 3. Import with the Dockerfile's settings (podman import takes these
#    instructions; HEALTHCHECK it does not: `podman run --health-cmd` does).
log "importing $TAG"
tar -C "$work/root" -c . | podman import --quiet \
  --change 'USER 10001:10001' \
  --change 'WORKDIR /data' \
  --change 'ENV LD_LIBRARY_PATH=/usr/local/lib/tessera' \
  --change 'EXPOSE 50051' \
  --change 'EXPOSE 9464' \
  --change 'VOLUME /data' \
  --change 'STOPSIGNAL SIGTERM' \
  --change 'ENTRYPOINT ["/usr/local/bin/tessera", "serve"]' \
  --change 'CMD ["--host=0.0.0.0", "--grpc-port=50051", "--metrics-port=9464", "--data-root=/data", "--state-dir=/data/state", "--gallery-dir=/data/gallery"]' \
  - "$TAG" >/dev/null
log "built $TAG ($(podman image inspect --format '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1 / 1e6}'))"

#!/usr/bin/env bash
# Peak memory of `tessera serve` while a large volume streams in through the
# HTTP gateway (PUT /v1/uploads/registration): the gateway passes the body on
# in 1 MiB FileChunks, so the server's peak RSS must not grow with the file.
#   bench/gateway_upload_rss.sh [MiB=512]   (after: bazel build //cli:tessera)
set -euo pipefail
MIB="${1:-512}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TESSERA="$ROOT/bazel-bin/cli/tessera"
WORK="$(mktemp -d)"
trap 'kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT
# An uncompressed uint8 NIfTI-1 of MIB MiB (256 x 256 x 16*MIB voxels).
python3 - "$WORK/big.nii" "$MIB" <<'PY'
import struct, sys
path, mib = sys.argv[1], int(sys.argv[2])
h = bytearray(348)
struct.pack_into("<i", h, 0, 348)
struct.pack_into("<8h", h, 40, 3, 256, 256, 16 * mib, 1, 1, 1, 1)
struct.pack_into("<hh", h, 70, 2, 8)            # datatype uint8, bitpix 8
struct.pack_into("<8f", h, 76, 1, 1, 1, 1, 0, 0, 0, 0)
struct.pack_into("<f", h, 108, 352.0)           # vox_offset
struct.pack_into("<h", h, 254, 1)               # sform_code
struct.pack_into("<4f", h, 280, 1, 0, 0, 0); struct.pack_into("<4f", h, 296, 0, 1, 0, 0); struct.pack_into("<4f", h, 312, 0, 0, 1, 0)
h[344:348] = b"n+1\0"
with open(path, "wb") as f:
    f.write(h + b"\0" * 4)
    block = bytes(range(256)) * 4096
    for _ in range(mib): f.write(block)
PY
"$TESSERA" serve --grpc-port 0 --metrics-port -1 --http-port 0 --device cpu --data-root "$WORK" \
  --state-dir "$WORK/state" >"$WORK/ports" 2>"$WORK/serve.log" &
PID=$!
for _ in $(seq 100); do grep -q http_port "$WORK/ports" && break; sleep 0.1; done
PORT=$(sed -n 's/^http_port=//p' "$WORK/ports")
hwm() { awk '/VmHWM/ {print $2}' "/proc/$PID/status"; }
before=$(hwm)
start=$(date +%s.%N)
curl -sS -f -T "$WORK/big.nii" "http://127.0.0.1:$PORT/v1/uploads/registration?filename=big.nii" -o "$WORK/answer.json"
end=$(date +%s.%N)
after=$(hwm)
size=$(stat -c %s "$WORK/big.nii")
echo "uploaded $size bytes in $(echo "$end - $start" | bc) s: $(cat "$WORK/answer.json")"
echo "tessera serve peak RSS (VmHWM): before $((before / 1024)) MiB, after $((after / 1024)) MiB, growth $(((after - before) / 1024)) MiB for a $((size >> 20)) MiB file"

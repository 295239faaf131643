#!/usr/bin/env bash
# Builds the genes x GO and PubMed x GO corpora for the SOM atlas:
#   tools/som_data/build_go_corpora.sh [OUT_DIR] [CACHE_DIR]
# OUT_DIR   where the corpora go (default ~/.cache/tessera/som_data)
# CACHE_DIR where the .deb files are downloaded and unpacked
#           (default ~/.cache/tessera/debs)
# Needs apt (apt-get download: no root, no installation) and dpkg-deb; R is not
# needed, the packages ship plain SQLite databases. The som_data binary is
# built with Bazel unless SOM_DATA_BIN names one; BAZEL_STARTUP_OPTS is passed
# to bazel (e.g. "--output_base=/path").
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${1:-$HOME/.cache/tessera/som_data}"
CACHE="${2:-$HOME/.cache/tessera/debs}"
mkdir -p "$OUT" "$CACHE"

cd "$CACHE"
for pkg in r-bioc-org.hs.eg.db r-bioc-go.db; do
  if ! ls "${pkg}"_*.deb >/dev/null 2>&1; then
    echo "downloading $pkg ..." >&2
    apt-get download "$pkg"
  fi
done
X="$CACHE/extracted"
mkdir -p "$X"
for deb in r-bioc-org.hs.eg.db_*.deb r-bioc-go.db_*.deb; do
  stamp="$X/.$(basename "$deb").done"
  [ -f "$stamp" ] || { dpkg-deb -x "$deb" "$X" && touch "$stamp"; }
done
ORG_DB="$(find "$X" -name org.Hs.eg.sqlite | head -n 1)"
GO_DB="$(find "$X" -name GO.sqlite | head -n 1)"
[ -n "$ORG_DB" ] || { echo "org.Hs.eg.sqlite not found under $X" >&2; exit 1; }
[ -n "$GO_DB" ] || { echo "GO.sqlite not found under $X" >&2; exit 1; }

BIN="${SOM_DATA_BIN:-}"
if [ -z "$BIN" ]; then
  cd "$ROOT"
  # shellcheck disable=SC2086
  bazel ${BAZEL_STARTUP_OPTS:-} build --symlink_prefix=/ //tools/som_data:som_data >&2
  # shellcheck disable=SC2086
  BIN="$(bazel ${BAZEL_STARTUP_OPTS:-} info bazel-bin 2>/dev/null)/tools/som_data/som_data"
fi
"$BIN" --org_db="$ORG_DB" --go_db="$GO_DB" --out_dir="$OUT" ${SOM_DATA_FLAGS:-}

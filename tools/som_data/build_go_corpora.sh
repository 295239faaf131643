#!/usr/bin/env bash
# Builds the real SOM atlas corpora from Debian's Bioconductor packages, only
# what is asked for:
#   tools/som_data/build_go_corpora.sh [--pubmed] [--libsvm] [--force] [OUT_DIR] [CACHE_DIR]
# By default only genes x GO (about 20,700 genes x 18,900 GO terms, a few MB:
# genes_go.csr, genes_go.rows.txt, go_features.tsv, corpora.txt).
# --pubmed   also the PubMed x GO corpus (pubmed_go.csr + pubmed_go.rows.txt,
#            about 213 MB more)
# --libsvm   also write the corpora as libsvm text (*.svm)
# --force    rebuild even when the requested corpora are already in OUT_DIR
# OUT_DIR    where the corpora go (default ~/.cache/tessera/som_data)
# CACHE_DIR  where the .deb files are downloaded and unpacked
#            (default ~/.cache/tessera/debs)
# Needs apt (apt-get download: no root, no installation) and dpkg-deb; R is not
# needed, the packages ship plain SQLite databases. The som_data binary is
# built with Bazel unless SOM_DATA_BIN names one; BAZEL_STARTUP_OPTS is passed
# to bazel (e.g. "--output_base=/path").
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

PUBMED=0
LIBSVM=0
FORCE=0
POSITIONAL=()
for arg in "$@"; do
  case "$arg" in
    --pubmed) PUBMED=1 ;;
    --libsvm) LIBSVM=1 ;;
    --force) FORCE=1 ;;
    -h|--help) sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "build_go_corpora.sh: unknown option '$arg' (--pubmed, --libsvm, --force)" >&2; exit 2 ;;
    *) POSITIONAL+=("$arg") ;;
  esac
done
if [ "${#POSITIONAL[@]}" -gt 2 ]; then
  echo "build_go_corpora.sh: at most two directories (OUT_DIR CACHE_DIR), got ${#POSITIONAL[@]}" >&2
  exit 2
fi
OUT="${POSITIONAL[0]:-$HOME/.cache/tessera/som_data}"
CACHE="${POSITIONAL[1]:-$HOME/.cache/tessera/debs}"

# What was asked for is already there: nothing to download or build.
wanted=("$OUT/genes_go.csr" "$OUT/genes_go.rows.txt" "$OUT/go_features.tsv")
[ "$PUBMED" = 1 ] && wanted+=("$OUT/pubmed_go.csr" "$OUT/pubmed_go.rows.txt")
[ "$LIBSVM" = 1 ] && wanted+=("$OUT/genes_go.svm")
[ "$LIBSVM" = 1 ] && [ "$PUBMED" = 1 ] && wanted+=("$OUT/pubmed_go.svm")
if [ "$FORCE" = 0 ]; then
  missing=0
  for f in "${wanted[@]}"; do [ -s "$f" ] || missing=1; done
  if [ "$missing" = 0 ]; then
    echo "corpora already in $OUT (--force rebuilds them)" >&2
    exit 0
  fi
fi
mkdir -p "$OUT" "$CACHE"

# GO.sqlite only names the features; the org database holds both corpora.
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
FLAGS=()
[ "$PUBMED" = 1 ] || FLAGS+=(--no_pubmed)
[ "$LIBSVM" = 1 ] && FLAGS+=(--libsvm)
# shellcheck disable=SC2086
"$BIN" --org_db="$ORG_DB" --go_db="$GO_DB" --out_dir="$OUT" "${FLAGS[@]}" ${SOM_DATA_FLAGS:-}

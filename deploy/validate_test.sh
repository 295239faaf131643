#!/usr/bin/env bash
# Offline validation of deploy/: yamllint on every file; every base and
# overlay renders with `kubectl kustomize`; every rendered object validates
# against the Kubernetes schemas (npm kubernetes-models, validate/validate.mjs)
# and keeps the project's rules (probes, requests, drain < grace, non-root);
# and the validator itself rejects a broken manifest.
#   bazel test //deploy:validate_test
set -uo pipefail
SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TMP="${TEST_TMPDIR:-$(mktemp -d)}/deploy"
rm -rf "$TMP"; mkdir -p "$TMP"
fail() { echo "FAILED: $*" >&2; exit 1; }
# kustomize refuses files behind symlinks that leave its root: work on a copy.
cp -rL "$SRC" "$TMP/deploy" || fail "copying deploy/"
rm -rf "$TMP/deploy/validate/node_modules"
cd "$TMP/deploy"

command -v yamllint >/dev/null || fail "yamllint is missing (./tessera setup installs it)"
yamllint -c .yamllint . || fail "yamllint found problems"
echo "yamllint: clean"

command -v kubectl >/dev/null || fail "kubectl is missing (install Debian's kubernetes-client where no kubectl is present)"
# labels/includeTemplates, replicas and inline patches need kustomize v5 (kubectl >= 1.27).
kustomize_version=$(kubectl version --client 2>/dev/null | awk '/Kustomize Version/ {print $3}')
case "$kustomize_version" in
  v5*|v6*) ;;
  *) fail "kubectl's kustomize is '${kustomize_version:-unknown}'; deploy/ needs v5 (kubectl >= 1.27)" ;;
esac
mkdir -p rendered
for dir in bases/* overlays/*; do
  name="${dir//\//-}"
  kubectl kustomize "$dir" >"rendered/$name.yaml" 2>"rendered/$name.err" \
    || fail "kubectl kustomize $dir: $(cat "rendered/$name.err")"
  echo "rendered $dir: $(grep -c '^kind:' "rendered/$name.yaml") objects"
done

command -v node >/dev/null && command -v npm >/dev/null || fail "node and npm are needed (Debian: nodejs npm)"
# The validator's packages, installed once per package-lock (from the npm registry).
key=$(sha256sum validate/package-lock.json | cut -c1-16)
cache="${TESSERA_NPM_CACHE:-/var/cache/tessera/deploy-validate}/$key"
if [ ! -d "$cache/node_modules/kubernetes-models" ]; then
  mkdir -p "$cache" && cp validate/package.json validate/package-lock.json "$cache/" || fail "cannot write $cache"
  (cd "$cache" && npm ci --no-audit --no-fund --loglevel=error >npm.log 2>&1) || fail "npm ci: $(tail -n 5 "$cache/npm.log")"
fi
cp validate/validate.mjs "$cache/"
node "$cache/validate.mjs" rendered/*.yaml || fail "schema or rule violations (above)"

# The validator can fail: a wrong type, a missing required field, a probe-less
# container and a grace period shorter than the drain must each be caught.
sed 's/^  replicas: 4$/  replicas: "four"/' rendered/overlays-prod.yaml >broken-type.yaml
sed '0,/- containerPort: 50051/s//- hostPort: 50051/' rendered/overlays-prod.yaml >broken-required.yaml
sed 's/readinessProbe:/readinessProbeX:/' rendered/overlays-dev.yaml >broken-probe.yaml
sed 's/terminationGracePeriodSeconds: 45/terminationGracePeriodSeconds: 20/' rendered/overlays-dev.yaml >broken-grace.yaml
for broken in broken-type broken-required broken-probe broken-grace; do
  cmp -s "$broken.yaml" rendered/overlays-prod.yaml && fail "$broken: the mutation did not apply"
  cmp -s "$broken.yaml" rendered/overlays-dev.yaml && fail "$broken: the mutation did not apply"
  if node "$cache/validate.mjs" "$broken.yaml" >"$broken.log" 2>&1; then
    fail "the validator accepted $broken.yaml"
  fi
  echo "$broken rejected: $(head -n 1 "$broken.log")"
done
echo PASSED

#!/usr/bin/env bash
# The generated OpenAPI document (//services/gateway:openapi_json) validates
# against the OpenAPI 3.0 schema (npm @seriousme/openapi-schema-validator,
# installed once per package-lock from the npm registry into a cache, as
# deploy/validate_test.sh does; without the registry or node this FAILS), and
# the validator rejects broken copies of it.
#   bazel test //services/gateway:openapi_validate_test
set -uo pipefail
fail() { echo "FAILED: $*" >&2; exit 1; }
DOC="$1"
VALIDATE_DIR="$(dirname "$2")"
TMP="${TEST_TMPDIR:-$(mktemp -d)}/openapi"
rm -rf "$TMP"; mkdir -p "$TMP"

command -v node >/dev/null && command -v npm >/dev/null || fail "node and npm are needed (Debian: nodejs npm)"
key=$(sha256sum "$VALIDATE_DIR/package-lock.json" | cut -c1-16)
cache="${TESSERA_NPM_CACHE:-/var/cache/tessera/openapi-validate}/$key"
if [ ! -d "$cache/node_modules/@seriousme/openapi-schema-validator" ]; then
  mkdir -p "$cache" && cp "$VALIDATE_DIR/package.json" "$VALIDATE_DIR/package-lock.json" "$cache/" \
    || fail "cannot write $cache"
  (cd "$cache" && npm ci --no-audit --no-fund --loglevel=error >npm.log 2>&1) || fail "npm ci: $(tail -n 5 "$cache/npm.log")"
fi
cp "$VALIDATE_DIR/validate.mjs" "$cache/"
node "$cache/validate.mjs" "$DOC" || fail "the generated document is not valid OpenAPI 3.0 (above)"

# It has what the gateway serves: every public unary RPC under /rpc/, the REST routes, the own routes.
python3 - "$DOC" <<'PY' || fail "the document misses routes (above)"
import json, sys
doc = json.load(open(sys.argv[1]))
paths = doc["paths"]
need = ["/rpc/tessera.v1.SchedulerService/Submit", "/rpc/tessera.v1.FingerprintService/Search",
        "/rpc/tessera.v1.SchedulerService/Watch", "/v1/jobs/{job_id}", "/v1/jobs", "/v1/jobs/{job_id}:cancel",
        "/v1/jobs/{job_id}/events", "/v1/jobs/{job_id}/files/{name}", "/v1/jobs/{job_id}/preview.png",
        "/v1/uploads/registration", "/v1/uploads/reconstruction", "/openapi.json", "/healthz", "/console/"]
missing = [p for p in need if p not in paths]
peer = [p for p in paths if "WorkerService" in p or "RendezvousService" in p]
client_streaming = [p for p in paths if p.endswith("/UploadFile") or p.endswith("/UploadVolume")]
info = doc["components"]["schemas"]["tessera.v1.JobInfo"]["properties"]
problems = []
if missing: problems.append(f"missing paths {missing}")
if peer: problems.append(f"peer-only services exposed: {peer}")
if client_streaming: problems.append(f"client-streaming RPCs under /rpc/: {client_streaming}")
if info.get("state", {}).get("type") != "string" or "JOB_STATE_SUCCEEDED" not in info["state"].get("enum", []):
    problems.append("JobInfo.state is not a string enum")
if problems:
    print("\n".join(problems)); sys.exit(1)
print(f"{len(paths)} paths, {len(doc['components']['schemas'])} schemas")
PY

# The validator can fail: a wrong version, an operation without responses, a bad $ref target type.
python3 - "$DOC" "$TMP" <<'PY' || fail "could not write the broken copies"
import json, sys
doc = json.load(open(sys.argv[1]))
def write(name, d): json.dump(d, open(f"{sys.argv[2]}/{name}.json", "w"))
d = json.loads(json.dumps(doc)); d["openapi"] = 3; write("broken-version", d)
d = json.loads(json.dumps(doc)); del d["paths"]["/v1/jobs/{job_id}"]["get"]["responses"]; write("broken-responses", d)
d = json.loads(json.dumps(doc)); d["paths"]["/v1/jobs/{job_id}"]["get"]["parameters"][0]["in"] = "body"; write("broken-parameter", d)
PY
for broken in broken-version broken-responses broken-parameter; do
  if node "$cache/validate.mjs" "$TMP/$broken.json" >"$TMP/$broken.log" 2>&1; then
    fail "the validator accepted $broken.json"
  fi
  echo "$broken rejected"
done
echo PASSED

#!/usr/bin/env bash
# The runtime image, for real: built without a registry (rootfs_image.sh),
# run by podman as a container with a data volume, mounted TLS and token
# secrets and a published port; probed for gRPC health from outside; sent a
# registration job over TLS with a bearer token; stopped with SIGTERM while a
# second job runs (drain observed, exit code 0); started again on the same
# volume, where the interrupted job is still known and finishes; audit chain
# verified from the host. Skips (with the reason) only where podman cannot
# run containers on the machine.
#   bazel test //docker:container_test   (tagged local: it needs root and podman)
set -uo pipefail
TESSERA="$(readlink -f "${TESSERA_BIN:-cli/tessera}")"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TMP="${TEST_TMPDIR:-$(mktemp -d)}/container"
TAG="localhost/tessera:container-test-$$"
NAME="tessera-container-test-$$"
PODMAN=(podman --runtime runc)
# podman 4.3's default crun fails here ("cgroups in hybrid mode not supported",
# setrlimit refused); runc with explicit limits works.
RUN_LIMITS=(--ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
rm -rf "$TMP"; mkdir -p "$TMP"
log() { printf '[container_test] %s\n' "$*" >&2; }

# The result, as Bazel's test XML: one case, passed, failed or skipped.
finish() {
  local outcome="$1" message="${2:-}"
  local xml="${XML_OUTPUT_FILE:-}"
  if [ -n "$xml" ]; then
    local body=""
    case "$outcome" in
      skipped) body="<skipped message=\"$message\"/>" ;;
      failed) body="<failure message=\"$message\"/>" ;;
    esac
    printf '<?xml version="1.0" encoding="UTF-8"?>\n<testsuites><testsuite name="container" tests="1">'\
'<testcase name="ContainerRun" classname="docker.container_test" result="%s">%s</testcase>'\
'</testsuite></testsuites>\n' "$([ "$outcome" = skipped ] && echo skipped || echo completed)" "$body" >"$xml"
  fi
  if [ "$outcome" = failed ] && "${PODMAN[@]}" container exists "$NAME" 2>/dev/null; then
    "${PODMAN[@]}" logs "$NAME" 2>&1 | tail -n 30 >&2
  fi
  "${PODMAN[@]}" rm -f -t 0 "$NAME" >/dev/null 2>&1
  podman rmi -f "$TAG" >/dev/null 2>&1
  case "$outcome" in
    passed) log "PASSED"; exit 0 ;;
    skipped) log "SKIPPED: $message"; exit 0 ;;
    *) log "FAILED: $message"; exit 1 ;;
  esac
}
fail() { finish failed "$*"; }
check() { "$@" || fail "command failed: $*"; }

# --- Can this machine run containers at all? --------------------------------
[ "$(id -u)" -eq 0 ] || finish skipped "needs root (debootstrap and podman's default storage)"
for tool in podman runc debootstrap openssl; do
  command -v "$tool" >/dev/null || finish skipped "$tool is not installed (./tessera setup installs it)"
done

# --- The image ----------------------------------------------------------------
start=$(date +%s)
"$HERE/rootfs_image.sh" "$TESSERA" "$TAG" || fail "building the image failed"
log "image built in $(( $(date +%s) - start )) s"
probe_out=$("${PODMAN[@]}" run --rm "${RUN_LIMITS[@]}" --entrypoint /usr/local/bin/tessera "$TAG" devices 2>&1)
if [ $? -ne 0 ]; then
  case "$probe_out" in
    *cgroup*|*setrlimit*|*"operation not permitted"*|*"permission denied"*)
      finish skipped "podman cannot run containers here: $(echo "$probe_out" | tail -n 1)" ;;
    *) fail "the binary does not start in the image: $probe_out" ;;
  esac
fi
[ "$("${PODMAN[@]}" run --rm "${RUN_LIMITS[@]}" --entrypoint /usr/bin/id "$TAG" -u)" = 10001 ] \
  || fail "the image does not run as the non-root user 10001"

# --- Secrets: a CA, the server's certificate, tokens ---------------------------
SECRETS="$TMP/secrets"; mkdir -p "$SECRETS"
(
  cd "$SECRETS" && K='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes' &&
  openssl req -x509 $K -keyout ca.key -out ca.pem -days 2 -subj '/CN=Tessera Test CA' &&
  openssl req $K -keyout server.key -out server.csr -subj '/CN=localhost' &&
  printf 'subjectAltName=DNS:localhost,DNS:tessera-scheduler,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' > server.ext &&
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile server.ext
) >"$TMP/openssl.log" 2>&1 || fail "openssl: $(tail -n 3 "$TMP/openssl.log")"
echo "tok-admin-$$-$RANDOM$RANDOM lab-admin admin" >"$SECRETS/tokens"
awk '{print $1}' "$SECRETS/tokens" >"$TMP/client-token"
# The container user reads the secrets (as Kubernetes mounts them: readable, not writable).
chmod 0644 "$SECRETS"/*; chmod 0755 "$SECRETS"

# --- Data volume: a registration problem made from a real volume --------------
DATA="$TMP/data"; mkdir -p "$DATA"
check cp /usr/share/mricron/templates/ch2.nii.gz "$DATA/fixed.nii.gz"
check cp /usr/share/mricron/templates/aal.nii.gz "$DATA/fixed_labels.nii.gz"
"$TESSERA" synth --image "$DATA/fixed.nii.gz" --labels "$DATA/fixed_labels.nii.gz" --out "$DATA/synth" \
  >"$TMP/synth.log" 2>&1 || fail "tessera synth: $(tail -n 3 "$TMP/synth.log")"
chown -R 10001:10001 "$DATA"

PORT=$(( 20000 + ($$ % 20000) ))
run_server() {
  "${PODMAN[@]}" run -d --name "$NAME" "${RUN_LIMITS[@]}" \
    -p "127.0.0.1:$PORT:50051" -v "$DATA:/data" -v "$SECRETS:/etc/tessera:ro" "$TAG" \
    --host=0.0.0.0 --grpc-port=50051 --metrics-port=9464 --data-root=/data --state-dir=/data/state \
    --token-file=/etc/tessera/tokens --tls-cert=/etc/tessera/server.pem --tls-key=/etc/tessera/server.key \
    --audit-log=/data/audit.jsonl --drain-timeout-s=20 >/dev/null || fail "podman run failed"
  # Health from outside the container, over TLS, without a token (health stays open).
  for _ in $(seq 1 60); do
    "$TESSERA" health --server "localhost:$PORT" --tls-ca "$SECRETS/ca.pem" --quiet && return 0
    sleep 0.5
  done
  fail "the container never became healthy on port $PORT"
}
CLIENT=(--server "localhost:$PORT" --tls-ca "$SECRETS/ca.pem" --token-file "$TMP/client-token")
REGISTER=(register --fixed /data/fixed.nii.gz --moving /data/synth/moving.nii.gz
          --fixed-labels /data/fixed_labels.nii.gz --moving-labels /data/synth/moving_labels.nii.gz
          --stages affine --device cpu)

run_server
log "container healthy"
# As a Kubernetes exec probe dials it: 127.0.0.1, the certificate checked against the Service's name.
"$TESSERA" health --server "127.0.0.1:$PORT" --tls-ca "$SECRETS/ca.pem" --tls-server-name tessera-scheduler \
  --service liveness >"$TMP/probe.log" 2>&1 || fail "exec-style probe failed: $(cat "$TMP/probe.log")"
"$TESSERA" health --server "127.0.0.1:$PORT" --tls-ca "$SECRETS/ca.pem" --tls-server-name wrong-name --quiet \
  && fail "a probe checking the wrong certificate name succeeded"
# Without a token the scheduler refuses (health alone is open).
"$TESSERA" job list --server "localhost:$PORT" --tls-ca "$SECRETS/ca.pem" >"$TMP/anon.log" 2>&1 \
  && fail "an unauthenticated job list succeeded"
grep -q "missing 'authorization: Bearer" "$TMP/anon.log" || fail "no UNAUTHENTICATED for a call without a token: $(cat "$TMP/anon.log")"

# 1. A registration job, watched to the end; its outputs land on the volume.
"$TESSERA" job submit "${CLIENT[@]}" --id job-1 --watch "${REGISTER[@]}" --scales 4,2 --out /data/out1 \
  >"$TMP/job1.log" 2>&1 || fail "job-1 did not succeed: $(tail -n 5 "$TMP/job1.log")"
grep -q SUCCEEDED "$TMP/job1.log" || fail "job-1: no SUCCEEDED in $(tail -n 3 "$TMP/job1.log")"
job_id() { grep -o '"job_id":"[^"]*"' "$1" | head -n 1 | cut -d'"' -f4; }
JOB1=$(job_id "$TMP/job1.log")
[ -s "$DATA/out1/warped.nii.gz" ] || fail "job-1 wrote no warped.nii.gz to the volume"
log "job-1 succeeded; outputs on the volume"

# 2. A longer job, then SIGTERM while it runs: the server drains and exits 0.
"$TESSERA" job submit "${CLIENT[@]}" --id job-2 "${REGISTER[@]}" --scales 4,2,1 --out /data/out2 \
  >"$TMP/job2.log" 2>&1 || fail "job-2 was not accepted: $(cat "$TMP/job2.log")"
JOB2=$(job_id "$TMP/job2.log")
[ -n "$JOB1" ] && [ -n "$JOB2" ] || fail "no job ids in the submit output"
for _ in $(seq 1 40); do
  "$TESSERA" job get "${CLIENT[@]}" "$JOB2" 2>/dev/null | grep -q RUNNING && break
  sleep 0.5
done
stop_start=$(date +%s)
"${PODMAN[@]}" stop -t 60 "$NAME" >/dev/null || fail "podman stop failed"
stop_s=$(( $(date +%s) - stop_start ))
"${PODMAN[@]}" logs "$NAME" >"$TMP/server1.log" 2>&1
grep -q "received SIGTERM; draining" "$TMP/server1.log" || fail "no drain on SIGTERM in the server log"
grep -q "drained" "$TMP/server1.log" || fail "the server did not finish draining"
code=$("${PODMAN[@]}" inspect "$NAME" --format '{{.State.ExitCode}}')
[ "$code" = 0 ] || fail "exit code $code after SIGTERM"
log "SIGTERM: drained and exited 0 in ${stop_s} s"
"${PODMAN[@]}" rm "$NAME" >/dev/null

# 3. The same volume in a new container: nothing lost. job-1 is still there,
#    and job-2 (interrupted) finishes.
run_server
"$TESSERA" job get "${CLIENT[@]}" "$JOB1" >"$TMP/job1-again.log" 2>&1 || fail "job-1 unknown after restart"
grep -q SUCCEEDED "$TMP/job1-again.log" || fail "job-1 lost its state: $(cat "$TMP/job1-again.log")"
"$TESSERA" job watch "${CLIENT[@]}" "$JOB2" >"$TMP/job2-watch.log" 2>&1 \
  || fail "job-2 did not finish after the restart: $(tail -n 5 "$TMP/job2-watch.log")"
[ -s "$DATA/out2/warped.nii.gz" ] || fail "job-2 wrote no warped.nii.gz"
grep -q "re-queued" "$TMP/job2-watch.log" || fail "job-2 was not interrupted by the stop (it should have been re-queued)"
log "after restart: job-1 kept, job-2 finished"
"${PODMAN[@]}" stop -t 30 "$NAME" >/dev/null

# 4. The audit trail written in the container verifies on the host.
"$TESSERA" audit verify --log "$DATA/audit.jsonl" >"$TMP/audit.log" 2>&1 \
  || fail "audit verify: $(cat "$TMP/audit.log")"
grep -q '"method":"/tessera.v1.SchedulerService/Submit","request_id":"job-2","outcome":"OK"' "$DATA/audit.jsonl" \
  || fail "no record of job-2's Submit in the audit log"
grep -q '"outcome":"UNAUTHENTICATED"' "$DATA/audit.jsonl" || fail "the refused call left no audit record"
finish passed

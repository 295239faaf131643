// Validates rendered Kubernetes manifests (multi-document YAML, e.g. the
// output of `kubectl kustomize`) against the Kubernetes OpenAPI schemas of
// kubernetes-models, then checks the rules this project's deployments keep.
//   node deploy/validate/validate.mjs FILE.yaml...   (exit 0 valid, 1 not)
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

const errors = [];
let count = 0;

function fail(where, message) {
  errors.push(`${where}: ${message}`);
}

async function modelFor(apiVersion, kind) {
  // "apps/v1" -> kubernetes-models/apps/v1; "v1" -> kubernetes-models/v1.
  const module = await import(`kubernetes-models/${apiVersion}`).catch(() => null);
  return module ? module[kind] : undefined;
}

// Rules beyond the schema: what every Tessera workload must have.
function checkWorkload(where, obj) {
  const pod = obj.spec?.template?.spec;
  if (!pod) return;
  const drainArg = (c) => (c.args || []).find((a) => a.startsWith("--drain-timeout-s="));
  for (const c of pod.containers || []) {
    const at = `${where} container ${c.name}`;
    for (const probe of ["startupProbe", "livenessProbe", "readinessProbe"]) {
      if (!c[probe]) fail(at, `no ${probe}`);
    }
    for (const p of ["livenessProbe", "readinessProbe", "startupProbe"]) {
      const probe = c[p];
      if (probe && !probe.grpc && !probe.exec) fail(at, `${p} is neither a gRPC nor an exec health check`);
      if (probe?.grpc && typeof probe.grpc.port !== "number") fail(at, `${p} needs a numeric port`);
    }
    if (!c.resources?.requests?.cpu || !c.resources?.requests?.memory) fail(at, "no cpu/memory requests");
    if (c.securityContext?.allowPrivilegeEscalation !== false) fail(at, "allowPrivilegeEscalation must be false");
    const drain = drainArg(c);
    const grace = pod.terminationGracePeriodSeconds ?? 30;
    const drainS = drain ? Number(drain.split("=")[1]) : 30;
    if (!(grace > drainS)) fail(at, `terminationGracePeriodSeconds ${grace} must exceed --drain-timeout-s ${drainS}`);
    const gpus = c.resources?.limits?.["nvidia.com/gpu"];
    if (gpus !== undefined && !pod.nodeSelector) fail(at, "requests GPUs but has no nodeSelector");
  }
  if (pod.securityContext?.runAsNonRoot !== true) fail(where, "pod securityContext.runAsNonRoot must be true");
}

for (const file of process.argv.slice(2)) {
  const docs = parseAllDocuments(readFileSync(file, "utf8"));
  for (const doc of docs) {
    if (doc.errors.length) {
      fail(file, `YAML: ${doc.errors[0].message}`);
      continue;
    }
    const obj = doc.toJS();
    if (obj === null) continue;
    count++;
    const where = `${file}: ${obj.kind}/${obj.metadata?.name}`;
    const Model = await modelFor(obj.apiVersion, obj.kind);
    if (!Model) {
      fail(where, `unknown apiVersion/kind ${obj.apiVersion} ${obj.kind}`);
      continue;
    }
    try {
      new Model(obj).validate();
    } catch (e) {
      fail(where, `schema: ${e.message}`);
    }
    if (["Deployment", "StatefulSet"].includes(obj.kind)) checkWorkload(where, obj);
  }
}
if (count === 0) fail("input", "no Kubernetes objects");
for (const e of errors) console.error(e);
console.log(`${count} objects, ${errors.length} problems`);
process.exit(errors.length ? 1 : 0);

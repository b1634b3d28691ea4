// Issue 6 §3: every overlay of deploy/k8s renders with `kubectl kustomize`
// and each rendered object validates offline against the Kubernetes schemas
// (npm kubernetes-models; ServiceMonitor against prometheus-operator's).
// Also checks what the issue asks of the objects: gRPC probes, GPU limits
// and a large /dev/shm in the gpu overlay, one worker pod per node.
//
//   node k8s_manifests_test.mjs REPO_ROOT
import { execFileSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { need, fail } from "./node_deps.mjs";

const YAML = need("yaml");
const root = process.argv[2] || fail("usage: k8s_manifests_test.mjs REPO_ROOT");
const overlays = join(root, "deploy", "k8s", "overlays");

// apiVersion -> module exporting the kinds.
function modelModule(apiVersion) {
  if (apiVersion === "monitoring.coreos.com/v1") {
    return "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";
  }
  return `kubernetes-models/${apiVersion}`;
}

let failures = 0;
const names = readdirSync(overlays).sort();
if (!names.includes("cpu") || !names.includes("gpu")) fail(`overlays cpu and gpu expected, found ${names}`);
for (const overlay of names) {
  const dir = join(overlays, overlay);
  let text;
  try {
    text = execFileSync("kubectl", ["kustomize", dir], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  } catch (e) {
    console.error(`FAIL ${overlay}: kubectl kustomize: ${e.stderr || e.message}`);
    failures++;
    continue;
  }
  const objects = YAML.parseAllDocuments(text).map((d) => d.toJSON()).filter(Boolean);
  const kinds = {};
  for (const object of objects) {
    const where = `${overlay}: ${object.kind}/${object.metadata?.name}`;
    kinds[object.kind] = object;
    let Model;
    try {
      Model = need(modelModule(object.apiVersion))[object.kind];
    } catch (e) {
      Model = undefined;
    }
    if (!Model) {
      console.error(`FAIL ${where}: no schema for ${object.apiVersion} ${object.kind}`);
      failures++;
      continue;
    }
    try {
      new Model(object).validate();
      console.log(`ok   ${where}`);
    } catch (e) {
      console.error(`FAIL ${where}: ${e.message}`);
      failures++;
    }
  }
  // What the issue asks beyond the schema.
  const expect = (cond, what) => {
    if (!cond) {
      console.error(`FAIL ${overlay}: ${what}`);
      failures++;
    }
  };
  for (const kind of ["Deployment", "Service", "PersistentVolumeClaim", "StatefulSet", "ServiceMonitor", "NetworkPolicy", "ConfigMap", "Secret"]) {
    expect(kinds[kind], `no ${kind}`);
  }
  const coordinator = kinds.Deployment?.spec.template.spec.containers[0];
  expect(kinds.Deployment?.spec.replicas === 1, "coordinator Deployment must have 1 replica");
  const args = coordinator?.args || [];
  if (overlay.endsWith("-tls")) {
    // Mutual TLS: the kubelet's gRPC probe has no TLS, so TCP probes.
    for (const flag of ["--tls-cert=", "--tls-key=", "--tls-client-ca="]) {
      expect(args.some((a) => a.startsWith(flag)), `coordinator ${flag} under TLS`);
    }
    expect(coordinator?.readinessProbe?.tcpSocket && coordinator?.livenessProbe?.tcpSocket,
           "coordinator needs TCP probes under TLS");
    expect(kinds.StatefulSet?.spec.template.spec.containers[0]?.env?.some((e) => e.name === "ZBPP_TLS_DIR"),
           "workers dial TLS (ZBPP_TLS_DIR)");
  } else {
    expect(coordinator?.readinessProbe?.grpc && coordinator?.livenessProbe?.grpc, "coordinator needs gRPC probes");
  }
  const workerPod = kinds.StatefulSet?.spec.template.spec;
  const worker = workerPod?.containers[0];
  expect(worker?.readinessProbe?.grpc && worker?.livenessProbe?.grpc, "workers need gRPC probes");
  expect(worker?.resources?.requests, "workers need resource requests");
  expect(workerPod?.affinity?.podAntiAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.[0]?.topologyKey ===
           "kubernetes.io/hostname", "one worker pod per node (required pod anti-affinity on the hostname)");
  if (overlay === "gpu") {
    expect(Number(worker?.resources?.limits?.["nvidia.com/gpu"]) >= 1, "nvidia.com/gpu in the worker limits");
    const shm = workerPod?.volumes?.find((v) => v.name === "dshm");
    expect(shm?.emptyDir?.medium === "Memory" && /Gi$/.test(shm?.emptyDir?.sizeLimit || "") &&
             parseInt(shm.emptyDir.sizeLimit) >= 16, "a large in-memory /dev/shm (>= 16Gi)");
    expect(worker?.env?.some((e) => e.name.startsWith("NCCL_")), "NCCL environment");
  }
}
if (failures) fail(`${failures} problem(s)`);
console.log("k8s manifests: all overlays render and validate");

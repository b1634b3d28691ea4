"""Every overlay of deploy/k8s renders with `kubectl kustomize`, and each
rendered object validates offline against the schemas of Kubernetes
KUBERNETES (kubernetes-validate, strict: a field the schema does not know is
an error); the ServiceMonitor against prometheus-operator's CRD schema (the
pydantic models cloudcoil generates from it: types, enums, patterns and
required fields, and a field the model does not know is an error). Also
checks what the objects must hold: gRPC probes (TCP probes and TLS flags
under TLS), one worker pod per node, the workers confined to the datasets
volume, no bearer token shipped (the coordinator mounts the Secret
zbpp-token, which the user creates; no rendered object holds a token), and
in the gpu overlay the GPU limit, a large in-memory /dev/shm and the NCCL
environment.

    python k8s_manifests_test.py REPO_ROOT
"""

import subprocess
import sys
from pathlib import Path

from deploytest import Tally, fail, need

KUBERNETES = "1.37"
KINDS = (
    "Deployment Service PersistentVolumeClaim StatefulSet ServiceMonitor NetworkPolicy "
    "ConfigMap"
).split()
# The token the base shipped until it stopped shipping one
# (common/call_auth.h kPlaceholderToken refuses it).
PLACEHOLDER_TOKEN = "replace-me-with-a-long-random-token"

yaml = need("yaml", "PyYAML")
kubernetes_validate = need("kubernetes_validate", "kubernetes-validate")
prometheus_operator = need(
    "cloudcoil.models.prometheus_operator.v1", "cloudcoil-models-prometheus-operator"
)
pydantic = need("pydantic", "pydantic")
CRDS = {("monitoring.coreos.com/v1", "ServiceMonitor"): prometheus_operator.ServiceMonitor}


def schema_problem(obj):
    """Why `obj` does not validate against its schema, or None."""
    crd = CRDS.get((obj.get("apiVersion"), obj.get("kind")))
    if crd:
        try:
            model = crd.model_validate(obj)
        except pydantic.ValidationError as e:
            return "; ".join(
                f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors()
            )
        back = model.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return None if back == obj else f"fields the CRD schema does not know: {unknown(obj, back)}"
    try:
        kubernetes_validate.validate(obj, KUBERNETES, strict=True)
    except kubernetes_validate.ValidationError as e:
        return f"{'.'.join(map(str, e.path))}: {e.message}"
    except kubernetes_validate.SchemaNotFoundError:
        return f"no schema for {obj.get('apiVersion')} {obj.get('kind')} in Kubernetes {KUBERNETES}"
    return None


def unknown(given, kept, path=""):
    """The paths in `given` that are missing from or differ in `kept`."""
    if isinstance(given, dict) and isinstance(kept, dict):
        return [
            p
            for key, value in given.items()
            for p in (
                unknown(value, kept[key], f"{path}.{key}") if key in kept else [f"{path}.{key}"]
            )
        ]
    if isinstance(given, list) and isinstance(kept, list) and len(given) == len(kept):
        return [
            p for i, (a, b) in enumerate(zip(given, kept)) for p in unknown(a, b, f"{path}[{i}]")
        ]
    return [] if given == kept else [path or "$"]


def render(tally, overlay):
    """The overlay's objects, or None after a problem."""
    run = subprocess.run(["kubectl", "kustomize", str(overlay)], capture_output=True, text=True)
    if run.returncode != 0:
        tally.problem(f"{overlay.name}: kubectl kustomize: {run.stderr.strip()}")
        return None
    return [obj for obj in yaml.safe_load_all(run.stdout) if obj]


def pod_spec(obj):
    """The pod template's spec of a workload object (empty if absent)."""
    return (obj or {}).get("spec", {}).get("template", {}).get("spec", {})


def probes(container, kind):
    """Whether both the readiness and the liveness probe are of `kind`."""
    return bool(
        container.get("readinessProbe", {}).get(kind)
        and container.get("livenessProbe", {}).get(kind)
    )


def check_objects(tally, overlay, kinds, objects):
    """What the deployment needs beyond the schemas (`kinds`: the last object of each kind)."""

    def expect(condition, what):
        tally.expect(condition, f"{overlay}: {what}")

    for kind in KINDS:
        expect(kind in kinds, f"no {kind}")
    # The token: the user's own Secret, never one shipped with the manifests.
    expect(
        not any(o.get("kind") == "Secret" for o in objects),
        "no Secret rendered (zbpp-token is the user's to create)",
    )
    expect(PLACEHOLDER_TOKEN not in yaml.safe_dump_all(objects), "no placeholder token")
    token_volume = next(
        (v for v in pod_spec(kinds.get("Deployment")).get("volumes", []) if v.get("name") == "token"),
        {},
    )
    expect(
        (token_volume.get("secret") or {}).get("secretName") == "zbpp-token"
        and not (token_volume.get("secret") or {}).get("optional"),
        "the coordinator mounts the Secret zbpp-token, not optional",
    )
    expect(
        (kinds.get("Deployment") or {}).get("spec", {}).get("replicas") == 1,
        "coordinator Deployment must have 1 replica",
    )
    pod = pod_spec(kinds.get("StatefulSet"))
    coordinator = (pod_spec(kinds.get("Deployment")).get("containers") or [{}])[0]
    worker = (pod.get("containers") or [{}])[0]
    if overlay.endswith("-tls"):
        # Mutual TLS: the kubelet's gRPC probe has no TLS, so TCP probes.
        for flag in ("--tls-cert=", "--tls-key=", "--tls-client-ca="):
            expect(
                any(a.startswith(flag) for a in coordinator.get("args", [])),
                f"coordinator {flag} under TLS",
            )
        expect(probes(coordinator, "tcpSocket"), "coordinator needs TCP probes under TLS")
        expect(
            any(e.get("name") == "ZBPP_TLS_DIR" for e in worker.get("env", [])),
            "workers dial TLS (ZBPP_TLS_DIR)",
        )
    else:
        expect(probes(coordinator, "grpc"), "coordinator needs gRPC probes")
    expect(probes(worker, "grpc"), "workers need gRPC probes")
    # Datasets: a read-only volume, and the workers confined to it.
    mounts = {m.get("mountPath"): m for m in worker.get("volumeMounts", [])}
    expect(
        (mounts.get("/var/lib/zbpp/datasets") or {}).get("readOnly") is True,
        "workers mount /var/lib/zbpp/datasets read-only",
    )
    expect(
        ((kinds.get("ConfigMap") or {}).get("data") or {}).get("ZBPP_DATA_ROOTS")
        == "/var/lib/zbpp/datasets",
        "the workers' --data-root (ZBPP_DATA_ROOTS) is the datasets volume",
    )
    expect(worker.get("resources", {}).get("requests"), "workers need resource requests")
    anti = pod.get("affinity", {}).get("podAntiAffinity", {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or [{}]
    expect(
        anti[0].get("topologyKey") == "kubernetes.io/hostname",
        "one worker pod per node (required pod anti-affinity on the hostname)",
    )
    if overlay == "gpu":
        gpus = str(worker.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", "0"))
        expect(gpus.isdigit() and int(gpus) >= 1, "nvidia.com/gpu in the worker limits")
        shm = next(
            (v.get("emptyDir") or {} for v in pod.get("volumes", []) if v.get("name") == "dshm"), {}
        )
        size = str(shm.get("sizeLimit", ""))
        expect(
            shm.get("medium") == "Memory"
            and size.endswith("Gi")
            and size[:-2].isdigit()
            and int(size[:-2]) >= 16,
            "a large in-memory /dev/shm (>= 16Gi)",
        )
        expect(
            any(e.get("name", "").startswith("NCCL_") for e in worker.get("env", [])),
            "NCCL environment",
        )


def main():
    if len(sys.argv) != 2:
        fail("usage: k8s_manifests_test.py REPO_ROOT")
    overlays = Path(sys.argv[1]) / "deploy" / "k8s" / "overlays"
    names = sorted(p.name for p in overlays.iterdir() if p.is_dir()) if overlays.is_dir() else []
    if "cpu" not in names or "gpu" not in names:
        fail(f"overlays cpu and gpu expected, found {names}")
    tally = Tally()
    for name in names:
        objects = render(tally, overlays / name)
        if objects is None:
            continue
        kinds = {}
        for obj in objects:
            where = f"{name}: {obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"
            kinds[obj.get("kind")] = obj
            problem = schema_problem(obj)
            if problem:
                tally.problem(f"{where}: {problem}")
            else:
                tally.ok(where)
        check_objects(tally, name, kinds, objects)
    tally.finish(f"k8s manifests: all overlays render and validate (Kubernetes {KUBERNETES})")


if __name__ == "__main__":
    main()

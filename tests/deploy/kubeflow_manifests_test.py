"""deploy/kubeflow validates offline against Kubeflow Trainer's own API
models (kubeflow-trainer-api: TrainJob and ClusterTrainingRuntime as pydantic
models; a field the model does not know is an error), the ConfigMap against
Kubernetes' schema (kubernetes-validate, strict), and holds what zbpp needs:
the runtime `zbpp` that Kubeflow's SDK can use (its framework label, a
trainer "node" container on the replicated job the TrainJob's fields apply
to), the NCCL environment of deploy/k8s/overlays/gpu, a large in-memory
/dev/shm, the GPU limit; the example TrainJob trains the main GPU job
(deploy/examples/gpt-bible-gpu-nccl.yaml, whose text its ConfigMap carries)
on as many GPUs as the spec has workers; and TrainerClient's TrainJob for
`train(runtime="zbpp", trainer=CustomTrainerContainer(...))`, built by the
SDK's own code from the runtime, validates too.

    python kubeflow_manifests_test.py REPO_ROOT
"""

import sys
from pathlib import Path

from deploytest import Tally, fail, need
from k8s_manifests_test import KUBERNETES, unknown

yaml = need("yaml", "PyYAML")
kubernetes_validate = need("kubernetes_validate", "kubernetes-validate")
pydantic = need("pydantic", "pydantic")
try:
    from kubeflow.trainer import CustomTrainerContainer
    from kubeflow.trainer.backends.kubernetes import backend as sdk_backend
    from kubeflow_trainer_api import models
except ImportError as e:
    fail(f"Kubeflow's SDK not found for {sys.executable} ({e}); run scripts/install-deps.sh "
         "(requirements/python-client.txt)")

MODELS = {
    "ClusterTrainingRuntime": models.TrainerV1alpha1ClusterTrainingRuntime,
    "TrainJob": models.TrainerV1alpha1TrainJob,
}
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
NCCL_NAMES = ("ZBPP_DEVICE", "NCCL_SOCKET_IFNAME", "NCCL_DEBUG")


def problem(obj):
    """Why `obj` does not validate, or None."""
    model = MODELS.get(obj.get("kind")) if obj.get("apiVersion") == \
        "trainer.kubeflow.org/v1alpha1" else None
    if model is None:
        try:
            kubernetes_validate.validate(obj, KUBERNETES, strict=True)
        except kubernetes_validate.ValidationError as e:
            return f"{'.'.join(map(str, e.path))}: {e.message}"
        return None
    # from_dict, as Kubeflow's SDK reads them (it turns quantities such as
    # "8" or 64Gi into the model's Quantity).
    try:
        parsed = model.from_dict(obj)
    except (pydantic.ValidationError, ValueError) as e:
        return str(e).replace("\n", "; ")
    # Every field given survives the model (which adds defaults, e.g. a
    # gRPC probe's service "").
    lost = unknown(obj, parsed.to_dict())
    return f"fields the Trainer API does not know: {lost}" if lost else None


def env_of(container):
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def main(root):
    tally = Tally()
    folder = root / "deploy" / "kubeflow"
    objects, before = {}, tally.failures
    for path in sorted(folder.glob("*.yaml")):
        for obj in yaml.safe_load_all(path.read_text()):
            why = problem(obj)
            where = f"{path.relative_to(root)}: {obj['kind']} {obj['metadata']['name']}"
            tally.expect(why is None, f"{where}: {why}")
            objects[obj["kind"]] = obj
    if tally.failures == before:
        tally.ok(f"{', '.join(sorted(objects))} validate (Trainer API models, Kubernetes "
                 f"{KUBERNETES})")
    runtime, trainjob, jobs = (objects.get(k) for k in
                               ("ClusterTrainingRuntime", "TrainJob", "ConfigMap"))
    if not (runtime and trainjob and jobs):
        fail(f"deploy/kubeflow lacks a ClusterTrainingRuntime, TrainJob or ConfigMap: "
             f"{sorted(objects)}")

    tally.expect(runtime["metadata"]["name"] == "zbpp", "the runtime is named zbpp")
    tally.expect(runtime["metadata"]["labels"].get("trainer.kubeflow.org/framework") == "zbpp",
                 "the runtime has the framework label Kubeflow's SDK needs")
    replicated = {r["name"]: r for r in runtime["spec"]["template"]["spec"]["replicatedJobs"]}
    tally.expect(set(replicated) == {"coordinator", "node"},
                 f"a coordinator and a node replicated job, got {sorted(replicated)}")
    node_job = replicated["node"]["template"]
    tally.expect(node_job["metadata"]["labels"].get(ANCESTOR) == "trainer",
                 "the TrainJob's trainer fields apply to the node pods")
    pod = node_job["spec"]["template"]["spec"]
    node = next((c for c in pod["containers"] if c["name"] == "node"), None)
    if node is None:
        fail("no container named node (the Trainer's trainer container) in the node pods")
    overlay = yaml.safe_load((root / "deploy/k8s/overlays/gpu/gpu-workers.yaml").read_text())
    gpu_worker = overlay["spec"]["template"]["spec"]["containers"][0]
    want = {k: v for k, v in env_of(gpu_worker).items() if k in NCCL_NAMES or
            k.startswith("NCCL_")}
    have = {k: v for k, v in env_of(node).items() if k in want or k.startswith("NCCL_")}
    tally.expect(have == want, f"node env {have} is the gpu overlay's {want}")
    dshm = next((v for v in pod["volumes"] if v["name"] == "dshm"), {})
    tally.expect(dshm.get("emptyDir", {}).get("medium") == "Memory", "/dev/shm in memory")
    tally.expect(node["resources"]["limits"].get("nvidia.com/gpu") ==
                 gpu_worker["resources"]["limits"]["nvidia.com/gpu"],
                 "the node pods' GPU limit is the gpu overlay's")
    coordinator = replicated["coordinator"]["template"]["spec"]["template"]["spec"]
    tally.expect(coordinator["containers"][0]["readinessProbe"].get("grpc", {}).get("port") ==
                 50051, "the coordinator is ready when its gRPC health says so")
    tally.expect(replicated["node"].get("dependsOn") == [{"name": "coordinator",
                                                          "status": "Ready"}],
                 "the nodes start once the coordinator is ready")

    # The example: the main GPU job on numNodes x GPUs = its workers.
    spec_path = root / "deploy/examples/gpt-bible-gpu-nccl.yaml"
    trainer = trainjob["spec"]["trainer"]
    name = Path(trainer["args"][0]).name
    tally.expect(trainjob["spec"]["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime", "name": "zbpp"},
        "the TrainJob runs on the zbpp ClusterTrainingRuntime")
    tally.expect(jobs["data"].get(name) == spec_path.read_text(),
                 f"the ConfigMap's {name} is {spec_path.relative_to(root)}'s text")
    mounts = {m["name"]: m["mountPath"] for m in node["volumeMounts"]}
    tally.expect(str(Path(trainer["args"][0]).parent) == mounts.get("jobs"),
                 "trainer.args[0] is in the mounted zbpp-jobs ConfigMap")
    spec = yaml.safe_load(spec_path.read_text())
    gpus = int(trainer["resourcesPerNode"]["limits"]["nvidia.com/gpu"])
    workers = spec["pipeline"]["stages"] * spec["pipeline"].get("data_parallel", 1)
    tally.expect(trainer["numNodes"] * gpus == workers,
                 f"numNodes x GPUs = {trainer['numNodes']} x {gpus}, the spec's {workers} workers")

    # Kubeflow's SDK: the runtime as TrainerClient reads it, and the TrainJob
    # its train(runtime="zbpp", trainer=CustomTrainerContainer(...)) builds.
    backend = object.__new__(sdk_backend.KubernetesBackend)
    cr = models.TrainerV1alpha1ClusterTrainingRuntime.from_dict(runtime)
    seen = backend._KubernetesBackend__get_runtime_from_cr(cr)
    tally.expect((seen.name, seen.trainer.framework, seen.trainer.device_count) ==
                 ("zbpp", "zbpp", "8"), f"the SDK reads the runtime as {seen}")
    built = backend._get_trainjob_spec(runtime=seen, trainer=CustomTrainerContainer(
        image="zbpp:cuda", num_nodes=1, resources_per_node={"gpu": 8},
        env={"ZBPP_JOB_SPEC": trainer["args"][0]}))
    sdk_job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
               "metadata": {"name": "from-the-sdk"},
               "spec": built.to_dict()}
    why = problem(sdk_job)
    tally.expect(why is None, f"the SDK's TrainJob validates: {why}")
    tally.expect(sdk_job["spec"]["runtimeRef"]["name"] == "zbpp" and
                 sdk_job["spec"]["trainer"]["resourcesPerNode"]["limits"]["nvidia.com/gpu"]
                 in (8, "8") and {"name": "ZBPP_JOB_SPEC", "value": trainer["args"][0]}
                 in sdk_job["spec"]["trainer"]["env"],
                 f"the SDK's TrainJob names the runtime, the GPUs and the spec: {sdk_job}")
    tally.finish("deploy/kubeflow: the zbpp runtime and the example TrainJob validate")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())

"""PURE: the Kubernetes manifests of one lock, as data (render.py serializes them: valid YAML by construction).

  NAME_<lock12>.job.yaml       a batch/v1 Job: one node, an init container that runs the preflight on the node
                               the pod landed on, then the training container
  NAME_<lock12>.trainjob.yaml  a Kubeflow Trainer TrainJob (trainer.kubeflow.org/v1alpha1, Trainer v2.2+) on the
                               stock torch-distributed runtime: numNodes × nvidia.com/gpu, the preflight first in
                               the trainer's command (a TrainJob patches only the containers its runtime defines,
                               so it cannot add an init container: the v2.3.0 CRD's runtimePatches list
                               env/name/securityContext/volumeMounts for initContainers)

Both: the image by digest, nvidia.com/gpu limits, /dev/shm as a memory-backed emptyDir, cluster.mounts as hostPath
volumes, tolerations for the GPU nodes' taints, node affinity from the lock (affinity.py), a non-root user (the image's).
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from envman.cluster.affinity import node_affinity
from envman.cluster.plan import LockFacts, Shape, Site, image_env, preflight_argv, train_argv, trainer_argv
from envman.image.plan import APP_UID, SHM_SIZE, WORKDIR

TRAINER_API = "trainer.kubeflow.org/v1alpha1"
TORCH_RUNTIME = "torch-distributed"  # Kubeflow Trainer's stock ClusterTrainingRuntime for PyTorch
RUNTIME_JOB = "node"  # its replicated job and container are both named "node"
SHM = "dshm"


def k8s_name(lf: LockFacts, suffix: str = "") -> str:
    """A DNS-1123 label (≤ 63): NAME[-PROFILE]-<lock12>[-suffix]."""
    base = re.sub(r"[^a-z0-9-]+", "-", lf.job_name.lower()).strip("-")
    tail = f"-{lf.short}{suffix}"
    return base[: 63 - len(tail)].rstrip("-") + tail


def labels(lf: LockFacts) -> dict[str, str]:
    out = {"app.kubernetes.io/name": k8s_name(lf)[:63], "app.kubernetes.io/managed-by": "envman",
           "dev.envman/lock": lf.short}
    if lf.profile:
        out["dev.envman/profile"] = lf.profile[:63].rstrip("._-")  # a label value: at most 63 characters
    return out


def _gpu_limits(shape: Shape) -> dict[str, Any]:
    return {"limits": {"nvidia.com/gpu": shape.gpus_per_node}} if shape.gpus_per_node else {}


def _env(preflight: bool) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in image_env(preflight)]


def _container_security() -> dict[str, Any]:
    return {"allowPrivilegeEscalation": False}


def volume_mounts(site: Site) -> list[dict[str, Any]]:
    """The training container's mounts: /dev/shm, then cluster.mounts (SRC[:DST[:ro|rw]], DST defaulting to SRC as
    Apptainer's --bind and pyxis read it), each the hostPath volume ``data-N`` of ``pod_basics``."""
    out: list[dict[str, Any]] = [{"name": SHM, "mountPath": "/dev/shm"}]
    for i, m in enumerate(site.mounts):
        parts = m.split(":")
        out.append({"name": f"data-{i}", "mountPath": parts[1] if len(parts) > 1 else parts[0],
                    **({"readOnly": True} if parts[2:] == ["ro"] else {})})
    return out


def pod_basics(lf: LockFacts, site: Site, shape: Shape) -> dict[str, Any]:
    """What both manifests put on the pod: security context, shm and data volumes, tolerations, affinity. A data
    volume is a hostPath of type Directory: a path missing on the node fails the pod, never mounts an empty folder."""
    spec: dict[str, Any] = {
        "securityContext": {"runAsNonRoot": True, "runAsUser": APP_UID, "runAsGroup": APP_UID},
        # /dev/shm: Docker's "16gb" as a Kubernetes quantity
        "volumes": [{"name": SHM, "emptyDir": {"medium": "Memory", "sizeLimit": SHM_SIZE.lower().replace("gb", "Gi")}},
                    *({"name": f"data-{i}", "hostPath": {"path": m.split(":")[0], "type": "Directory"}}
                      for i, m in enumerate(site.mounts))],
    }
    if lf.gpu:
        spec["tolerations"] = [{"key": t, "operator": "Exists", "effect": "NoSchedule"} for t in site.tolerations]
        aff = node_affinity(lf.arch_list, lf.min_driver, lf.products)
        if aff:
            spec["affinity"] = aff
    return spec


def _metadata(lf: LockFacts, site: Site) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": k8s_name(lf), "labels": labels(lf)}
    if site.namespace:
        meta["namespace"] = site.namespace
    return meta


def job_manifest(lf: LockFacts, site: Site, shape: Shape) -> dict[str, Any]:
    assert lf.pinned, "the app refuses a lock without a pushed digest"
    one = Shape(1, shape.gpus_per_node, shape.why)
    init = {"name": "envman-preflight", "image": lf.pinned, "command": preflight_argv(lf, one),
            "env": _env(True), "resources": _gpu_limits(one), "securityContext": _container_security()}
    train = {"name": "train", "image": lf.pinned, "command": train_argv(lf, one, rendezvous=None),
             "workingDir": WORKDIR, "env": _env(False), "resources": _gpu_limits(one),
             "volumeMounts": volume_mounts(site), "securityContext": _container_security()}
    pod = {"restartPolicy": "Never", **pod_basics(lf, site, one), "initContainers": [init], "containers": [train]}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": _metadata(lf, site),
            "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": labels(lf)}, "spec": pod}}}


def trainjob_manifest(lf: LockFacts, site: Site, shape: Shape) -> dict[str, Any] | None:
    """None for a stack that is not torch: the torch-distributed runtime launches torchrun."""
    if lf.framework != "torch" or not lf.command:
        return None
    assert lf.pinned, "the app refuses a lock without a pushed digest"
    env_words = " ".join(f"{k}={shlex.quote(v)}" for k, v in image_env(True) if k == "PYTHONPATH")
    script = (f"{env_words} {shlex.join(preflight_argv(lf, shape))} && exec {shlex.join(trainer_argv(lf))}")
    patch_pod = pod_basics(lf, site, shape)
    patch_pod["containers"] = [{"name": RUNTIME_JOB, "volumeMounts": volume_mounts(site)}]
    trainer: dict[str, Any] = {"image": lf.pinned, "command": ["/bin/sh", "-c", script], "numNodes": shape.nodes,
                               "env": _env(False)}
    if shape.gpus_per_node:
        trainer["numProcPerNode"] = shape.gpus_per_node
        trainer["resourcesPerNode"] = _gpu_limits(shape)
    return {
        "apiVersion": TRAINER_API, "kind": "TrainJob", "metadata": _metadata(lf, site),
        "spec": {
            "runtimeRef": {"name": TORCH_RUNTIME},
            "trainer": trainer,
            "runtimePatches": [{"manager": "envman", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
                {"name": RUNTIME_JOB, "template": {"spec": {"template": {"spec": patch_pod}}}}]}}}}],
        },
    }


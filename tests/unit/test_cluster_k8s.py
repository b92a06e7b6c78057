"""The Kubernetes manifests envman writes, validated offline: the Job against Kubernetes v1.33's own schemas
(kubernetes-validate, strict: an unknown field fails), the TrainJob against the TrainJob CRD's fields
(tests/fixtures/cluster/trainjob-v1alpha1.schema.json, from Kubeflow Trainer v2.3.0) with its pod patch
checked as a Pod; node affinity from the lock in GPU Feature Discovery's labels.

No Kubernetes server runs here: this is what envman writes, checked against the documented formats."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml
from test_cluster import DIGEST, lf, project  # noqa: F401 - the fixture (tests/unit is on the path)

from envman.app import cluster as app
from envman.app import cluster_lock
from envman.cluster import affinity, k8s, plan
from envman.errors import UsageError

K8S = "1.33.0"  # the pinned Kubernetes schema version
TRAINJOB = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "cluster" / "trainjob-v1alpha1.schema.json")
                      .read_text())


def docs(project, kind):  # noqa: F811
    app.k8s_files(project)
    stem = app.load_cluster(project)[0].facts.stem
    return yaml.safe_load((project / ".envman" / "cluster" / f"{stem}.{kind}.yaml").read_text())


def test_the_job_is_valid_kubernetes(project):  # noqa: F811
    job = docs(project, "job")
    assert kubernetes_validate.validate(job, K8S, strict=True) == "1.33"
    pod = job["spec"]["template"]["spec"]
    init, train = pod["initContainers"][0], pod["containers"][0]
    pinned = f"registry.example.com:5000/team/new-torch@{DIGEST}"
    assert init["image"] == train["image"] == pinned
    assert init["command"][:4] == ["/opt/venv/bin/python", "-s", "-m", "envman_portable.preflight"]
    assert init["command"][-5:] == ["--min-driver", "580.95.05", "--min-gpus", "8", "--require-gpu"]
    assert {"name": "PYTHONPATH", "value": "/opt/envman/kit"} in init["env"]
    assert train["resources"] == init["resources"] == {"limits": {"nvidia.com/gpu": 8}}
    assert train["command"][:3] == ["/opt/venv/bin/torchrun", "--standalone", "--nnodes=1"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}} in pod["volumes"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in train["volumeMounts"]
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["restartPolicy"] == "Never"
    assert job["spec"]["backoffLimit"] == 0


def test_the_trainjob_matches_the_crd_and_its_pod_patch_is_a_valid_pod(project):  # noqa: F811
    tj = docs(project, "trainjob")
    jsonschema.validate(tj, TRAINJOB)
    assert tj["spec"]["runtimeRef"] == {"name": "torch-distributed"}
    trainer = tj["spec"]["trainer"]
    assert (trainer["numNodes"], trainer["numProcPerNode"]) == (2, 8)
    script = trainer["command"][2]
    assert script.startswith("PYTHONPATH=/opt/envman/kit /opt/venv/bin/python -s -m envman_portable.preflight")
    assert " && exec /opt/venv/bin/torchrun train.py --epochs 3" in script
    patch = tj["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    assert patch["name"] == "node"
    pod_spec = patch["template"]["spec"]["template"]["spec"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
           "spec": {**pod_spec, "containers": [{**c, "image": "x"} for c in pod_spec["containers"]]}}
    kubernetes_validate.validate(pod, K8S, strict=True)
    # a misspelt field is pruned silently by the API server: the schema refuses it here
    bad = json.loads(json.dumps(tj))
    bad["spec"]["trainer"]["numProcsPerNode"] = 8
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, TRAINJOB)


def test_affinity_from_the_locks_sass_list_and_driver_floor():
    aff = affinity.node_affinity(("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"), "580.65.06")
    terms = [t["matchExpressions"] for t in aff["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]]
    driver = {"key": "nvidia.com/cuda.driver-version.major", "operator": "Gt", "values": ["579"]}
    assert terms == [
        [driver, {"key": "nvidia.com/gpu.compute.major", "operator": "In", "values": ["8", "9", "10", "12"]}],
        [driver, {"key": "nvidia.com/gpu.compute.major", "operator": "In", "values": ["7"]},
         {"key": "nvidia.com/gpu.compute.minor", "operator": "Gt", "values": ["4"]}],
    ]


def test_arch_specific_sass_and_ptx():
    exact = affinity.capability_terms(("sm_90a",))
    assert exact == [[{"key": "nvidia.com/gpu.compute.major", "operator": "In", "values": ["9"]},
                      {"key": "nvidia.com/gpu.compute.minor", "operator": "In", "values": ["0"]}]]
    ptx = affinity.capability_terms(("sm_80", "compute_86"))
    assert [{"key": "nvidia.com/gpu.compute.major", "operator": "Gt", "values": ["8"]}] in ptx  # JIT on anything newer
    assert affinity.node_affinity((), None) is None
    assert affinity.product_label("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3"


def test_a_profile_names_its_gpu_products(project):  # noqa: F811
    from envman.lock.lockfile import read_lock

    lock = read_lock(project / "envman.lock").with_changes(profile="h100")
    facts = cluster_lock.lock_facts(project, lock, ("python", "train.py"))
    assert "NVIDIA-H100-80GB-HBM3" in facts.products  # NVML's name for the H100 SXM (matrices/gpus.yaml alias)
    aff = affinity.node_affinity(facts.arch_list, facts.min_driver, facts.products)
    expr = aff["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    assert {"key": "nvidia.com/gpu.product", "operator": "In", "values": list(facts.products)} in expr[
        "matchExpressions"]
    assert cluster_lock.lock_facts(project, read_lock(project / "envman.lock"), ()).products == ()  # no profile: no product


def test_names_are_dns_labels_and_a_cpu_stack_has_no_gpu_parts():
    long = lf(name="a" * 80, profile="p1")
    assert len(k8s.k8s_name(long)) <= 63 and k8s.k8s_name(long).endswith("-" + "0" * 12)
    cpu = lf(gpu=False, framework=None, min_driver=None, pinned=f"r.io/x@{DIGEST}")
    job = k8s.job_manifest(cpu, plan.Site(), plan.Shape(1, 0))
    kubernetes_validate.validate(job, K8S, strict=True)
    pod = job["spec"]["template"]["spec"]
    assert "affinity" not in pod and "tolerations" not in pod and pod["containers"][0]["resources"] == {}
    assert k8s.trainjob_manifest(cpu, plan.Site(), plan.Shape(1, 0)) is None


def test_an_unpushed_image_is_refused(project):  # noqa: F811
    from envman.lock.lockfile import read_lock, write_lock

    lock = read_lock(project / "envman.lock")
    write_lock(project / "envman.lock", type(lock)({k: v for k, v in lock.data.items() if k != "pushed"}))
    with pytest.raises(UsageError, match="the image is not in a registry yet") as e:
        app.k8s_files(project)
    assert "envman build --push REGISTRY" in e.value.hint
    assert not (project / "cluster").exists()


def _with_mounts(project, mounts):  # noqa: F811
    spec = yaml.safe_load((project / "envman.yaml").read_text())
    spec["cluster"]["mounts"] = mounts
    (project / "envman.yaml").write_text(yaml.safe_dump(spec))


def test_cluster_mounts_reach_both_manifests_as_hostpath_volumes(project):  # noqa: F811
    _with_mounts(project, ["/shared/data:/data:ro", "/scratch", "/shared/ckpt:/ckpt:rw"])
    volumes = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
               {"name": "data-0", "hostPath": {"path": "/shared/data", "type": "Directory"}},
               {"name": "data-1", "hostPath": {"path": "/scratch", "type": "Directory"}},
               {"name": "data-2", "hostPath": {"path": "/shared/ckpt", "type": "Directory"}}]
    mounts = [{"name": "dshm", "mountPath": "/dev/shm"}, {"name": "data-0", "mountPath": "/data", "readOnly": True},
              {"name": "data-1", "mountPath": "/scratch"}, {"name": "data-2", "mountPath": "/ckpt"}]
    job = docs(project, "job")
    assert kubernetes_validate.validate(job, K8S, strict=True) == "1.33"
    pod = job["spec"]["template"]["spec"]
    assert (pod["volumes"], pod["containers"][0]["volumeMounts"]) == (volumes, mounts)
    assert "volumeMounts" not in pod["initContainers"][0]  # the preflight reads no data
    tj = docs(project, "trainjob")
    jsonschema.validate(tj, TRAINJOB)
    patch = tj["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    pod_spec = patch["template"]["spec"]["template"]["spec"]
    assert (pod_spec["volumes"], pod_spec["containers"][0]["volumeMounts"]) == (volumes, mounts)


@pytest.mark.parametrize("mounts, error", [
    (["/a:/data", "/b:/data/"], "cluster.mounts[1]: '/b:/data/' mounts on /data, which another mount or the job's "
                                "/dev/shm takes"),
    (["/fast:/dev/shm"], "cluster.mounts[0]: '/fast:/dev/shm' mounts on /dev/shm, which another mount or the job's "
                         "/dev/shm takes"),
    (["/shared/../etc:/data"], "cluster.mounts[0]: '/shared/../etc:/data' is not SRC[:DST[:ro|rw]] with absolute "
                               "paths (no ',', no '..' and no blanks around them)"),
])
def test_a_mount_kubernetes_would_refuse_is_refused_first(project, mounts, error):  # noqa: F811
    from envman.errors import SpecError

    _with_mounts(project, mounts)
    with pytest.raises(SpecError) as err:
        app.k8s_files(project)
    assert (err.value.message, err.value.hint) == (
        f"envman.yaml: {error}", "each SRC[:DST[:ro|rw]], absolute paths on the nodes, e.g. /shared/data:/data:ro")

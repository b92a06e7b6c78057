"""envman cluster, offline: the planner's values (image references, the job's shape from the site and from
`envman fit`), the sbatch scripts (shellcheck-clean, the preflight before the training step, nothing a user
typed able to become shell), ownership of the files, enroot's image files, and the readiness table.

The project is the golden new-torch lock (torch 2.14.1 cu130 for an H100), made a pushed one the way
`envman build --push` records it (``pushed`` is outside the lock's identity)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from envman.app import cluster as app
from envman.app import cluster_nodes
from envman.cluster import enroot, plan, slurm
from envman.cluster.nodes import node_classes
from envman.cluster.site import parse_site
from envman.errors import SpecError, UsageError
from envman.lock.lockfile import read_lock, write_lock

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "new-torch"
DIGEST = "sha256:" + "ab" * 32
SPEC = """name: new-torch
targets: [h100]
command: [python, train.py, --epochs, "3"]
cluster:
  constraint: "h100&ib"
  partition: gpu
  account: proj042
  time: "04:00:00"
  gpus_per_node: 8
  nodes: 2
"""


@pytest.fixture
def project(tmp_path):
    d = tmp_path / "new-torch"
    d.mkdir()
    for f in ("envman.lock", "Dockerfile"):
        shutil.copy(GOLDEN / f, d / f)
    lock = read_lock(d / "envman.lock")
    write_lock(d / "envman.lock", lock.with_changes(pushed={
        "ref": f"registry.example.com:5000/team/new-torch:{lock.short_hash}", "digest": DIGEST,
        "pinned": f"registry.example.com:5000/team/new-torch@{DIGEST}"}))
    (d / "envman.yaml").write_text(SPEC)
    return d


def test_lock_facts_take_the_floor_targets_and_digest_from_the_lock(project):
    [cl] = app.load_cluster(project)
    lf = cl.facts
    assert lf.gpu and lf.framework == "torch" and lf.min_driver == "580.95.05"  # full-compatibility mode
    assert lf.pinned == f"registry.example.com:5000/team/new-torch@{DIGEST}"
    assert lf.stem == f"new-torch_{lf.lock_hash[:12]}" and lf.targets[0].cc == "9.0"
    assert "sm_90" in lf.arch_list and lf.command == ("python", "train.py", "--epochs", "3")
    assert (cl.shape.nodes, cl.shape.gpus_per_node) == (2, 8)
    assert cl.site.constraint == "h100&ib"


def test_a_minor_compat_image_keeps_its_own_floor(project):
    df = project / "Dockerfile"
    df.write_text(df.read_text().replace('NVIDIA_REQUIRE_CUDA="cuda>=13.0"',
                                         'NVIDIA_REQUIRE_CUDA="cuda>=13.0 driver>=580.65.06"'))
    assert app.load_cluster(project)[0].facts.min_driver == "580.65.06"


@pytest.mark.parametrize("pinned, uri", [
    (f"registry.example.com:5000/team/x@{DIGEST}", f"docker://registry.example.com:5000#team/x@{DIGEST}"),
    (f"nvcr.io/nvidia/pytorch@{DIGEST}", f"docker://nvcr.io#nvidia/pytorch@{DIGEST}"),
    (f"localhost/x@{DIGEST}", f"docker://localhost#x@{DIGEST}"),
    (f"acme/trainer@{DIGEST}", f"docker://acme/trainer@{DIGEST}"),  # Docker Hub: no registry, no '#'
])
def test_enroot_uri_puts_the_registry_before_a_hash(pinned, uri):
    assert plan.enroot_uri(pinned) == uri


def lf(**kw):
    base = dict(name="t", profile=None, lock_hash="0" * 64, framework="torch", framework_version="2.14.1", gpu=True,
                min_driver="580.65.06", arch_list=("sm_80", "sm_90"), targets=(plan.LockedTarget("h100-sxm", "H100", "9.0"),),
                command=("python", "train.py"))
    return plan.LockFacts(**{**base, **kw})


def test_job_shape_site_first_then_the_workload_then_one_gpu():
    big = plan.job_shape(lf(), plan.Site(gpus_per_node=8), fit_gpus=32)
    assert (big.nodes, big.gpus_per_node, big.cpus_per_node) == (4, 8, 64)
    s = plan.job_shape(lf(), plan.Site(), fit_gpus=4, fit_note="4 GPU(s): the fewest …")
    assert (s.nodes, s.gpus_per_node) == (1, 4) and s.why[0].startswith("4 GPU(s)")
    assert (plan.job_shape(lf(), plan.Site()).gpus_per_node, plan.job_shape(lf(), plan.Site()).nodes) == (1, 1)
    cpu = plan.job_shape(lf(gpu=False), plan.Site(gpus_per_node=8, nodes=3))
    assert (cpu.nodes, cpu.gpus_per_node) == (3, 0)


def test_the_gpu_count_comes_from_envman_fit_when_the_workload_shards(project):
    (project / "envman.yaml").write_text(SPEC.replace("  gpus_per_node: 8\n  nodes: 2\n", "") +
                                         "workload: {model: llama-3.1-8b, method: full, precision: bf16-mixed, shard: fsdp}\n")
    [cl] = app.load_cluster(project)
    # envman fit: 150 GiB per GPU on 1, 88 on 2, 66 on 4 → 4 H100s (80 GB, 10% kept free)
    assert (cl.shape.nodes, cl.shape.gpus_per_node) == (1, 4)
    assert cl.shape.why[0] == "4 GPU(s): the fewest at which envman fit says the workload fits h100-sxm"


def test_torchrun_wraps_the_python_command_and_keeps_a_launcher():
    argv = plan.torchrun_argv(("python", "-m", "pkg.train", "--lr", "3e-4"), nodes="$N", gpus=8, rendezvous="$A:$P")
    assert argv[0] == "/opt/venv/bin/torchrun" and argv[-4:] == ["-m", "pkg.train", "--lr", "3e-4"]
    assert "--nproc-per-node=8" in argv and "--rdzv-backend=c10d" in argv
    assert plan.torchrun_argv(("accelerate", "launch", "x.py"), nodes=1, gpus=8, rendezvous=None) == \
        ["accelerate", "launch", "x.py"]
    assert plan.torchrun_argv(("python", "x.py"), nodes=1, gpus=2, rendezvous=None)[:3] == \
        ["/opt/venv/bin/torchrun", "--standalone", "--nnodes=1"]


def sbatch(project, runtime="pyxis", suffix=""):
    return (project / ".envman" / "cluster" / f"{app.load_cluster(project)[0].facts.stem}{suffix}.{runtime}.sbatch").read_text()


def test_slurm_files_preflight_every_node_then_torchrun(project, tmp_path):
    out = app.slurm_files(project, images=tmp_path / "images")
    assert len(out.written) == 6  # 3 runtimes × (training, readiness)
    text = sbatch(project, "pyxis")
    assert text.startswith("#!/bin/bash\n# generated by envman — inputs sha256:")
    for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1", "#SBATCH --gpus-per-node=8",
                 "#SBATCH --constraint=h100&ib", "#SBATCH --partition=gpu", "#SBATCH --account=proj042",
                 "#SBATCH --time=04:00:00", "MASTER_PORT=$((SLURM_JOB_ID % 4536 + 61000))"):
        assert line in text.splitlines(), line
    pre = next(ln for ln in text.splitlines() if "envman_portable.preflight" in ln)
    train = next(ln for ln in text.splitlines() if "torchrun" in ln and not ln.startswith("#"))
    assert text.index(pre) < text.index(train)
    assert pre.startswith('if ! srun --nodes="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 --container-image=')
    assert "--min-driver 580.95.05 --min-gpus 8 --require-gpu" in pre
    assert f"{tmp_path / 'images'}/new-torch_" in pre and "--container-workdir=/app" in pre
    assert '--rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT"' in train and '--nnodes="$SLURM_JOB_NUM_NODES"' in train
    assert train.endswith("--nproc-per-node=8 train.py --epochs 3")
    assert "apptainer exec --nv --cleanenv --pwd /app" in sbatch(project, "apptainer")
    assert 'MASTER_ADDR="$MASTER_ADDR" MASTER_PORT="$MASTER_PORT"' in sbatch(project, "apptainer")
    # resources: 8 CPUs per GPU by default, host memory twice the GPUs' (8 × 80 GiB H100s: 1280G)
    for line in ("#SBATCH --cpus-per-task=64", "#SBATCH --mem=1280G"):
        assert line in text.splitlines(), line
    assert "--container=" in sbatch(project, "oci") and ".bundle " in sbatch(project, "oci")
    nodes = sbatch(project, "pyxis", ".nodes")
    assert '--output="$REPORTS/%N.json"' in nodes and "--json || true" in nodes and "train.py" not in nodes
    # torch with 8 GPUs on 2 nodes: NCCL within each node, then across both
    assert "--standalone --nnodes=1 --nproc-per-node=8 -m envman_portable.allreduce || true" in nodes
    assert '"$REPORTS/job.allreduce.json"' in nodes and '--rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT"' in nodes


@pytest.mark.skipif(not shutil.which("shellcheck"), reason="shellcheck is not installed (.ci/run installs it)")
def test_every_sbatch_is_shellcheck_clean(project, tmp_path):
    out = app.slurm_files(project, images=tmp_path / "my images")  # a space in the path: quoting matters
    p = subprocess.run(["shellcheck", "--shell=bash", *map(str, out.written)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout


def test_user_input_cannot_become_shell(project, tmp_path):
    (project / "envman.yaml").write_text(SPEC.replace('command: [python, train.py, --epochs, "3"]',
                                                      "command: [python, train.py, '$(touch /tmp/pwned)', 'a;b']"))
    app.slurm_files(project, images=tmp_path)
    text = sbatch(project, "oci")
    assert "'$(touch /tmp/pwned)' 'a;b'" in text and " $(touch" not in text
    for bad in ("h100 && rm -rf /", "gpu\n#SBATCH --exclusive", "$(id)"):
        with pytest.raises(SpecError) as e:
            parse_site({"constraint": bad})
        assert e.value.message.startswith("envman.yaml: cluster.constraint: ")
        assert "no spaces, quotes, $ or newlines" in e.value.hint
    with pytest.raises(SpecError, match=r"cluster\.gpus_per_nod: unknown key"):
        parse_site({"gpus_per_nod": 8})
    with pytest.raises(SpecError, match="not a whole number from 1 to 4096"):
        parse_site({"nodes": 0})


def test_the_cluster_section_is_outside_the_locks_identity(project):
    """Moving a job to another partition must not make the image's lock stale."""
    from envman.project.spec import load_spec

    a = load_spec(project).to_data()
    (project / "envman.yaml").write_text(SPEC.replace("partition: gpu", "partition: other"))
    assert load_spec(project).to_data() == a and "cluster" not in a


def test_profiles_override_the_site(project):
    site = parse_site({"constraint": "h100", "gpus_per_node": 8, "profiles": {"a100": {"constraint": "a100"}}})
    assert site.for_profile("a100").constraint == "a100" and site.for_profile("a100").gpus_per_node == 8
    assert site.for_profile(None).constraint == "h100"


def test_files_edited_by_hand_are_kept_unless_forced(project, tmp_path):
    first = app.slurm_files(project, images=tmp_path, runtimes=("oci",))
    again = app.slurm_files(project, images=tmp_path, runtimes=("oci",))
    assert again.written == [] and len(again.unchanged) == 2
    f = first.written[0]
    f.write_text(f.read_text() + "# my change\n")
    with pytest.raises(UsageError, match=r"would overwrite \.envman/cluster/.*\.oci\.sbatch \(edited by hand\)"):
        app.slurm_files(project, images=tmp_path, runtimes=("oci",))
    assert f.read_text().endswith("# my change\n")
    assert f in app.slurm_files(project, images=tmp_path, runtimes=("oci",), force=True).written


def test_no_command_and_unknown_runtime_are_refused(project, tmp_path):
    with pytest.raises(UsageError, match="--runtime 'docker': not one of pyxis, apptainer, oci"):
        app.slurm_files(project, runtimes=("docker",))
    (project / "envman.yaml").write_text(SPEC.replace('command: [python, train.py, --epochs, "3"]\n', ""))
    with pytest.raises(UsageError, match="envman.yaml has no `command:` to train with"):
        app.slurm_files(project, images=tmp_path)
    assert not (project / "cluster").exists()


def test_enroot_files_follow_enroots_image_format():
    cfg = {"Env": ["PATH=/opt/venv/bin:/usr/bin", "PYTORCH_VERSION=2.14.1"], "Cmd": ["python", "train.py"],
           "WorkingDir": "/app", "Labels": {"dev.envman.lock-hash": "abc", "multi": "a\nb"}, "Volumes": {"/data": {}}}
    files = enroot.enroot_files(cfg, "docker://r#x@sha256:1")
    assert files["etc/environment"] == "PATH=/opt/venv/bin:/usr/bin\nPYTORCH_VERSION=2.14.1\n"
    assert files["etc/fstab"] == "${ENROOT_ROOTFS}/data /data none x-create=dir,bind,rw,nosuid,nodev\n"
    rc = files["etc/rc"]
    assert rc.startswith("# enroot-provenance: docker://r#x@sha256:1\n# dev.envman.lock-hash abc\n# multi a b\n")
    assert "cd /app && unset OLDPWD || exit 1" in rc and '    exec "$@"\nelse\n    exec python train.py\nfi\n' in rc
    assert 'exec /bin/sh' in enroot.rc_script({}, "x")
    assert 'exec /entry.sh "$@"' in enroot.rc_script({"Entrypoint": ["/entry.sh"]}, "x")


@pytest.mark.skipif(not (shutil.which("mksquashfs") and shutil.which("unsquashfs")),
                    reason="squashfs-tools is not installed (.ci/slurm-up.sh installs it)")
def test_a_real_squashfs_has_enroots_files_and_is_reproducible(tmp_path):
    from envman.cluster.export import to_sqsh

    root = tmp_path / "rootfs"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "environment").write_text("OLD=1\n")  # replaced, as enroot does
    (root / "app").mkdir()
    (root / "app" / "train.py").write_text("print(1)\n")
    cfg = {"config": {"Env": ["A=1"], "Cmd": ["python", "train.py"], "WorkingDir": "/app"}}
    one = to_sqsh(root, cfg, tmp_path / "a" / "x.sqsh", "envman:x:1")
    two = to_sqsh(root, cfg, tmp_path / "b" / "x.sqsh", "envman:x:1")
    assert one.read_bytes() == two.read_bytes()
    cat = lambda p: subprocess.run(["unsquashfs", "-cat", str(one), p], capture_output=True, text=True).stdout  # noqa: E731
    assert cat("etc/environment") == "A=1\n" and "exec python train.py" in cat("etc/rc")
    assert cat("app/train.py") == "print(1)\n"
    assert not list((tmp_path / "a").glob(".*.tmp"))  # the staging folder is gone


def test_the_readiness_table_groups_nodes_by_class():
    def report(node, driver, code, checks=()):
        return {"tool": "envman-preflight", "node": node, "driver": driver, "exit_code": code, "gpu_count": 8,
                "gpus": [{"name": "NVIDIA H100 80GB HBM3"}] * 8, "shm_mib": 1024, "checks": list(checks),
                "network": {"ib_devices": [{"name": "mlx5_0", "ports": [{"state": "ACTIVE"}]}],
                            "dev_infiniband": ["uverbs0"], "peermem_modules": [], "memlock_kib": -1,
                            "nccl_env": {"NCCL_SOCKET_IFNAME": "ib"}}}
    low = {"name": "driver floor", "status": "fail", "observed": "570.124.06", "expected": ">= 580.65.06"}
    classes = node_classes([report("n2", "580.95.05", 0), report("n1", "580.95.05", 0),
                            report("n3", "570.124.06", 1, [low])])
    assert [(c.driver, c.nodes, c.verdict) for c in classes] == [
        ("570.124.06", ("n3",), "NOT READY (1/1)"), ("580.95.05", ("n1", "n2"), "ready")]
    assert classes[0].failures == ("n3: driver floor 570.124.06 (expected >= 580.65.06)",)
    assert classes[1].nccl == "IFNAME=ib; IB 1/1 ports active; no peermem; memlock unlimited"
    assert classes[1].gpus == "8× NVIDIA H100 80GB HBM3"


def test_gather_reads_the_reports_folder(tmp_path):
    (tmp_path / "n1.json").write_text(json.dumps({"tool": "envman-preflight", "node": "n1", "exit_code": 0}) + "\n")
    (tmp_path / "n2.json").write_text("Traceback …\n")
    (tmp_path / "n1.allreduce.json").write_text(json.dumps({
        "tool": "envman-allreduce", "ok": True, "node": "n1", "world_size": 8, "backend": "nccl", "busbw_gbps": 361.2,
        "bytes": 64 << 20}) + "\n")
    (tmp_path / "job.allreduce.json").write_text(json.dumps({
        "tool": "envman-allreduce", "ok": False, "node": "n1", "error": "DistBackendError: NCCL error"}) + "\n")
    classes, job, unreadable = cluster_nodes.gather_nodes(tmp_path)
    assert classes[0].nodes == ("n1",) and unreadable == ["n2.json (not JSON)"]
    assert classes[0].allreduce == ("n1: 8 ranks over nccl, busbw 361.2 GB/s (64 MiB)",)
    assert job == "n1: FAILED DistBackendError: NCCL error"
    with pytest.raises(UsageError, match="no such folder"):
        cluster_nodes.gather_nodes(tmp_path / "missing")


def test_slurm_plan_runtimes_and_a_cpu_stack():
    images = slurm.ImageFiles("/s/x.sqsh", "/s/x.sif", "/s/x.bundle")
    cpu = slurm.sbatch_plan(lf(gpu=False, framework=None, min_driver=None), plan.Site(), plan.Shape(1, 0), "apptainer", images)
    assert "--nv" not in cpu.preflight and "--require-gpu" not in cpu.preflight
    assert ("gpus-per-node", "1") not in cpu.directives and cpu.train.endswith("python train.py")
    with pytest.raises(ValueError):
        slurm.container("docker", images, True)


def test_the_cli_writes_and_reports_errors_in_one_line(project, tmp_path):
    import sys

    def run(*args):
        return subprocess.run([sys.executable, "-m", "envman.cli.main", "cluster", *args], capture_output=True, text=True)

    ok = run("slurm", str(project), "--images", str(tmp_path), "--runtime", "pyxis")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("wrote: .envman/cluster/new-torch_")
    assert "next: sbatch .envman/cluster/new-torch_" in ok.stdout
    bad = run("nodes", str(tmp_path / "nope"))
    assert bad.returncode == 1 and bad.stderr.splitlines()[0] == f"error: {tmp_path / 'nope'}: no such folder"
    assert bad.stderr.splitlines()[1].startswith("hint: submit .envman/cluster/NAME_<lock12>.nodes.RUNTIME.sbatch")


def test_allreduce_bandwidths_follow_nccl_tests():
    from envman.portable.allreduce import bandwidths

    alg, bus = bandwidths(64 << 20, 0.001, 8)
    assert round(alg, 3) == 67.109 and round(bus, 3) == round(alg * 14 / 8, 3)
    assert bandwidths(1, 0, 2) == (0.0, 0.0) and bandwidths(10**9, 1.0, 1) == (1.0, 1.0)


def test_allreduce_runs_two_ranks_over_gloo(tmp_path):
    """The real program under torchrun on CPUs (gloo): what the readiness run does with NCCL on GPUs."""
    import importlib.util
    import sys

    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed in the test environment (pip install torch to run this)")
    from envman.app.smoke import write_kit

    kit = write_kit(tmp_path / "kit")
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m",
                        "envman_portable.allreduce", "--mib", "4", "--backend", "gloo"],
                       capture_output=True, text=True, timeout=300, env={"PYTHONPATH": str(kit), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    assert doc["ok"] and doc["world_size"] == 2 and doc["backend"] == "gloo" and doc["bytes"] == 4 << 20


def test_the_apptainer_definition_tests_the_floor_itself(project, tmp_path, monkeypatch):
    from envman.app import cluster_export
    from envman.cluster import export

    monkeypatch.setattr(export, "apptainer_available", lambda: None)  # as here: no Apptainer package exists
    [cl] = app.load_cluster(project)
    res = app.ExportOutcome(cl.facts)
    targets = {f: tmp_path / f"x.{f}" for f in ("bundle", "sqsh", "archive", "layout")}
    cluster_export._definition(res, tmp_path, targets)
    text = res.files["def"].read_text()
    assert text.startswith("# generated by envman — inputs sha256:")
    assert f"Bootstrap: docker\nFrom: registry.example.com:5000/team/new-torch@{DIGEST}\n" in text
    test = text.split("%test\n", 1)[1]
    assert "envman_portable.preflight --expect /opt/envman/stack.json --min-driver 580.95.05 --require-gpu" in test
    assert "--min-gpus" not in test  # the node, not a job: any GPU count
    assert "cd /app\n    exec /usr/bin/env PATH=/opt/venv/bin:" in text and 'python train.py --epochs 3 "$@"' in text
    assert "ignores NVIDIA_REQUIRE_CUDA" in text and "%test needs a GPU" in text
    stem = cl.facts.stem
    assert res.commands[:2] == [f"apptainer build --notest {tmp_path}/{stem}.sif {tmp_path}/{stem}.def",
                                f"apptainer test --nv {tmp_path}/{stem}.sif"]
    assert res.commands[2].startswith(f"apptainer build {tmp_path}/{stem}.sif docker://registry.example.com:5000/")
    assert any("apptainer is not installed here" in n for n in res.notes)

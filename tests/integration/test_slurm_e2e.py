"""The lock on a real Slurm cluster (one node on loopback, .ci/slurm-up.sh: Debian's slurm-wlm 22.05 + munge,
Slurm's OCI support on runc): envman builds the image, exports it as an OCI runtime bundle and an enroot
squashfs, writes the sbatch, and `sbatch --wait` runs it —

  * a CPU lock: the preflight passes inside the container on the node, then the training step runs — from the
    sbatch in .envman/cluster/ (where packaging never sees it), with the host memory it asks for granted;
  * a lock for H100s on this GPU-less node (Slurm's books say one GPU, the machine has none, as on a node whose
    driver is broken): the preflight fails and the job stops before the training step;
  * the readiness run for that lock: one report per node, and `envman cluster nodes` says NOT READY and why.

pyxis/enroot and Apptainer cannot be installed here: their files are checked against the documented formats
in tests/unit/test_cluster*.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from .engine_helpers import ROOT, envman

pytestmark = [pytest.mark.integration, pytest.mark.network]



def _answers() -> bool:
    if not shutil.which("sinfo"):
        return False
    p = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True, timeout=20, check=False)
    return p.returncode == 0 and any(s in p.stdout for s in ("idle", "mixed", "allocated"))


@pytest.fixture(scope="session")
def slurm():
    """The one-node cluster: started by .ci/slurm-up.sh when it does not answer (and stopped again afterwards)."""
    started = False
    if not _answers():
        if not shutil.which("apt-get") and not shutil.which("slurmctld"):
            pytest.skip("no Slurm here and no apt-get to install it (.ci/slurm-up.sh)")
        p = subprocess.run(["bash", str(ROOT / ".ci" / "slurm-up.sh")], capture_output=True, text=True, timeout=900)
        started = True
        if p.returncode != 0 or not _answers():
            subprocess.run(["bash", str(ROOT / ".ci" / "slurm-up.sh"), "--down"], capture_output=True, timeout=60)
            pytest.fail(f".ci/slurm-up.sh could not start Slurm:\n{p.stderr[-2000:]}")
    node = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %f"], capture_output=True, text=True).stdout.split()
    yield {"node": node[0], "feature": node[1]}
    if started:
        subprocess.run(["bash", str(ROOT / ".ci" / "slurm-up.sh"), "--down"], capture_output=True, timeout=60)


def project(tmp_path: Path, token: str, base: str, feature: str, *, gpu: bool) -> Path:
    d = tmp_path / f"{'gpu' if gpu else 'cpu'}-{token}"
    d.mkdir()
    (d / "requirements.txt").write_text("numpy==2.1.3\n")
    (d / "train.py").write_text("import numpy, os\nprint('training step ran: numpy', numpy.__version__, "
                                "'rank', os.environ.get('SLURM_PROCID'), 'master', os.environ.get('MASTER_ADDR'))\n")
    stack = "framework: none\ntargets: [h100]\n" if gpu else "cpu: true\n"
    # this node has 2 CPUs and ~19 GB: the site's numbers replace envman's defaults (8 CPUs and 160G per H100)
    resources = "  cpus_per_gpu: 2\n  mem: 1024M\n" if gpu else "  mem: 512M\n"
    (d / "envman.yaml").write_text(f"name: {d.name}\npython: '3.11'\n{stack}requirements: [requirements.txt]\n"
                                   f"base_image: {base}\ncommand: [python, train.py]\n"
                                   f"cluster:\n  constraint: {feature}\n  time: '00:10:00'\n{resources}")
    envman("lock", str(d))
    return d


@pytest.fixture
def built(tmp_path, token, base_image, engine, slurm):
    """Build each project's image with envman, export it, and remove the images afterwards."""
    made: list[str] = []

    def build(gpu: bool) -> tuple[Path, dict]:
        d = project(tmp_path, token, base_image, slurm["feature"], gpu=gpu)
        envman("build", str(d))
        lock = json.loads((d / "envman.lock").read_text())
        made.append(f"{lock['name']}:{lock['lock_hash'][:12]}")
        envman("cluster", "export", str(d), "--out", str(tmp_path / "images"), "--format", "bundle,sqsh")
        envman("cluster", "slurm", str(d), "--images", str(tmp_path / "images"), "--runtime", "oci")
        return d, lock

    yield build
    for ref in made:
        engine.remove_image(ref, force=True)


def submit(d: Path, script: str) -> tuple[int, str]:
    try:
        p = subprocess.run(["sbatch", "--wait", f".envman/cluster/{script}"], cwd=d, capture_output=True, text=True,
                           timeout=300)
    except subprocess.TimeoutExpired:
        queue = subprocess.run(["squeue", "-o", "%i %j %T %R"], capture_output=True, text=True).stdout
        pytest.fail(f"sbatch --wait {script} did not return in 300 s; the queue:\n{queue}")
    out = "".join(f.read_text() for f in d.glob("*.out"))
    return p.returncode, p.stderr + out


def test_the_preflight_passes_in_the_container_and_the_training_step_runs(built, slurm, tmp_path):
    d, lock = built(gpu=False)
    stem = f"{lock['name']}_{lock['lock_hash'][:12]}"
    # the enroot image carries enroot's files, made from the image's config
    rc_file = subprocess.run(["unsquashfs", "-cat", str(tmp_path / "images" / f"{stem}.sqsh"), "etc/rc"],
                             capture_output=True, text=True).stdout
    assert "cd /app && unset OLDPWD || exit 1" in rc_file and "exec python train.py" in rc_file
    sbatch = (d / ".envman" / "cluster" / f"{stem}.oci.sbatch").read_text().splitlines()
    assert "#SBATCH --mem=512M" in sbatch and not (d / "cluster").exists()
    rc, out = submit(d, f"{stem}.oci.sbatch")
    assert rc == 0, out
    assert f"preflight {slurm['node']}: ready (" in out
    assert f"training step ran: numpy 2.1.3 rank 0 master {slurm['node']}" in out
    assert out.index("preflight") < out.index("training step ran")


def test_a_node_that_cannot_meet_the_lock_stops_the_job_before_training(built, slurm):
    d, lock = built(gpu=True)
    stem = f"{lock['name']}_{lock['lock_hash'][:12]}"
    sbatch = (d / ".envman" / "cluster" / f"{stem}.oci.sbatch").read_text().splitlines()
    assert "#SBATCH --cpus-per-task=2" in sbatch and "#SBATCH --mem=1024M" in sbatch
    rc, out = submit(d, f"{stem}.oci.sbatch")
    assert rc == 1, out
    node = slurm["node"]
    assert f"preflight {node}: FAIL driver floor: None (expected >= {lock['stack']['min_driver']})" in out
    assert f"preflight {node}: FAIL gpu required" in out and f"preflight {node}: NOT READY (" in out
    assert "envman: preflight failed on a node of" in out and "training not started" in out
    assert "training step ran" not in out

    # the readiness run: one report per node, gathered into the table
    rc, out = submit(d, f"{stem}.nodes.oci.sbatch")
    assert rc == 0, out  # a readiness run reports; it does not fail
    reports = next(d.glob("envman-nodes-*"))
    assert (reports / f"{node}.json").is_file()
    table = envman("cluster", "nodes", str(reports), check=False)
    assert table.returncode == 1, table.stdout + table.stderr
    assert "no GPU · driver no driver · 1 node(s): NOT READY (1/1)" in table.stdout
    assert f"FAIL    {node}: driver floor None (expected >= {lock['stack']['min_driver']})" in table.stdout
    assert "memlock" in table.stdout
    assert "shm     16384 MiB" in table.stdout  # the bundle's /dev/shm, sized by envman (umoci's default is 64 MiB)

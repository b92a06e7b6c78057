"""End-to-end on a real Docker engine: envman init → (fetch) → build → smoke, the way a user runs it.

The quick cases use a numpy-only stack on the debootstrap test base (seconds); the torch case builds the
real torch 2.14.1+cu130 image from a wheelhouse (minutes, marked slow) and cleans up its 3 GB after itself.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from .engine_helpers import envman, good_tag, image_members_containing, lock_of

pytestmark = [pytest.mark.integration, pytest.mark.network]





@pytest.fixture
def numpy_project(tmp_path, base_image, token, engine):
    d = tmp_path / f"np-{token}"
    d.mkdir()
    (d / "requirements.txt").write_text("numpy==2.1.3\n")
    (d / "train.py").write_text("import numpy\nprint('numpy', numpy.__version__)\n")
    envman("init", str(d), "--cpu", "--python", "3.11", "--base-image", base_image)
    yield d
    for suffix in ("", "-unverified"):
        engine.remove_image(good_tag(d) + suffix, force=True)
    # images a --rebuild left untagged carry the project's title label: remove them too
    engine.client.images.prune(filters={"dangling": True, "label": f"org.opencontainers.image.title={d.name}"})


def test_quick_numpy_build_smoke_reuse_and_source_only_rebuild(numpy_project, engine, tmp_path, token):
    d = numpy_project
    # the real CA bundle plus a marker: pip in the build trusts it, and no layer may keep it
    from envman.app.build import default_ca_bundle

    real = default_ca_bundle()
    bundle = tmp_path / "ca.pem"
    marker = f"envman-ca-marker-{token}"
    bundle.write_text(((real.read_text() + "\n") if real else "") + f"# {marker}\n")
    out = envman("build", str(d), "--ca-bundle", str(bundle), "--progress", "plain")
    tag = good_tag(d)
    assert f"tagged {tag}" in out.stdout
    assert "GPU checks skipped: no GPU visible" in out.stdout
    info = engine.inspect_image(tag)
    assert info["Config"]["User"] == "app"
    assert info["Config"]["Labels"]["dev.envman.lock-hash"] == lock_of(d)["lock_hash"]
    assert not engine.image_exists(tag + "-unverified")
    report = json.loads((d / "envman.smoke.json").read_text())
    assert report["exit_code"] == 6 and any(c["name"] == "import numpy" and c["status"] == "pass" for c in report["checks"])
    assert image_members_containing(engine, tag, marker.encode(), tmp_path) == []

    # the image runs the project as a non-root user (testcontainers, as a user's tooling would)
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.wait_strategies import LogMessageWaitStrategy

    container = DockerContainer(tag).with_command(["sh", "-c", "id -u; python train.py; sleep 5"])
    with container.waiting_for(LogMessageWaitStrategy("numpy 2.1.3").with_startup_timeout(30)) as c:
        assert c.get_logs()[0].decode().splitlines()[0] == "1000"

    again = envman("build", str(d))
    assert f"{tag} exists for this lock hash: skipping the build" in again.stdout

    (d / "train.py").write_text("import numpy\nprint('numpy', numpy.__version__, 'edited')\n")
    edit = envman("build", str(d), "--rebuild", "--progress", "plain")
    pip_steps = [ln for ln in edit.stdout.splitlines() if "pip install" in ln and ln.startswith("#")]
    assert pip_steps, edit.stdout[-2000:]
    step_ids = {ln.split()[0] for ln in pip_steps}
    cached = {ln.split()[0] for ln in edit.stdout.splitlines() if ln.endswith("CACHED")}
    assert step_ids <= cached, "a source-only edit rebuilt a dependency layer"


def test_offline_build_from_the_wheelhouse(numpy_project, engine, tmp_path):
    d = numpy_project
    envman("fetch", str(d))
    assert list((d / ".envman" / "wheelhouse").glob("numpy-2.1.3-*.whl"))
    out = envman("build", str(d), "--offline", "--progress", "plain")
    assert "--no-index --find-links /wheels" in (d / ".envman" / "Dockerfile.offline").read_text()
    assert f"tagged {good_tag(d)}" in out.stdout
    from envman.app.build import wheelhouse_image

    engine.remove_image(wheelhouse_image(d / ".envman" / "wheelhouse"), force=True)


def test_failed_smoke_exits_5_and_gets_no_good_tag(numpy_project, engine):
    d = numpy_project
    # a project file that shadows a locked package (the image runs from /app): the lock is intact, the image is
    # not usable — exactly what the smoke test is for (tampering the lock's files is lock --check's to refuse)
    (d / "numpy.py").write_text("raise ImportError('numpy.py in the project shadows the locked numpy')\n")
    out = envman("build", str(d), check=False)
    assert out.returncode == 5, out.stdout[-2000:] + out.stderr[-2000:]
    assert not engine.image_exists(good_tag(d))
    assert engine.image_exists(good_tag(d) + "-unverified")
    assert "FAIL  import numpy" in out.stdout, out.stdout[-2000:]


def test_push_records_digest_and_skips_when_present(numpy_project, engine, registry):
    d = numpy_project
    out = envman("build", str(d), "--push", registry, "--no-smoke")
    lock = lock_of(d)
    pushed = lock["pushed"]
    assert pushed["ref"] == f"{registry}/{lock['name']}:{lock['lock_hash'][:12]}"
    assert pushed["digest"].startswith("sha256:") and pushed["pinned"].endswith("@" + pushed["digest"])
    assert envman("lock", str(d), "--check").returncode == 0  # the pin does not make the lock stale
    again = envman("build", str(d), "--push", registry)
    assert "is already in the registry" in again.stdout and "skipping build and push" in again.stdout
    engine.remove_image(pushed["ref"], force=True)
    assert "pushed" in out.stdout


@pytest.mark.slow
def test_torch_2_14_1_offline_end_to_end(tmp_path, base_image, engine):
    """The issue's end-to-end: torch 2.14.1 for Python 3.11 → fetch → offline build → smoke (no GPU)."""
    d = tmp_path / "torch-e2e"
    # only the example's own files: the README's quick start may have written envman's files beside them
    shutil.copytree(Path(__file__).resolve().parents[2] / "examples" / "quickstart", d,
                    ignore=lambda _d, names: [n for n in names if n not in ("requirements.txt", "train.py")])
    (d / "requirements.txt").write_text("torch==2.14.1\n")
    from envman.app.build import wheelhouse_image

    wh = d / ".envman" / "wheelhouse"
    try:
        envman("init", str(d), "--target", "h100", "--python", "3.11", "--base-image", base_image)
        envman("fetch", str(d))
        out = envman("build", str(d), "--offline", "--progress", "plain")
        assert f"tagged {good_tag(d)}" in out.stdout
        report = json.loads((d / "envman.smoke.json").read_text())
        assert report["exit_code"] == 6 and "GPU checks skipped: no GPU visible" in report["notes"]
        obs = report["observed"]
        assert obs["version"].startswith("2.14.1") and obs["cuda"] == "13.0" and obs["cudnn"] == 92400
        assert "sm_90" in obs["arch_list"]
        run = subprocess.run(["docker", "run", "--rm", good_tag(d), "python", "train.py"], capture_output=True, text=True)
        assert "device=cpu torch=2.14.1+cu130" in run.stdout, run.stderr
    finally:
        for ref in (good_tag(d), good_tag(d) + "-unverified") if (d / "envman.lock").exists() else ():
            engine.remove_image(ref, force=True)
        if wh.is_dir():
            engine.remove_image(wheelhouse_image(wh), force=True)
            shutil.rmtree(wh)

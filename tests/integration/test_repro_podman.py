"""Reproducible as bits on the real daemonless engines: podman 4.3 and buildah 1.28 (.ci/podman-up.sh installs
them), the way a user runs envman — init → (fetch) → build --verify-repro → verify.

Each test gets a private containers/storage (CONTAINERS_STORAGE_CONF) and temporary directory (TMPDIR: buildah's
cache mounts), seeded with the test base image from the Docker engine (docker-daemon:), and removes both
afterwards: podman's default storage and the Docker engine's images are never touched. The torch case (slow) builds the 6 GB torch 2.14.1 image twice from the wheelhouse.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from .engine_helpers import BASE_IMAGE, ROOT, envman, good_tag, lock_of

pytestmark = [pytest.mark.integration, pytest.mark.network]





@pytest.fixture
def storage(tmp_path_factory, monkeypatch):
    """A private containers/storage for podman and buildah, holding the test base image; removed afterwards."""
    import os

    for tool in ("podman", "buildah"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} is not installed: bash .ci/podman-up.sh")
    if subprocess.run(["docker", "image", "inspect", BASE_IMAGE], capture_output=True).returncode != 0:
        pytest.skip(f"the test base image {BASE_IMAGE} is missing from the Docker engine: bash .ci/test-base-image.sh")
    d = Path(tmp_path_factory.mktemp("containers", numbered=True))
    conf = d / "storage.conf"
    conf.write_text(f'[storage]\ndriver = "overlay"\ngraphroot = "{d / "graph"}"\nrunroot = "{d / "run"}"\n')
    (d / "tmp").mkdir()
    # TMPDIR: where buildah keeps RUN --mount=type=cache directories and stages layer commits (default /var/tmp)
    env = {**os.environ, "CONTAINERS_STORAGE_CONF": str(conf), "TMPDIR": str(d / "tmp")}
    pulled = subprocess.run(["podman", "pull", "--quiet", f"docker-daemon:{BASE_IMAGE}"], capture_output=True, text=True, env=env)
    assert pulled.returncode == 0, pulled.stderr
    yield env
    for argv in (["buildah", "rm", "--all"], ["podman", "rm", "--all", "--force"], ["podman", "rmi", "--all", "--force"]):
        subprocess.run(argv, capture_output=True, env=env)
    subprocess.run(["umount", "-R", str(d / "graph" / "overlay")], capture_output=True)
    shutil.rmtree(d, ignore_errors=True)


def podman(env: dict, *args: str) -> str:
    from envman.engine.runtime import machine_ulimits

    if args[0] == "run":  # the limits this machine lets a container have (envman/engine/runtime.py)
        args = ("run", *machine_ulimits(), *args[1:])
    out = subprocess.run(["podman", *args], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_two_podman_builds_agree_buildah_agrees_and_verify_says_so(tmp_path, storage):
    d = tmp_path / "quick"
    d.mkdir()
    (d / "requirements.txt").write_text("numpy==2.1.3\ntqdm==4.67.1\n")
    (d / "train.py").write_text("import numpy, tqdm\nprint('numpy', numpy.__version__)\n")
    envman("init", str(d), "--cpu", "--python", "3.11", "--base-image", BASE_IMAGE, env=storage)
    lock = lock_of(d)
    sde = lock["reproducible"]["source_date_epoch"]
    assert sde > 1_700_000_000 and "pylock.toml" in lock["reproducible"]["source_date_epoch_from"]
    assert f"ARG SOURCE_DATE_EPOCH={sde}" in (d / "Dockerfile").read_text()

    out = envman("build", str(d), "--engine", "podman", "--verify-repro", "--progress", "plain", env=storage)
    tag = good_tag(d)
    assert f"tagged {tag}" in out.stdout and "reproducible: both builds gave sha256:" in out.stdout
    record = lock_of(d)["reproducible"]["images"]
    assert [(r["engine"], r["dockerfile"]) for r in record] == [("podman", "Dockerfile")]
    assert lock_of(d)["lock_hash"] == lock["lock_hash"]  # recording is outside the lock's identity
    image_id = record[0]["image_id"]
    assert podman(storage, "image", "inspect", "--format", "{{.Id}}", tag).strip() == image_id.split(":")[1]
    # the dates in the image are the lock's, not the build's
    assert podman(storage, "image", "inspect", "--format", "{{.Created.Unix}}", tag).strip() == str(sde)

    verdict = envman("verify", tag, "--project", str(d), "--engine", "podman", env=storage)
    assert verdict.stdout.startswith(f"{tag} is exactly this lock: image {image_id}")
    other = envman("verify", BASE_IMAGE, "--project", str(d), "--engine", "podman", env=storage, check=False)
    assert other.returncode == 1 and "is not an image this lock builds" in other.stderr

    # in the image: the SBOM (the same bytes as beside the lock), no password-change day, no logs
    shadow = podman(storage, "run", "--rm", "--user", "0", tag, "sh", "-c",
                    "grep '^app:' /etc/shadow; find /var/log -type f | wc -l; cat /opt/envman/sbom.cdx.json")
    line, logs, sbom = shadow.split("\n", 2)
    assert line.split(":")[2] == "" and logs.strip() == "0"
    assert sbom == (d / ".envman" / "sbom.cdx.json").read_text()
    assert any(c["name"] == "numpy" and c["version"] == "2.1.3" for c in json.loads(sbom)["components"])

    # buildah, from scratch twice, makes the very same image
    again = envman("build", str(d), "--engine", "buildah", "--verify-repro", "--no-smoke", "--progress", "plain", env=storage)
    assert f"reproducible: both builds gave {image_id}" in again.stdout


def test_apt_packages_pinned_by_apt_in_the_base_install_at_those_versions_and_agree(tmp_path, storage):
    d = tmp_path / "apt"
    d.mkdir()
    (d / "requirements.txt").write_text("numpy==2.1.3\n")
    (d / "train.py").write_text("import numpy\n")
    envman("init", str(d), "--cpu", "--python", "3.11", "--base-image", BASE_IMAGE, env=storage)
    (d / "envman.yaml").write_text((d / "envman.yaml").read_text() + "system_packages:\n- libgomp1\n")
    out = envman("lock", str(d), "--pin-apt", "--engine", "podman", env=storage)
    assert "apt: the closure of libgomp1 pinned (" in out.stdout and "by apt in the base image, now" in out.stdout
    pins = lock_of(d)["apt_pins"]
    assert pins["libgomp1"].startswith("12.")  # bookworm's gcc 12
    assert f"libgomp1={pins['libgomp1']}" in (d / "Dockerfile").read_text()
    kept = envman("lock", str(d), env=storage)  # a re-lock keeps the pins (same packages, same base)
    assert "kept from the last lock" in kept.stdout and lock_of(d)["apt_pins"] == pins
    build = envman("build", str(d), "--engine", "podman", "--verify-repro", "--no-smoke", "--progress", "plain", env=storage)
    assert "reproducible: both builds gave sha256:" in build.stdout
    installed = podman(storage, "run", "--rm", good_tag(d), "dpkg-query", "-W", "-f", "${Version}", "libgomp1")
    assert installed == pins["libgomp1"]
    sbom = json.loads((d / ".envman" / "sbom.cdx.json").read_text())
    assert {"name": "libgomp1", "version": pins["libgomp1"]}.items() <= next(
        c for c in sbom["components"] if c["name"] == "libgomp1").items()


STAMP_SETUP = """import time
from setuptools import setup

# a build that stamps the time into the package it installs
with open("stampy/stamp.py", "w") as fh:
    fh.write(f"BUILT_NS = {time.time_ns()}\\n")
setup(name="stampy", version="0.1", packages=["stampy"])
"""


def test_a_file_stamped_with_the_time_fails_the_check_and_is_named(tmp_path, storage):
    d = tmp_path / "stampy"
    (d / "stampy").mkdir(parents=True)
    (d / "requirements.txt").write_text("numpy==2.1.3\n.\n")
    (d / "stampy" / "__init__.py").write_text("")
    (d / "setup.py").write_text(STAMP_SETUP)
    envman("init", str(d), "--cpu", "--python", "3.11", "--base-image", BASE_IMAGE, env=storage)
    before = sorted(p.relative_to(d).as_posix() for p in d.rglob("*") if ".envman" not in p.parts)

    out = envman("build", str(d), "--engine", "podman", "--verify-repro", "--progress", "plain", env=storage, check=False)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
    assert out.stderr.startswith("error: two builds of this lock from scratch gave two images (sha256:")
    named = [ln for ln in out.stderr.splitlines() if "content differs" in ln]
    assert any(ln.endswith("/opt/venv/lib/python3.11/site-packages/stampy/stamp.py: content differs") for ln in named)
    # nothing else differs: the stamped file, its bytecode, and the wheel's RECORD that holds its sha256
    assert all("site-packages/stampy/" in ln or ln.endswith("site-packages/stampy-0.1.dist-info/RECORD: content differs")
               for ln in named), named
    assert "reproducible" not in lock_of(d) or not lock_of(d)["reproducible"].get("images")
    # the second build stays for inspection; the project directory is as it was (the build ran on a copy)
    assert podman(storage, "image", "exists", good_tag(d) + "-unverified") == ""
    assert sorted(p.relative_to(d).as_posix() for p in d.rglob("*") if ".envman" not in p.parts) == before


@pytest.mark.slow
def test_torch_wheelhouse_offline_two_podman_builds_agree(tmp_path, storage):
    """torch 2.14.1+cu130 from the wheelhouse (envman fetch, build --offline): two builds from scratch, one ID.

    Disk: the wheelhouse (2.9 GB) and, while buildah commits the 5.3 GB torch layer, the container's files, the
    layer's tar and the stored layer at once (~16 GB); the first image is gone before the second build starts."""
    free = shutil.disk_usage(tmp_path).free
    if free < 21 << 30:
        pytest.skip(f"needs ~21 GB free for the torch layer's commit (podman keeps it three times while committing); "
                    f"{free / 2**30:.1f} GB free")
    d = tmp_path / "torch-repro"
    shutil.copytree(ROOT / "examples" / "quickstart", d,
                    ignore=lambda _d, names: [n for n in names if n not in ("requirements.txt", "train.py")])
    (d / "requirements.txt").write_text("torch==2.14.1\n")
    wh = d / ".envman" / "wheelhouse"
    try:
        envman("init", str(d), "--target", "h100", "--python", "3.11", "--base-image", BASE_IMAGE, env=storage)
        envman("fetch", str(d), env=storage)
        out = envman("build", str(d), "--offline", "--engine", "podman", "--verify-repro", "--progress", "plain",
                     env=storage)
        assert "reproducible: both builds gave sha256:" in out.stdout and f"tagged {good_tag(d)}" in out.stdout
        record = lock_of(d)["reproducible"]["images"][0]
        assert record["dockerfile"] == ".envman/Dockerfile.offline" and record["engine"] == "podman"
        obs = json.loads((d / "envman.smoke.json").read_text())["observed"]
        assert obs["version"].startswith("2.14.1") and obs["cuda"] == "13.0"
        verdict = envman("verify", good_tag(d), "--project", str(d), "--engine", "podman", env=storage)
        assert "is exactly this lock" in verdict.stdout
    finally:
        shutil.rmtree(wh, ignore_errors=True)

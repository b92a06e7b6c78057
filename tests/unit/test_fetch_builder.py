"""`envman fetch` + `envman build --offline` for a lock with a source-only package (deepspeed): the wheelhouse
must hold what the builder stage reads (the sdist, the build lock's wheels), and the offline builder must read
its build tools from the wheelhouse, not from an index."""

from __future__ import annotations

import hashlib

import pytest

from envman.app import fetch as app_fetch
from envman.app.lockinputs import stack_files
from envman.errors import UsageError
from envman.image.plan import plan_builder
from envman.image.stages import plan_source_builds
from envman.image.tables import load_image_tables
from envman.lock.layout import StackFiles
from envman.lock.wheelhouse import read_lock
from envman.lockedstack import BaseImage, LockedStack

SDIST = b"deepspeed sdist bytes"
SHA = hashlib.sha256(SDIST).hexdigest()
URL = "https://files.pythonhosted.org/packages/aa/bb/deepspeed-0.19.8.tar.gz"


def _h(c: str) -> str:
    return c * 64


def _project(tmp_path, *, pylock_sha: str = SHA):
    (tmp_path / "requirements.lock.txt").write_text(
        f"deepspeed==0.19.8 --hash=sha256:{SHA}\n"
        f"ninja==1.13.2 --hash=sha256:{_h('a')}\n"
        f"torch==2.14.1 --hash=sha256:{_h('b')}\n")
    (tmp_path / "requirements.source.lock.txt").write_text(f"deepspeed==0.19.8 \\\n    --hash=sha256:{SHA}\n")
    (tmp_path / "requirements.build.lock.txt").write_text(
        "--index-url https://pypi.org/simple\n"
        f"ninja==1.13.2 --hash=sha256:{_h('a')}\n"
        f"nvidia-cuda-nvcc==13.0.88 --hash=sha256:{_h('c')}\n")
    (tmp_path / "pylock.toml").write_text(
        'lock-version = "1.0"\n[[packages]]\nname = "deepspeed"\nversion = "0.19.8"\n'
        f'sdist = {{ url = "{URL}", hashes = {{ sha256 = "{pylock_sha}" }} }}\n')
    return read_lock(tmp_path / "requirements.lock.txt")


def test_fetch_takes_the_sdist_from_pylock_and_adds_the_build_locks_wheels(tmp_path):
    parsed = _project(tmp_path)
    wheels, sdists = app_fetch.builder_inputs(tmp_path, StackFiles(), parsed)
    # deepspeed has no wheel: pip download --only-binary=:all: would fail on it ("No matching distribution")
    assert [w.pin() for w in wheels.wheels] == ["ninja==1.13.2", "torch==2.14.1", "nvidia-cuda-nvcc==13.0.88"]
    assert wheels.options == parsed.options and sdists == {"deepspeed": (URL, SHA)}


def test_a_project_without_source_only_packages_fetches_its_lock_unchanged(tmp_path):
    parsed = _project(tmp_path)
    (tmp_path / "requirements.source.lock.txt").unlink()
    assert app_fetch.builder_inputs(tmp_path, StackFiles(), parsed) == (parsed, {})


def test_an_sdist_whose_hash_the_source_lock_does_not_hold_is_refused(tmp_path):
    parsed = _project(tmp_path, pylock_sha=_h("d"))
    with pytest.raises(UsageError) as ei:
        app_fetch.builder_inputs(tmp_path, StackFiles(), parsed)
    assert "deepspeed==0.19.8's hashes do not hold the sha256 of deepspeed-0.19.8.tar.gz" in ei.value.message


def test_sdists_are_downloaded_once_and_hash_checked(tmp_path, monkeypatch):
    calls = []

    def fake_fetch(url, sha, timeout=120):
        calls.append(url)
        assert sha == SHA
        return SDIST

    monkeypatch.setattr("envman.lock.build_deps.fetch_sdist", fake_fetch)
    wh = tmp_path / "wh"
    assert app_fetch.fetch_sdists({"deepspeed": (URL, SHA)}, wh) == (("deepspeed-0.19.8.tar.gz",), ())
    assert (wh / "deepspeed-0.19.8.tar.gz").read_bytes() == SDIST
    assert app_fetch.fetch_sdists({"deepspeed": (URL, SHA)}, wh) == ((), ("deepspeed-0.19.8.tar.gz",))
    assert calls == [URL]


def _builder(offline_image):
    t = load_image_tables()
    sb = plan_source_builds([("deepspeed", "0.19.8")], t.build_needs, "13.0", cuda_base=False, nvcc_wheels=t.nvcc)
    res = type("R", (), {"targets": (), "python": "3.11"})()
    stack = LockedStack(name="p", res=res, base=BaseImage("envman-test-base:bookworm", "slim"), inputs_hash="0" * 64,
                        tools_lock="requirements.build.lock.txt", offline_image=offline_image)
    return plan_builder(stack, sb, "requirements.source.lock.txt", None)


def test_offline_the_builder_installs_its_build_tools_from_the_wheelhouse():
    b = _builder("envman-wheelhouse:0123")
    assert "--mount=type=bind,from=envman-wheelhouse:0123,target=/wheels-in" in b.tools_step.mounts
    assert "--no-index --find-links /wheels-in -r /tmp/envman/requirements.build.lock.txt" in b.tools_step.command
    assert "--no-index --find-links /wheels-in" in b.wheel_step.command
    online = _builder(None)
    assert "--no-index" not in online.tools_step.command
    assert not any("wheels-in" in m for m in online.tools_step.mounts)


def test_offline_build_applies_envmans_ignore_file_not_the_repositorys_own(tmp_path):
    """BuildKit looks for <Dockerfile>.dockerignore beside .envman/Dockerfile.envman.offline, else the context's
    .dockerignore: in a repository with its own, that one applied and the 3 GB wheelhouse was sent as the build
    context and copied into the image by `COPY . /app` (measured on yolov5-like: a 3.11 GB context)."""
    import shutil
    from pathlib import Path

    from envman.app.build import BuildOptions, _offline_build_file, wheelhouse_image
    from envman.app.init import InitOptions, init_project
    from tests.fakes import FakeEngine

    d = tmp_path / "yolov5-like"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "repos" / "yolov5-like", d)
    init_project(d, InitOptions(no_lock=True, targets=("h100",)), detect_gpus=lambda: pytest.fail("no GPU probe"))
    wh = d / ".envman" / "wheelhouse"
    wh.mkdir(parents=True)
    (wh / "numpy-2.1.3-cp311-cp311-manylinux_2_17_x86_64.whl").write_bytes(b"w")
    engine = FakeEngine(images=[wheelhouse_image(wh)])
    said: list[str] = []
    path = _offline_build_file(d, stack_files(d, None), BuildOptions(offline=True), said.append, engine)
    assert path == d / ".envman" / "Dockerfile.envman.offline"
    # opencv-python's libraries come from apt, not from the wheelhouse: said before the build meets it
    assert ("note: the image installs libgl1, libglib2.0-0, libsm6, libxcb1, libxext6, libxrender1 with apt, which "
            "the wheelhouse does not hold: the build "
            "reaches a Debian/Ubuntu mirror for them (or set base_image in envman.yaml to an image that has them)") in said
    ignore = (d / ".envman" / "Dockerfile.envman.offline.dockerignore").read_text()
    assert ignore == (d / "Dockerfile.envman.dockerignore").read_text()
    assert ".envman/wheelhouse" in ignore.splitlines()
    assert (d / ".dockerignore").read_text().startswith("# the repository's own ignore file")  # untouched


def test_the_wheelhouse_images_name_changes_with_its_sdists(tmp_path):
    from envman.app.build import wheelhouse_image

    (tmp_path / "numpy-2.1.3-cp311-cp311-manylinux_2_17_x86_64.whl").write_bytes(b"w")
    before = wheelhouse_image(tmp_path)
    (tmp_path / "deepspeed-0.19.8.tar.gz").write_bytes(b"s")
    assert wheelhouse_image(tmp_path) != before

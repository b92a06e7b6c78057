"""Issue #11's repositories, as patterns (tests/fixtures/repos/*-like: our own small files, since GitHub cannot be
reached): torch 2.14.1 for Python 3.11 served from the local wheel index → envman init → fetch → build --offline →
smoke, on a real engine without a GPU.

To stay within CI's time, the whisper and yolov5 patterns share ONE image (one torch install, 6.3 GB):
the yolov5-like repository (requirements.txt, its own Dockerfile, .dockerignore and docker-compose.yml, opencv's
system libraries) with the whisper-like package added (pyproject.toml, a console script). The deepspeed-chat one
builds deepspeed's sdist in the builder stage (torch + nvcc from NVIDIA's wheels, offline) and is a second image
(5.9 GB). Measured here, cold BuildKit cache: fetch about 1 min each (pip's cache warm), the yolov5+whisper build
about 2 min, the deepspeed build 3 min (torch is installed twice: in the builder, 98 s, and in the image, 77 s; the
sdist builds in 10 s). With BuildKit's cache warm both tests take under a minute.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from .engine_helpers import envman, good_tag

pytestmark = [pytest.mark.integration, pytest.mark.network, pytest.mark.slow]

REPOS = Path(__file__).resolve().parents[1] / "fixtures" / "repos"
THEIRS = ("Dockerfile", ".dockerignore", "docker-compose.yml")


class Cleanup:
    """What a test makes, removed afterwards even when its folder is gone: names are taken when they exist."""

    def __init__(self) -> None:
        self.refs: list[str] = []
        self.titles: list[str] = []
        self.folders: list[Path] = []

    def fetched(self, d: Path) -> None:
        from envman.app.build import wheelhouse_image

        wh = d / ".envman" / "wheelhouse"
        self.refs += [good_tag(d), good_tag(d) + "-unverified", wheelhouse_image(wh)]
        self.titles.append(d.name)
        self.folders.append(wh)


@pytest.fixture
def cleanup(engine):
    c = Cleanup()
    yield c
    for ref in c.refs:
        engine.remove_image(ref, force=True)
    for title in c.titles:  # images a failed build left untagged carry the project's title label
        engine.client.images.prune(filters={"dangling": True, "label": f"org.opencontainers.image.title={title}"})
    for wh in c.folders:
        shutil.rmtree(wh, ignore_errors=True)


def run_in(tag: str, script: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "run", "--rm", tag, "sh", "-c", script], capture_output=True, text=True)


def test_whisper_and_yolov5_patterns_in_one_torch_2_14_1_image(tmp_path, base_image, engine, cleanup):
    d = tmp_path / "yolo-whisper"
    shutil.copytree(REPOS / "yolov5-like", d)
    shutil.copy(REPOS / "whisper-like" / "pyproject.toml", d / "pyproject.toml")
    shutil.copytree(REPOS / "whisper-like" / "whisper_like", d / "whisper_like")
    theirs = {f: (d / f).read_bytes() for f in THEIRS}

    init = envman("init", str(d), "--target", "h100", "--python", "3.11", "--base-image", base_image)
    assert "found dependencies in: requirements.txt, pyproject.toml [project]" in init.stdout
    assert "the repository's own Dockerfile is kept; envman writes Dockerfile.envman beside it" in init.stdout
    assert "the project is a package (pyproject)" in init.stdout
    assert "opencv-python loads libgl1, libglib2.0-0" in init.stdout
    ours = (d / "Dockerfile.envman").read_text()
    assert "libgl1 libglib2.0-0" in ours and (d / "Dockerfile.envman.dockerignore").is_file()
    assert (d / "compose.envman.yaml").is_file()
    envman("fetch", str(d))
    cleanup.fetched(d)
    out = envman("build", str(d), "--offline", "--progress", "plain")
    tag = good_tag(d)
    assert f"tagged {tag}" in out.stdout
    for module in ("torch", "cv2", "yaml", "numpy", "tqdm"):
        assert f"PASS  import {module}" in out.stdout, module
    report = json.loads((d / "envman.smoke.json").read_text())
    assert report["exit_code"] == 6 and report["observed"]["version"].startswith("2.14.1")

    run = run_in(tag, "command -v whisper-like && whisper-like --help && python detect.py && ls -a /app && ! test -e /app/.envman")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0] == "/opt/venv/bin/whisper-like"
    # envman's ignore file applied to the offline build, not the repository's own, and /app holds the
    # project's source without envman's files (issue 24): no .envman/ and so no wheelhouse in /app
    listing = run.stdout.splitlines()
    assert "wheelhouse" not in listing and ".envman" not in listing and "envman.lock" not in listing
    size = engine.inspect_image(tag)["Size"]
    print(f"yolov5+whisper-like image: {size / 1e9:.2f} GB")
    assert size < 7e9, size  # torch's 5.3 GB venv, opencv and its system libraries; never the 3 GB wheelhouse
    assert "usage: whisper-like" in run.stdout and "--model MODEL" in run.stdout
    assert "detect ok (1, 4, 62, 62)" in run.stdout and "2.14.1+cu130" in run.stdout
    # the repository's own Docker files: byte-identical after init, fetch and build
    assert {f: (d / f).read_bytes() for f in THEIRS} == theirs


def test_deepspeed_chat_pattern_builds_deepspeed_from_its_sdist_offline(tmp_path, base_image, engine, cleanup):
    d = tmp_path / "ds-chat"
    shutil.copytree(REPOS / "deepspeed-chat-like", d)

    init = envman("init", str(d), "--target", "h100", "--python", "3.11", "--base-image", base_image)
    assert "requirements.txt:3: project '-e .' (installs this repository (install_project: true))" in init.stdout
    assert "no wheel for the target platform on the index; built from the hash-checked sdist" in init.stdout
    assert "the builder stage installs nvcc 13.0 from NVIDIA's nvidia-cuda-nvcc==13.0.* wheel" in init.stdout
    envman("fetch", str(d))
    cleanup.fetched(d)
    wh = d / ".envman" / "wheelhouse"
    assert len(list(wh.glob("deepspeed-*.tar.gz"))) == 1  # the sdist, for the offline builder
    assert list(wh.glob("nvidia_cuda_nvcc-13.0.*.whl"))  # the build lock's wheels too
    out = envman("build", str(d), "--offline", "--progress", "plain")
    tag = good_tag(d)
    assert f"tagged {tag}" in out.stdout
    assert "PASS  import deepspeed" in out.stdout
    # the builder step built deepspeed's wheel, unless BuildKit's cache already held that step
    step = next(ln.split()[0] for ln in out.stdout.splitlines() if ln.startswith("#") and "pip wheel --require-hashes" in ln)
    assert "Created wheel for deepspeed" in out.stdout or f"{step} CACHED" in out.stdout
    offline = (d / ".envman" / "Dockerfile.offline").read_text()
    assert "--no-index --find-links /wheels-in -r /tmp/envman/requirements.build.lock.txt" in offline

    run = run_in(tag, "python -c 'import deepspeed, dschat_like; print(dschat_like.__version__)' && python train.py"
                      " && ! command -v nvcc && ! ls /opt/venv/lib/python3.11/site-packages/nvidia/cu13/bin/nvcc")
    assert run.returncode == 0, run.stdout + run.stderr
    # deepspeed logs "Setting accelerator to CPU" to stdout on a machine without a GPU
    lines = [ln for ln in run.stdout.splitlines() if "[WARNING]" not in ln]
    assert lines[0] == "0.1.0" and lines[1].startswith("deepspeed 0.")
    size = engine.inspect_image(tag)["Size"]
    print(f"deepspeed-chat-like image: {size / 1e9:.2f} GB")
    assert size < 7e9, size  # nvcc stayed in the builder stage

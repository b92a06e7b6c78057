"""JAX end to end on the real engine: envman init → fetch → build --offline → smoke, torch-free images, no GPU.

Python 3.11 is the only interpreter here (the test base image is Debian 12's), and jax 0.11+ publishes no cp311
wheels. The tests read the frozen fixture matrix, whose newest release with cp311 wheels is jax 0.7.2; with the
shipped matrix the same projects get jax 0.10.2 (built by hand the same way, 2026-12-01: same checks, same
results). Measured here (cold BuildKit cache, pip's cache warm): the jax[cuda13] + flax image builds in about a
minute into 4.3 GB; the JAX + tensorflow-cpu one (tensorflow-datasets' `promise` sdist built in the builder
stage) in about two. Without a GPU the smoke test passes its CPU-side checks — versions, the plugin, the cuDNN
the wheel's libcudnn reports against the one jaxlib was built with — and exits 6; --require-gpu makes that 5.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from packaging.version import Version

from . import test_build_repos
from .engine_helpers import envman, good_tag, lock_of

pytestmark = [pytest.mark.integration, pytest.mark.network, pytest.mark.slow]
cleanup = test_build_repos.cleanup  # the fixture that removes what a test built

REPOS = Path(__file__).resolve().parents[1] / "fixtures" / "repos"
NO_TORCH = "python -c 'import importlib.util as u; assert u.find_spec(\"torch\") is None, \"torch in a JAX image\"'"


def run_in(tag: str, script: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "run", "--rm", tag, "sh", "-c", script], capture_output=True, text=True)


def build(d: Path, cleanup, target: str, base_image: str) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    init = envman("init", str(d), "--target", target, "--python", "3.11", "--base-image", base_image)
    envman("fetch", str(d))
    cleanup.fetched(d)
    return init, envman("build", str(d), "--offline", "--progress", "plain")


def test_a_flax_repository_builds_a_jax_cuda13_image_and_passes_its_cpu_checks(tmp_path, base_image, engine, cleanup):
    d = tmp_path / "jax-flax"
    shutil.copytree(REPOS / "jax-flax-like", d)
    init, out = build(d, cleanup, "h100", base_image)
    stack = lock_of(d)["stack"]
    v, cudnn = stack["framework"]["version"], stack["cudnn"]
    assert (stack["framework"]["variant"], stack["cuda"], cudnn) == ("cuda13", "13.0", "9.12")
    assert "requirements.txt:1: jax[cuda13]: the CUDA 13 build (cuda: '13')" in init.stdout
    pins = (d / "requirements.lock.txt").read_text()
    for pin in (f"jax=={v}", f"jaxlib=={v}", f"jax-cuda13-plugin=={v}", f"jax-cuda13-pjrt=={v}",
                "nvidia-cudnn-cu13==9.", "nvidia-nccl-cu13==2.", "nvidia-cuda-runtime==13.0."):
        assert pin in pins, pin
    # cuDNN and NCCL are held to the build's floors (9.12, 2.27) within their major (lock/pins.py, issue 38)
    for name, floor in (("nvidia-cudnn-cu13", "9.12"), ("nvidia-nccl-cu13", "2.27")):
        got = re.search(rf"^{name}==(\S+) ", pins, re.M)[1]
        assert Version(floor) <= Version(got) < Version(f"{int(floor.split('.')[0]) + 1}"), (name, got)
    assert "torch" not in pins
    tag = good_tag(d)
    assert f"tagged {tag}" in out.stdout
    for line in (f"PASS  framework version                {v}", "PASS  framework variant                cuda13",
                 "PASS  jaxlib/plugin/pjrt agree", "PASS  cudnn                            9.",
                 "PASS  cuda runtime                     13.0", "PASS  arch list", "PASS  import flax"):
        assert line in out.stdout, line
    report = json.loads((d / "envman.smoke.json").read_text())
    # what jaxlib was built with, read in the image: the plugin's cuDNN floor, which the lock holds
    assert report["exit_code"] == 6 and report["observed"]["build_cudnn"].startswith(cudnn + ".")
    gpu = envman("smoke", "--image", tag, "--require-gpu", check=False)
    assert gpu.returncode == 5 and "FAIL  gpu required" in gpu.stderr + gpu.stdout

    run = run_in(tag, f"{NO_TORCH} && python train.py")
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip().splitlines()[-1].startswith("flax step ok") and run.stdout.strip().endswith("cpu")
    size = engine.inspect_image(tag)["Size"]
    print(f"jax[cuda13] + flax image: {size / 1e9:.2f} GB")
    assert size < 6e9, size


def test_jax_with_tensorflow_for_tf_data_gets_one_image_with_tensorflow_on_the_cpu(tmp_path, base_image, engine, cleanup):
    d = tmp_path / "jax-tf"
    shutil.copytree(REPOS / "jax-tf-pipeline-like", d)
    init, out = build(d, cleanup, "a100", base_image)
    assert ("requirements.txt:4: tensorflow>=2.16: beside jax, one image: jax on the GPU, tensorflow on the CPU "
            "(installed as tensorflow-cpu, for input pipelines)") in init.stdout
    stack = lock_of(d)["stack"]
    assert stack["framework"]["variant"] == "cuda12"
    pins = (d / "requirements.lock.txt").read_text()
    assert "\ntensorflow-cpu==" in pins and "\ntensorflow==" not in pins
    assert f"jax-cuda12-plugin=={stack['framework']['version']}" in pins
    # jax's cuda12 build's cuDNN floor, within its major (lock/pins.py), not TensorFlow's
    got = re.search(r"^nvidia-cudnn-cu12==(\S+) ", pins, re.M)[1]
    assert Version(stack["cudnn"]) <= Version(got) < Version(str(Version(stack["cudnn"]).major + 1)), got
    tag = good_tag(d)
    assert "PASS  framework variant                cuda12" in out.stdout and "PASS  import tensorflow " in out.stdout
    run = run_in(tag, f"{NO_TORCH} && python -c 'import importlib.metadata as m; print(m.version(\"tensorflow-cpu\"))'"
                      " && python train.py")
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip().splitlines()[-1].startswith("tf.data -> jax ok")

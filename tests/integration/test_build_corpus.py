"""Issue 20's corpus end to end: real repositories' dependency files (tests/corpus.py assembles them, with empty stubs of
their packages: their code is never copied) → envman init → fetch → build --offline → the project imports in the
image, on a real engine without a GPU. torch 2.14.1 for Python 3.11 comes from the local wheel index (see
/work/shared/ENVIRONMENT.md); everything else from PyPI.

Two patterns, one image each (about 6 GB; removed afterwards with their wheelhouse images):
- openai/CLIP: a setup.py package (its install_requires read from requirements.txt at run time) → installed;
- WongKinYiu/yolov7: a requirements.txt repository run from its source (models/, utils/ imported from /app), whose
  numpy<1.24 has no wheel for Python 3.12 (init --python 3.11, the command the refusal names), opencv's system
  libraries added.
Measured here, cold BuildKit cache: about 4 min each, most of it the torch layer.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests import corpus

from .engine_helpers import envman, good_tag
from .test_build_repos import Cleanup

pytestmark = [pytest.mark.integration, pytest.mark.network, pytest.mark.slow]



@pytest.fixture
def cleanup(engine):
    c = Cleanup()
    yield c
    for ref in c.refs:
        engine.remove_image(ref, force=True)
    for title in c.titles:
        engine.client.images.prune(filters={"dangling": True, "label": f"org.opencontainers.image.title={title}"})
    for wh in c.folders:
        shutil.rmtree(wh, ignore_errors=True)


def _build(tmp_path: Path, name: str, base_image: str, cleanup: Cleanup, *args: str) -> tuple[Path, str, str]:
    d = tmp_path / name.lower().replace("__", "-").replace("_", "-")
    corpus.copy_repo(name, d)
    init = envman("init", str(d), "--target", "h100", "--python", "3.11", "--base-image", base_image, *args)
    envman("fetch", str(d))
    cleanup.fetched(d)
    out = envman("build", str(d), "--offline", "--progress", "plain")
    tag = good_tag(d)
    assert f"tagged {tag}" in out.stdout
    return d, tag, init.stdout


def _run(tag: str, script: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "run", "--rm", tag, "sh", "-c", script], capture_output=True, text=True)


def test_clip_a_setup_py_package_is_installed_and_imports(tmp_path, base_image, engine, cleanup):
    d, tag, init = _build(tmp_path, "openai__CLIP", base_image, cleanup)
    assert "the project is a package (setup.py)" in init
    run = _run(tag, "cd / && python -c 'import clip, torch, torchvision, ftfy, regex; print(clip.__file__, torch.__version__)'")
    assert run.returncode == 0, run.stderr
    assert "/site-packages/clip/" in run.stdout and "2.14.1" in run.stdout  # installed, not read from /app


def test_yolov7_runs_from_its_source_tree(tmp_path, base_image, engine, cleanup):
    d, tag, init = _build(tmp_path, "WongKinYiu__yolov7", base_image, cleanup)
    assert "opencv-python loads libgl1" in init
    run = _run(tag, "cd /app && python -c 'import models, utils, cv2, torch, yaml, scipy; print(models.__file__)'")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("/app/models/")


def test_the_projects_own_c_extension_is_compiled_in_the_builder_and_only_its_wheel_ships(tmp_path, base_image, engine,
                                                                                           cleanup):
    """Issue 20, pattern 5, on our own small project (tests/fixtures/patterns/c-extension: a C extension and a
    console script): the builder stage compiles it (build-essential there, from Debian), the image installs the
    wheel and has no compiler; the smoke test imports it and runs its console script's --help."""
    src = corpus.FIXTURES.parent / "patterns" / "c-extension"
    d = tmp_path / "tinyext"
    shutil.copytree(src, d)
    init = envman("init", str(d), "--cpu", "--framework", "none", "--python", "3.11", "--base-image", base_image)
    assert "the project compiles a C/C++ extension; it is built into a wheel in the builder stage" in init.stdout
    envman("fetch", str(d))
    cleanup.fetched(d)
    out = envman("build", str(d), "--offline", "--progress", "plain")
    tag = good_tag(d)
    assert f"tagged {tag}" in out.stdout
    assert "PASS  import tinyext" in out.stdout and "PASS  tinyext-hello --help" in out.stdout
    # from the work directory (`python train.py` there) the package is the source tree's, with its compiled module
    # beside it; the installed wheel holds it too; no compiler reached the image
    run = _run(tag, "tinyext-hello ok && cd /app && python -c 'import tinyext._fast as f; print(f.__file__)' && "
                    "ls /opt/venv/lib/python3.11/site-packages/tinyext/ && ! command -v gcc && ! command -v cc")
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "tinyext 5 ok" and lines[1].startswith("/app/tinyext/_fast.cpython-311")
    assert any(ln.startswith("_fast.cpython-311") for ln in lines[2:])


def test_a_pure_project_whose_setup_requires_the_lock_lacks_is_built_in_the_builder(tmp_path, base_image, engine,
                                                                                     cleanup):
    """Real-ESRGAN's pattern on our own small project (tests/fixtures/patterns/setup-requires: pure Python,
    setup_requires=['cython', 'numpy>=1.20']): installed in the image's last step, offline, setuptools would fetch
    Cython there and fail. The builder builds its wheel with Cython from the build lock; Cython never reaches the
    image; the smoke test imports the project."""
    d = tmp_path / "tinyscm"
    shutil.copytree(corpus.FIXTURES.parent / "patterns" / "setup-requires", d)
    init = envman("init", str(d), "--cpu", "--framework", "none", "--python", "3.11", "--base-image", base_image)
    assert "the project's build asks for cython (its setup.py's setup_requires)" in init.stdout
    assert "cython==" in (d / "requirements.build.lock.txt").read_text()
    assert "cython==" not in (d / "requirements.lock.txt").read_text()
    envman("fetch", str(d))
    cleanup.fetched(d)
    out = envman("build", str(d), "--offline", "--progress", "plain")
    tag = good_tag(d)
    assert f"tagged {tag}" in out.stdout and "PASS  import tinyscm" in out.stdout
    run = _run(tag, "cd / && python -c 'import tinyscm, numpy; print(tinyscm.__file__)' && ! python -c 'import Cython' "
                    "2>/dev/null && ! command -v gcc")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "/site-packages/tinyscm/" in run.stdout

"""uv for real, against PyPI (the tests marked `network`; the default `pytest` deselects them, .ci/run runs them):
what envman hands uv and makes of its answer, on indexes and repositories nobody faked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import envman.lock.registry
from envman.app.init import InitOptions, init_project
from envman.app.lock import check_lock, lock_project
from envman.cli.main import main
from envman.errors import LockError, ToolError, UsageError
from envman.lock import uv as uvmod

pytestmark = pytest.mark.network

REPOS = Path(__file__).resolve().parent.parent / "fixtures" / "repos"


@pytest.fixture
def repo(tmp_path):
    def make(name: str) -> Path:
        d = tmp_path / name
        shutil.copytree(REPOS / name, d)
        return d

    return make


def snapshot(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


class R:
    """What python_lock_job reads of a Resolution."""

    cuda = "13.0"
    cudnn = None
    nccl = None
    index_url = None
    arch = "x86_64"


def test_lock_with_uv_hashes_and_check(repo):
    d = repo("torch-repo")
    init_project(d, InitOptions(targets=("h100",), python="3.11"))
    req = (d / "requirements.lock.txt").read_text()
    fw = (d / "requirements.framework.lock.txt").read_text()
    assert "torch==2.14.1 \\" in req and "--hash=sha256:" in req
    assert "numpy==" in req and "numpy==" not in fw  # the framework layer holds only torch's closure
    assert "nvidia-cudnn-cu13==9.24.0.43" in fw
    assert (d / "pylock.toml").read_text().count("[[packages]]") >= 20
    lock = json.loads((d / "envman.lock").read_text())
    assert lock["stack"]["framework"] == {"name": "torch", "version": "2.14.1", "variant": "cu130", "index_url": None}
    assert check_lock(d) == []
    first = (d / "envman.lock").read_bytes()
    lock_project(d)
    assert (d / "envman.lock").read_bytes() == first  # same inputs, same bytes
    (d / "requirements.txt").write_text("torch>=2.3\nnumpy<2.3\n")
    assert check_lock(d) == ["requirements.txt changed since the lock"]
    assert main(["lock", str(d), "--check"]) == 1


def test_other_cuda_major_wheels_are_refused(tmp_path):
    (tmp_path / "envman.yaml").write_text(
        "name: mixed\nframework: torch==2.14.1\ntargets: [h100]\npython: '3.11'\npackages: [nvidia-cublas-cu12]\n"
    )
    before = snapshot(tmp_path)
    with pytest.raises(UsageError) as exc:
        lock_project(tmp_path)
    assert exc.value.message.startswith("nvidia-cublas-cu12==") and "contradicts the stack's CUDA 13.0" in exc.value.message
    assert snapshot(tmp_path) == before


def test_uv_failure_writes_nothing(tmp_path):
    (tmp_path / "envman.yaml").write_text("name: bad\ncpu: true\npackages: ['numpy==0.0.0']\npython: '3.11'\n")
    with pytest.raises(ToolError) as exc:
        lock_project(tmp_path)
    assert exc.value.message.startswith("uv could not resolve the requirements")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["envman.yaml"]


def test_relock_keeps_pins_that_still_fit_and_upgrade_moves_them(tmp_path):
    (tmp_path / "envman.yaml").write_text("name: pins\ncpu: true\npython: '3.11'\npackages: ['numpy==2.1.0']\n")
    lock_project(tmp_path)
    (tmp_path / "envman.yaml").write_text("name: pins\ncpu: true\npython: '3.11'\npackages: ['numpy>=2.0,<3']\n")
    lock_project(tmp_path)
    assert "numpy==2.1.0 \\" in (tmp_path / "requirements.lock.txt").read_text()  # no churn
    assert '\nversion = "2.1.0"' in (tmp_path / "pylock.toml").read_text()
    lock_project(tmp_path, upgrade=True)
    assert "numpy==2.1.0 \\" not in (tmp_path / "requirements.lock.txt").read_text()


def test_real_uv_holds_numpy_below_2_from_a_constraints_file(tmp_path, monkeypatch):
    monkeypatch.setattr(envman.lock.registry, "resolve_digest", lambda ref, timeout=3.0: None)
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path / "cache"))
    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "envman.yaml").write_text("name: demo\ncpu: true\npython: '3.11'\nframework: none\n"
                                      "requirements: [requirements.txt]\n")
    (proj / "requirements.txt").write_text("numpy\n-c constraints.txt\n")
    (proj / "constraints.txt").write_text("numpy<2\n")
    lock_project(proj, timeout=180)
    pins = [ln for ln in (proj / "requirements.lock.txt").read_text().splitlines() if ln.startswith("numpy==")]
    assert len(pins) == 1 and pins[0].split("==")[1].split()[0].startswith("1.")


def test_real_uv_never_asks_the_framework_index_for_other_packages(tmp_path):
    # the framework index refuses every connection: a lock of non-framework packages succeeds only if uv
    # never asks it (with --extra-index-url it would ask it for numpy first, and fail)
    class V(R):
        index_url = "http://127.0.0.1:9/simple"

    lr = uvmod.python_lock_job(["numpy==2.1.0"], "3.11", [V.index_url], [], V(), timeout=120).compile()
    assert [(p.name, p.version) for p in lr.python_lock.packages] == [("numpy", "2.1.0")]


def test_a_git_requirement_is_refused_at_lock_time_naming_the_line_and_its_commit(tmp_path):
    """A local bare repository over file:// stands in for GitHub; uv pins the URL to the commit. A checkout has no
    file hash, so the image's hash-checked install would refuse it: the lock says so first, and writes nothing."""
    import subprocess

    src = tmp_path / "src"
    (src / "tinypkg").mkdir(parents=True)
    (src / "tinypkg" / "__init__.py").write_text("")
    (src / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = '
                                        '"setuptools.build_meta"\n[project]\nname = "tinypkg"\nversion = "0.1"\n')
    git = ["git", "-c", "user.email=t@example.test", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q"], cwd=src, check=True)
    subprocess.run(git + ["add", "-A"], cwd=src, check=True)
    subprocess.run(git + ["commit", "-qm", "init"], cwd=src, check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(tmp_path / "tiny.git")], check=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=src, check=True, capture_output=True, text=True).stdout.strip()
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "requirements.txt").write_text(f"git+file://{tmp_path}/tiny.git\n-e .\n")
    with pytest.raises(LockError) as e:
        init_project(proj, InitOptions(cpu=True, framework="none"))
    assert e.value.message == (f"requirements.txt:1: tinypkg @ git+file://{tmp_path}/tiny.git@{commit} is a VCS "
                               "requirement: the image installs only hash-checked files, and a checkout has no file "
                               "hash, so `envman build` would fail on it")
    assert e.value.hint.endswith("or a release from an index (tinypkg==VERSION)")
    assert sorted(p.name for p in proj.iterdir()) == ["requirements.txt"]  # nothing half-written

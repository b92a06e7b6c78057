"""`envman uv write` with real uv: envman locks a project against a loopback PyTorch index, writes its stack
into the project's pyproject.toml, and then the user's own `uv lock` picks the same framework file —
same version, same local label, same sha256 — from the index envman wrote.

download.pytorch.org is not reachable here, so the matrix's ``index_url`` points at a loopback PEP 503 index
(tests/localindex.py). The first test serves tiny stand-in wheels named torch/torchvision with local version
labels: the property under test is *which index and which file uv picks*, and the stand-ins make the wrong
answers available on purpose (a newer 2.15.0 on the same index, the cu130 build on a second index the
project used before). The second test serves this machine's real CPU wheel, torch-2.13.0+cpu (pip's local
wheel folder, `pip config list` find-links), and compares against the file's own sha256.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envman._compat import tomllib
from tests.conftest import FIXTURE_MATRIX
from tests.localindex import add_wheel, serve, sha256_file, stand_in_wheel

pytestmark = pytest.mark.network  # envman's lock asks PyPI for everything the framework index does not serve

REAL_CPU_WHEEL = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")


def _matrix_at(tmp_path: Path, index: str) -> Path:
    d = tmp_path / "matrices"
    shutil.copytree(FIXTURE_MATRIX, d)
    torch = d / "torch.yaml"
    text = torch.read_text()
    assert 'index_url: "https://download.pytorch.org/whl/{variant}"' in text
    torch.write_text(text.replace("https://download.pytorch.org/whl/{variant}", f"{index}/whl/{{variant}}"))
    return d


def _envman(args: list[str], cwd: Path, matrix: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "ENVMAN_MATRIX_DIR": str(matrix), "ENVMAN_CACHE_DIR": str(tmp_path / "envman-cache"),
           "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    return subprocess.run([sys.executable, "-m", "envman.cli.main", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600, stdin=subprocess.DEVNULL)


def _uv_lock(project: Path, tmp_path: Path) -> dict:
    from envman.lock.uv import uv_binary

    env = {**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv-cache"), "UV_PYTHON_DOWNLOADS": "never"}
    out = subprocess.run([uv_binary(), "lock", "--python", sys.executable], cwd=project, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return tomllib.loads((project / "uv.lock").read_text())


def _locked(doc: dict, name: str) -> list[dict]:
    return [p for p in doc.get("package", []) if p["name"] == name]


def _pylock_file(project: Path, name: str) -> tuple[str, str, str]:
    """(version, url, sha256) of the one file envman's pylock.toml locks for ``name``."""
    doc = tomllib.loads((project / "pylock.toml").read_text())
    (pkg,) = [p for p in doc["packages"] if p["name"] == name]
    (wheel,) = pkg["wheels"]
    return pkg["version"], wheel["url"], wheel["hashes"]["sha256"]


def test_uv_lock_after_the_write_back_picks_envmans_torch_build(tmp_path):
    root = tmp_path / "index"
    for variant in ("cu126", "cu130"):
        d = root / "whl" / variant
        for tv, vv in (("2.14.1", "0.29.1"), ("2.15.0", "0.30.0")):  # 2.15.0: newer than the matrix vouches for
            stand_in_wheel(d, "torch", f"{tv}+{variant}")
            stand_in_wheel(d, "torchvision", f"{vv}+{variant}", requires=(f"torch=={tv}",))
    with serve(root) as base:
        matrix = _matrix_at(tmp_path, base)
        project = tmp_path / "proj"
        project.mkdir()
        # a uv project that used the cu130 index (a V100 is not in cu130's arch list: envman moves it to cu126)
        (project / "pyproject.toml").write_text(f'''[project]
name = "train"
version = "0.1.0"
requires-python = ">=3.9"  # the team's CI matrix
dependencies = [
    "torch>=2.4",
    "torchvision",
]

[tool.uv]
environments = ["sys_platform == 'linux'"]

[tool.uv.sources]
torch = {{ index = "pytorch" }}
torchvision = {{ index = "pytorch" }}

[[tool.uv.index]]
name = "pytorch"
url = "{base}/whl/cu130"
explicit = true
''')
        (project / "envman.yaml").write_text("name: train\npython: '3.11'\nframework: torch\n"
                                             "companions: [torchvision]\ntargets: [v100]\n")
        lock = _envman(["lock", "."], project, matrix, tmp_path)
        assert lock.returncode == 0, lock.stderr
        check = _envman(["uv", "write", ".", "--check"], project, matrix, tmp_path)
        assert check.returncode == 1 and "stale: pyproject.toml does not install envman's stack" in check.stderr
        wrote = _envman(["uv", "write", ".", "--yes"], project, matrix, tmp_path)
        assert wrote.returncode == 0, wrote.stderr
        assert f'+url = "{base}/whl/cu126"' in wrote.stdout  # the diff came first
        text = (project / "pyproject.toml").read_text()
        assert "# the team's CI matrix" in text and 'requires-python = ">=3.10"' in text
        assert _envman(["uv", "write", ".", "--check"], project, matrix, tmp_path).returncode == 0
        uv = _uv_lock(project, tmp_path)
    for name in ("torch", "torchvision"):
        version, url, sha = _pylock_file(project, name)
        (pkg,) = _locked(uv, name)
        assert (pkg["version"], pkg["source"]["registry"]) == (version, f"{base}/whl/cu126")
        (wheel,) = pkg["wheels"]
        assert (wheel["url"], wheel["hash"]) == (url, f"sha256:{sha}")
    assert _pylock_file(project, "torch")[0] == "2.14.1+cu126"


@pytest.mark.skipif(not REAL_CPU_WHEEL.is_file(), reason=f"{REAL_CPU_WHEEL} is not on this machine")
def test_the_real_cpu_wheel_from_a_loopback_index(tmp_path):
    root = tmp_path / "index"
    add_wheel(root / "whl" / "cpu", "torch", REAL_CPU_WHEEL)
    with serve(root) as base:
        matrix = _matrix_at(tmp_path, base)
        project = tmp_path / "proj"
        project.mkdir()
        (project / "pyproject.toml").write_text('[project]\nname = "cpu-train"\nversion = "0.1.0"\n'
                                                'requires-python = ">=3.11"\ndependencies = ["torch"]\n\n'
                                                "[tool.uv]\nenvironments = [\"sys_platform == 'linux' and "
                                                "platform_machine == 'x86_64' and python_version == '3.11'\"]\n")
        (project / "envman.yaml").write_text("name: cpu-train\npython: '3.11'\nframework: torch==2.13.0\ncpu: true\n")
        lock = _envman(["lock", "."], project, matrix, tmp_path)
        assert lock.returncode == 0, lock.stderr
        wrote = _envman(["uv", "write", ".", "--yes"], project, matrix, tmp_path)
        assert wrote.returncode == 0, wrote.stderr
        uv = _uv_lock(project, tmp_path)
    version, url, sha = _pylock_file(project, "torch")
    assert version == "2.13.0+cpu" and sha == sha256_file(REAL_CPU_WHEEL)
    (pkg,) = _locked(uv, "torch")
    (wheel,) = pkg["wheels"]
    assert (pkg["version"], wheel["url"], wheel["hash"]) == (version, url, f"sha256:{sha}")

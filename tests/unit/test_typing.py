"""mypy holds the line: default mode on the whole package, strict on the pure core and the portable island
(pyproject.toml's [tool.mypy]). .ci/run installs the test extra, so CI runs this."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_is_clean(tmp_path: Path) -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (pip install -e '.[test]' brings it)")
    # the project's own configuration only (no user-level config), and a cache outside the checkout
    ran = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(tmp_path / "mypy-cache"), "envman"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr

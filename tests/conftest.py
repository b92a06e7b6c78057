from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_MATRIX = Path(__file__).resolve().parent / "fixtures" / "matrix"
SHIPPED_MATRIX = ROOT / "matrices"

# Every test reads the frozen fixture matrix (tests/fixtures/matrix/README.md), never the shipped data:
# a data change moves tests/data/ only. Set here, before any test imports envman, and for subprocesses.
os.environ["ENVMAN_MATRIX_DIR"] = str(FIXTURE_MATRIX)


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", help="rewrite tests/golden/* from the current output")


@pytest.fixture
def update_golden(request) -> bool:
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture(scope="session")
def matrix():
    """The frozen fixture matrix, loaded once."""
    from envman.matrix.load import load_matrix

    return load_matrix(FIXTURE_MATRIX)


@pytest.fixture
def matrix_copy(tmp_path) -> Path:
    """A writable copy of the fixture matrix, for loader tests that break it on purpose."""
    d = tmp_path / "matrices"
    shutil.copytree(FIXTURE_MATRIX, d)
    return d

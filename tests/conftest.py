from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_MATRIX = Path(__file__).resolve().parent / "fixtures" / "matrix"


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", help="rewrite tests/golden/* from the current output")


@pytest.fixture
def update_golden(request) -> bool:
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture(scope="session")
def matrix():
    """The shipped matrices, loaded once."""
    from envman.matrix.load import load_matrix

    return load_matrix()


@pytest.fixture
def matrix_copy(tmp_path) -> Path:
    """A writable copy of the small fixture matrix, for loader tests that break it on purpose."""
    d = tmp_path / "matrices"
    shutil.copytree(FIXTURE_MATRIX, d)
    return d

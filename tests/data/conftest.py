"""tests/data/ runs on the shipped matrices/, the one suite that does (tests/fixtures/matrix/README.md).

A change to matrices/ that changes what users get shows up here, and only here.
"""

from __future__ import annotations

import pytest

from envman.resources import shipped_matrix_dir


@pytest.fixture(scope="session")
def matrix():
    """The shipped matrices, loaded once (overrides the fixture matrix of tests/conftest.py)."""
    from envman.matrix.load import load_matrix

    return load_matrix(shipped_matrix_dir())


@pytest.fixture(autouse=True)
def _shipped_matrix_everywhere(monkeypatch):
    """What envman reads by default here (load_matrix(), generate, the CLI) is the shipped data too."""
    monkeypatch.setenv("ENVMAN_MATRIX_DIR", str(shipped_matrix_dir()))

from __future__ import annotations

import functools
import os
import shutil
import signal
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_MATRIX = Path(__file__).resolve().parent / "fixtures" / "matrix"

# fixtures/ holds real repositories' files (the corpus keeps their conftest.py and test_*.py names, empty):
# data for the tests, never tests to collect
collect_ignore = ["fixtures"]

# Every test reads the frozen fixture matrix (tests/fixtures/matrix/README.md), never the shipped data:
# a data change moves tests/data/ only. Set here, before any test imports envman, and for subprocesses.
os.environ["ENVMAN_MATRIX_DIR"] = str(FIXTURE_MATRIX)


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", help="rewrite tests/golden/* from the current output")


def pytest_runtest_setup(item):
    if item.get_closest_marker("network"):
        why = index_unavailable()
        if why:
            pytest.skip(f"needs a package index: {why}")


@functools.cache
def index_unavailable() -> str | None:
    """Why uv would find no package index, or None when one answers: asked once a session, 5 s at most."""
    if os.environ.get("UV_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return "UV_OFFLINE is set"
    url = next((os.environ[v] for v in ("UV_DEFAULT_INDEX", "UV_INDEX_URL") if os.environ.get(v)),
               "https://pypi.org/simple")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https"):  # a local index: a folder or a file:// URL
        local = Path(urllib.request.url2pathname(parts.path)) if parts.scheme == "file" else Path(url)
        return None if local.exists() else f"the index {url} does not exist"
    # without the credentials an index URL may carry: a 401 is an answer too, and they stay out of the report
    shown = f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path}"
    try:
        urllib.request.urlopen(urllib.request.Request(shown.rstrip("/") + "/", method="HEAD"), timeout=5).close()
    except urllib.error.HTTPError:
        return None  # it answered; uv will say what it thinks of the answer
    except (OSError, ValueError) as err:
        return f"no index answers at {shown} ({getattr(err, 'reason', err)})"
    return None


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


@pytest.fixture
def watchdog():
    """Fails the test after 20 s instead of letting a blocked read (a FIFO opened for reading) hang the suite."""
    def fire(signum, frame):
        raise AssertionError("envman blocked: a read that never returned (a FIFO opened for reading?)")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)

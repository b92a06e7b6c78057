"""A FIFO where a project's .py file stands is skipped, never read until it blocks (harden pass, 2026-12-07:
`envman init` with a FIFO named ``x.py`` hung in the code-imports scan; the entry-point walk had the same read)."""

from __future__ import annotations

import os
import signal

import pytest

from envman.lock.toolchain import runtime_toolchain
from envman.project.codeimports import project_sources


@pytest.fixture
def fifo_project(tmp_path):
    (tmp_path / "requirements.txt").write_text("numpy\n")
    (tmp_path / "main.py").write_text("import helpers\nimport subprocess\nsubprocess.run(['make'])\n")
    os.mkfifo(tmp_path / "helpers.py")
    os.mkfifo(tmp_path / "train.py")
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("blocked on a FIFO"))
    signal.alarm(10)
    yield tmp_path
    signal.alarm(0)


def test_the_code_scan_skips_a_fifo(fifo_project):
    assert [p.name for p, _ in project_sources(fifo_project)] == ["main.py"]


def test_the_entry_point_walk_skips_a_fifo(fifo_project):
    assert runtime_toolchain(fifo_project, ["python", "main.py"]) == (
        ("build-essential",), ["the code compiles when it runs (main.py:3 runs make): the image keeps "
                               "build-essential (gcc, g++, make)"])

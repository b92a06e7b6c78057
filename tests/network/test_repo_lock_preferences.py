"""uv against PyPI (marked `network`): CoordFill's pdm.lock holds kornia 0.7.1 beside torch 2.1.2; its pyproject
asks kornia>=0.7.1, whose newest release (0.8.3, 2026-12-02) fails to import with torch 2.1.2. A first lock
prefers the repository lock's pins; a re-lock of unchanged inputs is current."""

from __future__ import annotations

import pytest

from envman.app.init import InitOptions, init_project
from envman.cli.main import main
from tests import corpus

pytestmark = pytest.mark.network


def test_a_first_lock_keeps_the_repository_locks_pins_that_fit(tmp_path):
    d = tmp_path / "p"
    corpus.copy_repo("00sapo__CoordFill", d)
    init_project(d, InitOptions(targets=("h100",), python="3.11"))
    req = (d / "requirements.lock.txt").read_text()
    assert "kornia==0.7.1 \\" in req and "torch==2.1.2 \\" in req
    assert main(["lock", str(d), "--check"]) == 0

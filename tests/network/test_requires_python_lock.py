"""uv against PyPI (marked `network`): a package whose newest release caps Requires-Python below the target
(backports-strenum 1.3.1: >=3.8.6,<3.11, read on PyPI 2026-12-02) is not locked for Python 3.11, where uv alone
would lock it and pip would then refuse it at fetch and build (keras-hub's image, issue 20)."""

from __future__ import annotations

import pytest

from envman.app.init import InitOptions, init_project

pytestmark = pytest.mark.network


def test_a_release_whose_requires_python_excludes_the_target_is_not_locked(tmp_path):
    d = tmp_path / "p"
    d.mkdir()
    (d / "requirements.txt").write_text("backports-strenum\n")
    out = init_project(d, InitOptions(targets=("h100",), python="3.11"))
    req = (d / "requirements.lock.txt").read_text()
    assert "backports-strenum==1.3.1" not in req and "backports-strenum==1.2.8 \\" in req
    assert any(n.startswith("backports-strenum 1.3.1 requires Python >=3.8.6,<3.11, which excludes 3.11") for n in out.notes)

"""uv against PyPI (marked `network`): keras-hub's torch requirements name tensorflow-cpu and
tensorflow-text>=2.20.1,<2.21.0, whose 2.20.1 requires tensorflow>=2.20.0,<2.21 (METADATA read 2026-12-02). uv
alone locks tensorflow-cpu 2.21.0 beside tensorflow 2.20.0, two distributions of the module tensorflow, and the
image crashed importing them (issue 20). envman keeps the one the project names, held to what tensorflow-text
asked of tensorflow."""

from __future__ import annotations

import pytest

from envman.app.init import InitOptions, init_project

pytestmark = pytest.mark.network


def test_the_named_distribution_of_a_module_is_the_only_one_locked(tmp_path):
    d = tmp_path / "p"
    d.mkdir()
    (d / "requirements.txt").write_text("torch\ntensorflow-cpu\ntensorflow-text>=2.20.1,<2.21.0\n")
    out = init_project(d, InitOptions(targets=("h100",), python="3.11", framework="torch"))
    req = (d / "requirements.lock.txt").read_text()
    assert "\ntensorflow==" not in req and "tensorflow-cpu==2.20." in req and "tensorflow-text==2.20.1 \\" in req
    assert any(n.startswith("tensorflow 2.20.0 (required by tensorflow-text) installs the module 'tensorflow'")
               for n in out.notes)

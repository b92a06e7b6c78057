"""`envman matrix refresh torch` on the REAL torch 2.14.1 wheel that pip finds on these machines."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envman.matrix.load import _load_cached, default_matrix_dir, load_matrix
from envman.matrix.refresh import fetch_torch_wheel, plan_torch_refresh, read_torch_wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """What `envman matrix refresh` does without --wheel: let pip find the Linux x86_64 wheel."""
    try:
        return fetch_torch_wheel("2.14.1", dest=tmp_path_factory.mktemp("wheel"))
    except Exception as exc:  # no local index and no network: say so
        pytest.skip(f"torch 2.14.1 wheel not available to pip here: {exc}")


def test_reads_metadata_and_version_py_without_importing(wheel):
    facts = read_torch_wheel(wheel)
    assert facts.version == "2.14.1" and facts.cuda == "13.0" and facts.variant == "cu130"
    assert facts.cudnn == "9.24.0.43" and facts.nccl == "2.30.7"
    assert facts.cuda_runtime == "13.0.3"  # Requires-Dist: cuda-toolkit[...]==13.0.3
    assert "torch" not in sys.modules


def test_matches_the_shipped_matrix(wheel, matrix):
    plan = plan_torch_refresh(matrix, read_torch_wheel(wheel), (default_matrix_dir() / "torch.yaml").read_text())
    assert plan.mismatches == [] and plan.new_text is None
    assert "= torch 2.14.1 cu130 matches the matrix" in plan.report


def test_adds_a_missing_patch_and_the_result_validates(wheel, tmp_path):
    d = tmp_path / "matrices"
    shutil.copytree(default_matrix_dir(), d)
    text = (d / "torch.yaml").read_text()
    # drop the 2.14.1 patch entry (a block item) to play a matrix from before that release
    text = re.sub(r'\n      - version: "2\.14\.1"\n(?:        .*\n)+', "\n", text, count=1)
    (d / "torch.yaml").write_text(text)
    _load_cached.cache_clear()
    m = load_matrix(d)
    assert "2.14.1" not in {str(r.version) for r in m.frameworks["torch"]}
    plan = plan_torch_refresh(m, read_torch_wheel(wheel), text)
    assert plan.new_text is not None and "+ torch 2.14.1: new patch of line 2.14" in plan.report
    (d / "torch.yaml").write_text(plan.new_text)
    _load_cached.cache_clear()
    rel = next(r for r in load_matrix(d).frameworks["torch"] if str(r.version) == "2.14.1")
    assert rel.prov.uncertain and rel.prov.source.startswith("measured: envman matrix refresh")
    assert rel.variant("cu130").cudnn == "9.24.0.43"


def test_cli_dry_run_prints_and_does_not_write(wheel):
    before = (default_matrix_dir() / "torch.yaml").read_bytes()
    out = subprocess.run([sys.executable, "-m", "envman.cli.main", "matrix", "refresh-wheel", "torch", "--version", "2.14.1",
                          "--wheel", str(wheel)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "torch 2.14.1, torch/version.py cuda='13.0' → variant cu130" in out.stdout
    assert (default_matrix_dir() / "torch.yaml").read_bytes() == before

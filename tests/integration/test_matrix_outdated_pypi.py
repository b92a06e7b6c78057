"""`python -m tools.matrix outdated` (the repository's workshop) against PyPI itself (skips when no index answers): it runs, and its report is
well formed whichever way today's answer goes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.network


def test_outdated_against_pypi_reports_every_project():
    env = dict(os.environ)
    env.pop("ENVMAN_MATRIX_DIR", None)  # the shipped matrix: the question is whether IT is current
    out = subprocess.run([sys.executable, "-m", "tools.matrix", "outdated"],
                         capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert out.returncode in (0, 1), out.stderr
    notes = [ln for ln in out.stdout.splitlines() if ln.startswith("  ! ")]  # a newer jax whose CUDA extra names no wheel
    assert all(re.match(r"^  ! jax [\w.]+'s \[cuda\d+\] extra asks for jax-cuda\d+-plugin\S+, which the index does not have$", n)
               for n in notes), notes
    lines = [ln for ln in out.stdout.splitlines() if not ln.startswith("  ! ")]
    names = ["torch", "torchvision", "torchaudio", "tensorflow", "jax", "nvidia-gpus", "torch-builds", "cuda-drivers", "nvidia-pypi"]
    assert [ln.split(":", 1)[0] for ln in lines] == names
    project = re.compile(r"^[a-z]+: (up to date \([\w.]+\)|[\w.]+(, [\w.]+)* on the index; the matrix knows [\w.]+)$")
    source = re.compile(r"^[a-z-]+: (up to date|newer|unreachable) \(.+\)$")  # unreachable: GitHub, where only PyPI is
    assert all(project.match(ln) for ln in lines[:5]) and all(source.match(ln) for ln in lines[5:]), lines
    assert (out.returncode == 1) == (any("on the index" in ln for ln in lines[:5]) or
                                     any(not ln.split(": ", 1)[1].startswith("up to date") for ln in lines[5:]))
    js = subprocess.run([sys.executable, "-m", "tools.matrix", "outdated", "--json"],
                        capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert js.returncode == out.returncode
    rows = json.loads(js.stdout)
    assert [r.get("project") or r.get("source") for r in rows] == names

"""The workshop (tools/matrix/) is the repository's, not the user's: `envman --help` no longer offers what only
maintainers run, and a `--write` goes into the repository's matrices/, never into an installed envman's data."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT


def test_the_workshop_writes_into_the_repositorys_matrices(monkeypatch, tmp_path):
    from envman.errors import UsageError
    from tools.matrix.app import matrix_dir

    monkeypatch.delenv("ENVMAN_MATRIX_DIR")
    assert matrix_dir() == ROOT / "matrices"
    monkeypatch.setenv("ENVMAN_MATRIX_DIR", str(tmp_path))  # a site's own matrix
    assert matrix_dir() == tmp_path
    monkeypatch.setenv("ENVMAN_MATRIX_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(UsageError) as exc:
        matrix_dir()
    assert exc.value.message == f"ENVMAN_MATRIX_DIR={tmp_path / 'nowhere'} is not a folder (nothing is there)"


def test_envman_offers_users_only_what_users_run(capsys):
    from envman.cli.main import main

    assert main(["matrix", "--help"]) == 0
    out = capsys.readouterr().out
    assert "show" in out and "check" in out and not any(c in out for c in ("sync", "outdated", "refresh"))
    assert main(["matrix", "sync"]) == 2
    assert "No such command 'sync'" in capsys.readouterr().err
    assert main(["variants", "check"]) == 2


def test_the_workshop_runs_as_a_module_at_the_root():
    out = subprocess.run([sys.executable, "-m", "tools.matrix", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and [c for c in ("sync", "outdated", "check", "variants") if c not in out.stdout] == []
    out = subprocess.run([sys.executable, "-m", "tools.matrix", "sync", "torch", "jax"], capture_output=True, text=True,
                         cwd=ROOT)
    assert (out.returncode, out.stderr) == (1, "error: sync one PyPI project at a time\n"
                                                "hint: e.g. python -m tools.matrix sync torch\n")

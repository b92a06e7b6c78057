"""`init --force` re-initialises envman.yaml with new options (issue 36: it could not), keeping what only
envman.yaml says; without --force the refusal names it."""

from __future__ import annotations

import pytest
import yaml

import envman.lock.registry
from envman.cli.main import main


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.setattr(envman.lock.registry, "resolve_digest", lambda ref, timeout=3.0: None)
    (tmp_path / "requirements.txt").write_text("torch>=2.4\nnumpy\n")
    return tmp_path


def test_init_force_reinitialises_with_new_targets_and_keeps_the_users_keys(repo, capsys):
    assert main(["init", str(repo), "--target", "h100", "--no-lock"]) == 0
    spec = repo / "envman.yaml"
    assert yaml.safe_load(spec.read_text())["targets"] == ["h100"]
    spec.write_text(spec.read_text() + "command: [python, train.py]\nci: {envman: vendor/envman-0.2.0-py3-none-any.whl}\n")
    capsys.readouterr()

    assert main(["init", str(repo), "--target", "v100", "--no-lock"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "error: envman.yaml exists; --target would be ignored",
        "hint: edit envman.yaml instead (it is the single source of truth), or re-run with --force to re-initialise "
        "it from the repository with these options"]

    assert main(["init", str(repo), "--target", "v100", "--force", "--no-lock"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "  - envman.yaml: re-initialised from the repository with --target (kept: command, ci)" in out
    data = yaml.safe_load(spec.read_text())
    assert data["targets"] == ["v100"] and data["command"] == ["python", "train.py"]
    assert data["ci"] == {"envman": "vendor/envman-0.2.0-py3-none-any.whl"}
    assert main(["lock", str(repo), "--check"]) == 0


def test_init_force_does_not_rewrite_pyproject(repo, capsys):
    (repo / "pyproject.toml").write_text("[tool.envman]\nname = 'demo'\ncpu = true\nframework = 'none'\n")
    assert main(["init", str(repo), "--target", "v100", "--force", "--no-lock"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "error: pyproject.toml [tool.envman]: init --force re-initialises envman.yaml only",
        "hint: edit pyproject.toml [tool.envman] (or move it to envman.yaml), then run `envman lock`"]

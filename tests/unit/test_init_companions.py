"""init and lock print only the companions the lock holds (issue 36: `companions torchvision 0.29.1` was printed
for projects whose lock has no torchvision)."""

from __future__ import annotations

import json

import pytest

import envman.lock.registry
from envman.cli.main import main


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.setattr(envman.lock.registry, "resolve_digest", lambda ref, timeout=3.0: None)
    return tmp_path


def stack_lines(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if ln.startswith(("framework ", "companions "))]


def test_no_companion_row_for_a_project_without_one(repo, capsys):
    (repo / "requirements.txt").write_text("torch>=2.4\n")
    assert main(["init", str(repo), "--target", "h100", "--no-lock"]) == 0
    assert stack_lines(capsys.readouterr().out) == [
        "framework   torch 2.14.1                            cu130 (plain PyPI wheel)"]
    assert main(["init", str(repo), "--no-lock", "--json"]) == 0  # envman.yaml exists: the same files again
    assert json.loads(capsys.readouterr().out)["stack"]["companions"] == {}


def test_a_companion_the_project_names_is_shown(repo, capsys):
    (repo / "requirements.txt").write_text("torch>=2.4\ntorchvision\n")
    assert main(["init", str(repo), "--target", "h100", "--no-lock"]) == 0
    assert stack_lines(capsys.readouterr().out) == [
        "framework   torch 2.14.1                            cu130 (plain PyPI wheel)",
        "companions  torchvision 0.29.1"]

"""`envman uv write` does not make `envman lock --check` stale (issue 36): its own edit of pyproject.toml (a lock
input) stands for the file the lock was made from; any other edit still stales the lock."""

from __future__ import annotations

import json

import pytest

import envman.lock.registry
from envman.app.uvproject import PYPROJECT, UvPlan, write_uv_plan
from envman.cli.main import main

PYPROJECT_TEXT = "[project]\nname = 'demo'\nversion = '1'\nrequires-python = '>=3.9'\ndependencies = []\n"
# what uv write leaves (its TOML logic is project/uvwrite.py's; here only its effect on the lock is under test)
WRITTEN = PYPROJECT_TEXT.replace(">=3.9", ">=3.10") + "\n[tool.uv]\nconstraint-dependencies = ['torch==2.14.1']\n"


@pytest.fixture
def locked(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(envman.lock.registry, "resolve_digest", lambda ref, timeout=3.0: None)
    (tmp_path / PYPROJECT).write_text(PYPROJECT_TEXT)
    (tmp_path / "envman.yaml").write_text("name: demo\ncpu: true\npython: '3.11'\nframework: none\n"
                                          "sources: [pyproject.toml]\ninstall_project: false\n")
    assert main(["lock", str(tmp_path)]) == 0
    capsys.readouterr()
    return tmp_path


def uv_write(root, after: str) -> None:
    before = (root / PYPROJECT).read_text()
    write_uv_plan(UvPlan(root / PYPROJECT, before, after, ("edit",), "envman.lock"))


def test_uv_writes_own_edit_leaves_the_lock_current(locked, capsys):
    lock_hash = json.loads((locked / "envman.lock").read_text())["lock_hash"]
    uv_write(locked, WRITTEN)
    assert main(["lock", str(locked), "--check"]) == 0
    assert capsys.readouterr().out == "envman.lock is current\n"
    assert main(["lock", str(locked)]) == 0  # and a plain lock keeps it: same hash, nothing written
    assert "up to date: nothing changed" in capsys.readouterr().out
    assert json.loads((locked / "envman.lock").read_text())["lock_hash"] == lock_hash


def test_an_edit_after_uv_write_is_still_a_change(locked, capsys):
    uv_write(locked, WRITTEN)
    (locked / PYPROJECT).write_text(WRITTEN.replace("dependencies = []", "dependencies = ['numpy']"))
    assert main(["lock", str(locked), "--check"]) == 1
    assert capsys.readouterr().err.splitlines()[0] == (
        "stale: pyproject.toml changed since the lock (init copied its packages into envman.yaml: "
        "`envman init --force` reads it again)")


def test_a_tampered_record_never_makes_a_change_look_current(locked, capsys):
    uv_write(locked, WRITTEN)
    (locked / ".envman" / "uv-write.json").write_text('{"files": {"pyproject.toml": {"written": "x", "stands_for": 5}}}')
    assert main(["lock", str(locked), "--check"]) == 1

"""Issue #12, second half: lock --check covers every file, --base-image locks stay current, every input is
validated and bounded (markers on framework, nesting, duplicate keys, sizes, FIFOs, facts files), and
`envman fetch` checks the lock before downloading. Every case goes through the real CLI where it can."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import envman.lock.registry
import envman.lock.uv
from envman.app.generate import check_lock
from envman.cli.main import main

HASH = "a" * 64
UV_OUT = f"""# uv pip compile
--index-url https://host.example/simple

numpy==2.1.0 \\
    --hash=sha256:{HASH}
    # via -r requirements.in
"""
PYLOCK = f"""lock-version = "1.0"
created-by = "uv"
requires-python = ">=3.11"

[[packages]]
name = "numpy"
version = "2.1.0"
index = "https://host.example/simple"
wheels = [{{ url = "https://host.example/files/numpy-2.1.0-cp311-cp311-manylinux_2_28_x86_64.whl", hashes = {{ sha256 = "{HASH}" }} }}]
"""
SPEC = "name: demo\ncpu: true\npython: '3.11'\nframework: none\npackages: [numpy]\n"


@pytest.fixture
def fake_uv(monkeypatch):
    def run_uv(cmd):
        out = Path(cmd.cwd) / cmd.args[cmd.args.index("-o") + 1]
        out.write_text(PYLOCK if "--format" in cmd.args else UV_OUT, encoding="utf-8")

    monkeypatch.setattr(envman.lock.uv, "run_uv", run_uv)
    monkeypatch.setattr(envman.lock.registry, "resolve_digest", lambda ref, timeout=3.0: None)


@pytest.fixture
def locked(tmp_path, fake_uv):
    (tmp_path / "envman.yaml").write_text(SPEC)
    assert main(["lock", str(tmp_path)]) == 0
    assert check_lock(tmp_path) == []
    return tmp_path


def one_error(capsys) -> list[str]:
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert "Traceback" not in err and len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), err
    return lines


# --- item 9: lock --check covers every file it read or wrote ------------------------------------------------


@pytest.mark.parametrize("name", ["pylock.toml", ".envman/stack.json", "Dockerfile"])
def test_lock_check_names_a_tampered_generated_file(locked, capsys, name):
    p = locked / name
    p.write_text(p.read_text().replace("2.1.0", "2.1.1").replace("python", "pyth0n", 1) + "\n# edited\n")
    assert check_lock(locked) == [f"{name} differs from the one envman.lock records"]
    assert main(["lock", str(locked), "--check"]) == 1
    assert f"{name} differs from the one envman.lock records" in capsys.readouterr().err


def test_lock_check_records_the_builder_locks(locked):
    lock = json.loads((locked / "envman.lock").read_text())
    assert set(lock["files"]) == {"Dockerfile", ".envman/stack.json", "pylock.toml"}
    (locked / "pylock.toml").unlink()
    assert check_lock(locked) == ["pylock.toml is missing"]


def test_lock_check_a_fresh_lock_is_current_and_idempotent(locked):
    first = (locked / "envman.lock").read_bytes()
    assert main(["lock", str(locked)]) == 0
    assert (locked / "envman.lock").read_bytes() == first
    lock = json.loads(first)
    assert lock["lock_hash"] in (locked / "Dockerfile").read_text()
    assert json.loads((locked / ".envman/stack.json").read_text())["lock_hash"] == lock["lock_hash"]


# --- item 11: a lock made with --base-image is current ------------------------------------------------------


def test_lock_with_base_image_is_current_for_check_and_build(locked, capsys, monkeypatch):
    mirror = "registry.example.com/mirror/python:3.11-slim"
    assert main(["lock", str(locked), "--base-image", mirror]) == 0
    assert f"FROM {mirror}" in (locked / "Dockerfile").read_text()
    assert check_lock(locked) == []
    assert main(["lock", str(locked), "--check"]) == 0
    # a lock without the override is stale again (the base image differs from the spec's)
    assert main(["lock", str(locked)]) == 0
    assert check_lock(locked) == []
    assert "FROM python:" in (locked / "Dockerfile").read_text() or mirror not in (locked / "Dockerfile").read_text()

"""envman.lock: one model, one reader and writer, one digest, and a rule for other lock_versions."""

from __future__ import annotations

import json

import pytest

from envman.errors import UsageError
from envman.lock.lockfile import LOCK_VERSION, Lock, lock_digest, parse_lock, read_lock, render_lock, write_lock

BODY = {"lock_version": LOCK_VERSION, "name": "demo", "profile": None, "inputs_hash": "0" * 64,
        "stack": {"python": "3.11", "cuda": "12.8", "framework": {"name": "torch", "version": "2.7.1", "variant": "cu128"}},
        "base_image": {"ref": "python:3.11-slim-bookworm", "digest": None}, "python_lock": {"platform": "x86_64-manylinux_2_28"}}


def test_create_computes_the_one_digest_and_round_trips(tmp_path):
    lock = Lock.create(BODY)
    assert lock.lock_hash == lock_digest(BODY) and lock.is_intact() and lock.short_hash == lock.lock_hash[:12]
    write_lock(tmp_path / "envman.lock", lock)
    again = read_lock(tmp_path / "envman.lock")
    assert again == lock and render_lock(again) == render_lock(lock)
    assert again.stack_key() == ("torch", "2.7.1", "cu128", "12.8", "3.11", "python:3.11-slim-bookworm", None)
    assert again.python == "3.11" and again.name == "demo"


def test_a_push_and_the_files_record_keep_the_identity_other_changes_do_not():
    """The Dockerfile names the lock's hash, so the digests of the files made from it stay outside it."""
    lock = Lock.create(BODY)
    pushed = lock.with_changes(pushed={"ref": "r/demo:x", "digest": "sha256:" + "1" * 64})
    assert pushed.lock_hash == lock.lock_hash and pushed.is_intact()
    recorded = lock.with_changes(files={"Dockerfile": "2" * 64})
    assert recorded.lock_hash == lock.lock_hash and recorded.is_intact()
    renamed = lock.with_changes(name="other")
    assert renamed.lock_hash != lock.lock_hash and renamed.is_intact()


def test_a_hand_edit_is_noticed():
    data = Lock.create(BODY).to_dict()
    data["stack"] = {**data["stack"], "cuda": "12.4"}
    assert not parse_lock(json.dumps(data)).is_intact()


@pytest.mark.parametrize("version, message, hint", [
    (LOCK_VERSION + 1, f"envman.lock: lock_version {LOCK_VERSION + 1} was written by a newer envman (this one reads {LOCK_VERSION})",
     "upgrade envman (pip install -U envman), or regenerate the lock with this one"),
    (0, "envman.lock: lock_version 0 is not 1", "regenerate it with `envman lock`"),
    ("1", "envman.lock: lock_version '1' is not 1", "regenerate it with `envman lock`"),
])
def test_other_lock_versions(version, message, hint):
    with pytest.raises(UsageError) as e:
        parse_lock(json.dumps({**BODY, "lock_version": version}))
    assert (e.value.message, e.value.hint) == (message, hint)


def test_missing_and_garbled_locks_name_the_file(tmp_path):
    with pytest.raises(UsageError, match=r"^envman.lock: not found$"):
        read_lock(tmp_path / "envman.lock")
    (tmp_path / "envman.lock").write_text("[1, 2]")
    with pytest.raises(UsageError, match=r"^envman.lock: not a JSON object$"):
        read_lock(tmp_path / "envman.lock")


def test_nothing_else_parses_envman_lock():
    """The host reads envman.lock only through envman.lock.lockfile (the portable island keeps its own
    stdlib reader for the image, envman/portable/facts/project.py)."""
    from pathlib import Path

    pkg = Path(__file__).resolve().parents[2] / "envman"
    for p in pkg.rglob("*.py"):
        rel = p.relative_to(pkg).as_posix()
        if rel in ("lock/lockfile.py", "portable/facts/project.py") or "__pycache__" in rel:
            continue
        src = p.read_text(encoding="utf-8")
        assert not ("json.loads" in src and "names.lock" in src), rel
        assert '"lock_version"' not in src or rel == "lock/uv.py", rel

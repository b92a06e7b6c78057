"""The base image's digest on a lock (app/basedigest.py): a re-lock keeps the digest the last lock pinned, as
it keeps package pins; --upgrade asks the registry again; a registry that could not be reached is not asked
again for ten minutes, and the note says so."""

from __future__ import annotations

import json
import os
import time

import pytest

import envman.lock.registry as registry
from envman.app.basedigest import RETRY_AFTER, start_digest
from envman.app.lock import lock_project
from envman.lock.lockfile import try_read_lock
from tests.fakes import install_fake_uv, numpy_pylock

DIGEST = "sha256:" + "ab" * 32
BASE = "python:3.11-slim-bookworm"


@pytest.fixture
def asked(monkeypatch, tmp_path):
    """The refs the registry is asked for; it answers DIGEST."""
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path / "cache"))
    refs: list[str] = []
    monkeypatch.setattr(registry, "resolve_digest", lambda ref, timeout=3.0: refs.append(ref) or DIGEST)
    return refs


def _project(tmp_path, monkeypatch):
    install_fake_uv(monkeypatch, tmp_path, numpy_pylock())
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path / "cache"))
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "envman.yaml").write_text(f"name: d\ncpu: true\npython: '3.11'\npackages: [numpy]\nbase_image: {BASE}\n")
    return proj


def test_a_relock_keeps_the_pinned_digest_and_upgrade_asks_again(tmp_path, monkeypatch, asked):
    proj = _project(tmp_path, monkeypatch)
    first = lock_project(proj)
    assert asked == [BASE] and f"base image {BASE} pinned to {DIGEST} (its registry answered)" in first.notes
    again = lock_project(proj)
    assert asked == [BASE]  # not asked again
    assert f"base image {BASE} pinned to {DIGEST} (kept from the last lock; `envman lock --upgrade` asks its " \
           "registry again)" in again.notes
    assert json.loads((proj / "envman.lock").read_text())["base_image"]["digest"] == DIGEST
    lock_project(proj, upgrade=True)
    assert asked == [BASE, BASE]


def test_a_hand_edited_locks_digest_is_not_kept(tmp_path, monkeypatch, asked):
    proj = _project(tmp_path, monkeypatch)
    lock_project(proj)
    lock = proj / "envman.lock"
    lock.write_text(lock.read_text().replace(DIGEST, "sha256:" + "cd" * 32))
    start_digest(try_read_lock(lock), BASE)()
    assert asked == [BASE, BASE]


def test_another_base_image_is_asked_for(tmp_path, monkeypatch, asked):
    proj = _project(tmp_path, monkeypatch)
    lock_project(proj)
    digest, note = start_digest(try_read_lock(proj / "envman.lock"), "python:3.12-slim")()
    assert asked == [BASE, "python:3.12-slim"] and digest == DIGEST


def test_an_unreachable_registry_is_not_asked_again_for_ten_minutes(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path / "cache"))
    ref = "registry.invalid/x:1"  # .invalid never resolves (RFC 2606): no answer at all
    assert registry.unreachable_since(ref, RETRY_AFTER) is None
    assert registry.resolve_digest(ref, timeout=2) is None
    assert registry.unreachable_since(ref, RETRY_AFTER) is not None
    digest, note = start_digest(None, ref)()
    assert digest is None and note.startswith(f"base image {ref}: no registry answered, the tag is kept and its "
                                              "digest is unpinned (it did not answer ")
    assert note.endswith(" s ago; `envman lock --upgrade` asks it now)")
    called = []
    monkeypatch.setattr(registry, "resolve_digest", lambda r, timeout=3.0: called.append(r))
    start_digest(None, ref, upgrade=True)()
    assert called == [ref]  # --upgrade asks anyway
    marker = registry._marker("registry.invalid")
    old = time.time() - RETRY_AFTER - 1
    os.utime(marker, (old, old))
    assert registry.unreachable_since(ref, RETRY_AFTER) is None  # ten minutes on: asked again


def test_an_answering_registry_clears_the_mark(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path / "cache"))
    registry._note_unreachable("registry.example", OSError("down"))
    assert registry.unreachable_since("registry.example/x:1", RETRY_AFTER) is not None
    registry._reached("registry.example", DIGEST)
    assert registry.unreachable_since("registry.example/x:1", RETRY_AFTER) is None

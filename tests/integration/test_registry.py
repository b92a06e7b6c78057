"""Base-image digests through the registry API, against a real registry on loopback."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from envman.lock.registry import resolve_digest

pytestmark = pytest.mark.integration


@pytest.fixture
def pushed_base(engine, base_image, registry, token):
    ref = f"{registry}/envman-base-{token}:bookworm"
    engine.tag(base_image, ref)
    digest = engine.push(ref)
    yield ref, digest
    engine.remove_image(ref, force=True)


def test_resolve_digest_matches_what_the_push_reported(pushed_base, registry):
    ref, digest = pushed_base
    assert resolve_digest(ref) == digest
    assert resolve_digest(f"{registry}/no-such-image:1") is None
    assert resolve_digest("registry.invalid/x:1", timeout=2) is None  # no network: an answer, not a crash


def test_lock_pins_the_base_image_and_the_build_uses_the_pin(pushed_base, tmp_path, engine):
    ref, digest = pushed_base
    d = tmp_path / "pinned"
    d.mkdir()
    (d / "envman.yaml").write_text(f"name: pinned\ncpu: true\npython: '3.11'\nbase_image: {ref}\n")
    out = subprocess.run([sys.executable, "-m", "envman.cli.main", "lock", str(d)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lock = json.loads((d / "envman.lock").read_text())
    assert lock["base_image"] == {"ref": ref, "kind": "custom", "digest": digest, "note": None}
    assert f"FROM {ref}@{digest}\n" in (d / "Dockerfile").read_text()
    build = subprocess.run([sys.executable, "-m", "envman.cli.main", "build", str(d), "--no-smoke"],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    engine.remove_image(f"pinned:{lock['lock_hash'][:12]}", force=True)


def test_offline_lock_keeps_the_tag_and_says_so(tmp_path):
    d = tmp_path / "unpinned"
    d.mkdir()
    (d / "envman.yaml").write_text("name: unpinned\ncpu: true\npython: '3.11'\nbase_image: registry.invalid/base:1\n")
    out = subprocess.run([sys.executable, "-m", "envman.cli.main", "lock", str(d)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lock = json.loads((d / "envman.lock").read_text())
    assert lock["base_image"]["digest"] is None
    assert lock["base_image"]["note"] == "digest unpinned: no registry answered when locking"
    assert "no registry answered, the tag is kept and its digest is unpinned" in out.stdout

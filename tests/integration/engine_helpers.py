"""Helpers for the integration tests (tests/integration is a package: import them relatively)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

BASE_IMAGE = os.environ.get("ENVMAN_TEST_BASE", "envman-test-base:bookworm")
ROOT = Path(__file__).resolve().parents[2]


def envman(*args: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    """``python -m envman`` with ``args`` (``cwd``/``env`` passed on); with ``check``, a failure shows its output."""
    out = subprocess.run([sys.executable, "-m", "envman.cli.main", *args], capture_output=True, text=True, **kw)
    if check and out.returncode != 0:
        raise AssertionError(f"envman {' '.join(args)} exited {out.returncode}:\n{out.stdout[-4000:]}\n{out.stderr[-3000:]}")
    return out


def lock_of(project: Path) -> dict:
    return json.loads((project / "envman.lock").read_text())


def good_tag(project: Path) -> str:
    """The tag a build of ``project``'s lock gets when its smoke test passes."""
    lock = lock_of(project)
    return f"{lock['name']}:{lock['lock_hash'][:12]}"


def image_members_containing(engine, ref: str, needle: bytes, workdir: Path) -> list[str]:
    """Export ``ref`` (docker save) and return every member — each layer tar and the image config with its
    history — whose bytes contain ``needle``. Layers in a save are uncompressed tars, so file contents are
    there verbatim."""
    tar_path = workdir / "image.tar"
    with engine.export_image(ref) as stream, open(tar_path, "wb") as fh:
        shutil.copyfileobj(stream, fh)
    hits, layers = [], 0
    try:
        with tarfile.open(tar_path) as tar:
            for m in tar:
                if not m.isfile():
                    continue
                data = tar.extractfile(m).read()
                layers += m.name.endswith("layer.tar") or m.name.startswith("blobs/")
                if needle in data:
                    hits.append(m.name)
    finally:
        tar_path.unlink(missing_ok=True)
    assert layers, f"no layers found in the export of {ref}"
    return hits


def wait_for(predicate, timeout: float = 30, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()

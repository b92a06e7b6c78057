"""Helpers for the integration tests (tests/integration is a package: import them relatively)."""

from __future__ import annotations

import os
import tarfile
import time
from pathlib import Path

BASE_IMAGE = os.environ.get("ENVMAN_TEST_BASE", "envman-test-base:bookworm")
ROOT = Path(__file__).resolve().parents[2]


def image_members_containing(engine, ref: str, needle: bytes, workdir: Path) -> list[str]:
    """Export ``ref`` (docker save) and return every member — each layer tar and the image config with its
    history — whose bytes contain ``needle``. Layers in a save are uncompressed tars, so file contents are
    there verbatim."""
    tar_path = engine.save_image(ref, workdir / "image.tar")
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

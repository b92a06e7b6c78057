"""Reproducible as bits: ``envman build --verify-repro`` and ``envman verify IMAGE`` (docs/reproducible.md)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from envman.engine.archive import ImageArchive, differences, read_image_archive
from envman.engine.buildkit import BuildResult
from envman.engine.errors import EngineError
from envman.engine.protocol import ContainerEngine
from envman.errors import LockError, ReproError, UsageError
from envman.inputs import read_regular
from envman.lock.lockfile import Lock, read_lock, write_lock


def require_date(lock: Lock, lock_name: str) -> int:
    sde = lock.source_date_epoch
    if sde is None:
        raise LockError(f"{lock_name} records no source_date_epoch: it was made by an envman without reproducible builds",
                        hint="run `envman lock` with this envman, then build")
    return sde


def require_clamping(engine: ContainerEngine) -> None:
    support = engine.repro_support()
    if not support.clamps:
        raise EngineError(f"--verify-repro: {engine.name} cannot build reproducibly here: {support.how}",
                          hint="build with podman or buildah (`--engine podman`; .ci/podman-up.sh installs them), or "
                               "with buildx on BuildKit 0.13+")


def _read(engine: ContainerEngine, ref: str, skip: set[str]) -> ImageArchive:
    with engine.export_image(ref) as stream:
        return read_image_archive(stream, wanted=lambda diff_id: diff_id not in skip)


def verify_build(engine: ContainerEngine, build: Callable[[str], BuildResult], *, tag: str, base: str,
                 echo: Callable[[str], None], label: str = "", first_tag: str | None = None,
                 keep_as: str | None = None) -> BuildResult:
    """Two builds from scratch compared: the second, tagged as asked; on a difference it is kept as ``keep_as``
    (ReproError)."""
    require_clamping(engine)
    first_tag = first_tag or f"{tag}-repro-1"
    base_layers = set(engine.diff_ids(base) or ())
    echo(f"{label}reproducibility: first of two builds from scratch ({engine.repro_support().how})")
    first = build(first_tag)
    try:
        echo(f"{label}first build: {first.image_id} in {first.seconds:.1f} s; reading its layers, then removing it "
             "(one build on disk at a time)")
        started = time.monotonic()
        first_files = _read(engine, first_tag, base_layers)
        echo(f"{label}read {sum(len(f) for f in first_files.layers.values())} files of its layers in "
             f"{time.monotonic() - started:.1f} s")
    finally:
        engine.remove_image(first_tag, force=True)
    echo(f"{label}reproducibility: second build from scratch")
    second = build(tag)
    if second.image_id == first.image_id:
        echo(f"{label}reproducible: both builds gave {second.image_id} "
             f"({first.seconds:.1f} s and {second.seconds:.1f} s)")
        return second
    echo(f"{label}the two builds differ ({first.image_id} vs {second.image_id}): reading the second's layers")
    second_files = _read(engine, tag, base_layers | set(first_files.diff_ids))
    lines = differences(first_files, second_files)
    if keep_as and keep_as != tag:
        engine.tag(second.image_id, keep_as)
        engine.remove_image(tag)
    raise ReproError(f"two builds of this lock from scratch gave two images ({first.image_id} and {second.image_id}); "
                     f"{keep_as or tag} is the second", hint="what differs:\n  " + "\n  ".join(lines or ["(no file differs)"]))


def record_image(lock_path: Path, *, engine: ContainerEngine, image_id: str, dockerfile: Path, root: Path) -> dict:
    """The reproducible image goes into the lock (outside its hash: the lock's identity does not change)."""
    lock = read_lock(lock_path)
    record = {
        "engine": engine.name,
        "engine_version": engine.ping(),
        "image_id": image_id,
        "dockerfile": dockerfile.relative_to(root).as_posix() if dockerfile.is_relative_to(root) else str(dockerfile),
        "dockerfile_sha256": hashlib.sha256(read_regular(dockerfile)).hexdigest(),  # bounded, never a FIFO
        "lock_hash": lock.lock_hash,
    }
    updated = lock.with_reproducible_image(record)
    assert updated.lock_hash == lock.lock_hash
    write_lock(lock_path, updated)
    return record


@dataclass(frozen=True)
class Verdict:
    image: str
    image_id: str
    matched: dict | None

    def summary(self) -> str:
        if self.matched:
            m = self.matched
            return (f"{self.image} is exactly this lock: image {self.image_id} is what lock {m['lock_hash'][:12]} "
                    f"builds from {m['dockerfile']} ({m['engine']} {m['engine_version']}, verified by two builds "
                    "from scratch)")
        return f"{self.image} ({self.image_id}) is not an image this lock builds"


def verify_image(lock_path: Path, image: str, engine: ContainerEngine) -> Verdict:
    """Whether ``image`` (on ``engine``) has an image ID the lock recorded as reproducible."""
    lock = read_lock(lock_path)
    records = tuple(lock.reproducible.get("images") or ())
    if not records:
        raise ReproError(f"{lock_path.name} records no reproducible image",
                         hint="build it with `envman build --verify-repro` first (two builds from scratch, compared)")
    image_id = engine.image_id(image)
    if image_id is None:
        raise UsageError(f"no image {image} on {engine.name}", hint=f"pull it first, or pass --engine (found: {engine.name})")
    current = [r for r in records if r.get("lock_hash") == lock.lock_hash]
    matched = next((r for r in current if r.get("image_id") == image_id), None)
    verdict = Verdict(image, image_id, matched)
    if matched is None:
        said = "; ".join(f"{r['image_id']} ({r['engine']} {r['engine_version']}, {r['dockerfile']})" for r in current)
        raise ReproError(f"{verdict.summary()}: the lock's reproducible images are {said or 'none for its hash'}",
                         hint="an image built by another engine, or from another Dockerfile, has another ID; "
                              "rebuild with `envman build --verify-repro` on the engine you use")
    return verdict


def verify_project_image(root: Path, image: str, *, profile: str | None = None,
                         engine_name: str | None = None) -> Verdict:
    """``envman verify IMAGE``: the project's lock (or its profile's) against an image on the chosen engine."""
    from envman.engine.select import choose_engine
    from envman.lock.layout import StackFiles

    return verify_image(root / StackFiles.for_profile(profile).lock, image, choose_engine(engine_name).engine)


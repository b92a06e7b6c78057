"""``envman lock``: ``lock_project`` makes every file a lock needs; ``check_lock`` says why it is stale."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from envman.app.companions import locked_companions
from envman.app.generate import Outcome, generate, read_text_or_none, require_spec
from envman.app.lockinputs import BASE_OVERRIDE, ProjectInputs
from envman.app.stack import body_digest
from envman.files import sha256, write_atomic
from envman.lock.layout import StackFiles
from envman.lock.lockfile import Lock, read_lock
from envman.matrix.load import load_matrix
from envman.project.spec import SPEC_FILE, ProjectSpec, validate_base_image


def lock_project(root: Path, *, force: bool = False, base_image: str | None = None, upgrade: bool = False,
                 timeout: float | None = None, progress=None, pin_apt: bool = False, apt_snapshot: bool = False,
                 engine: str | None = None) -> Outcome:
    """``pin_apt``: pin the apt packages' closure to what apt in the base image installs now (on ``engine``);
    ``apt_snapshot``: install them from the snapshot archive at the lock's date (docs/reproducible.md)."""
    if base_image is not None:
        validate_base_image(base_image)  # the same check as envman.yaml's base_image
    spec = require_spec(root)
    edit: tuple[str | None, str] = (None, "")
    if base_image is not None and base_image != spec.base_image:  # kept in envman.yaml: the next lock keeps it
        from envman.app.specedit import base_image_edit

        edit = base_image_edit(root, spec, base_image)
        if edit[0] is not None:
            spec, base_image = replace(spec, base_image=base_image), None
    pinner = None
    if pin_apt:
        from envman.app.aptpin import apt_pinner

        pinner = apt_pinner(engine)
    out = generate(root, spec, force=force, upgrade=upgrade, timeout=timeout, progress=progress,
                   base_image=base_image, pin_apt=pinner, apt_snapshot=apt_snapshot)
    if edit[0] is not None:
        write_atomic(root / SPEC_FILE, edit[0])
    if edit[1]:
        out.notes.append(edit[1])
    return locked_companions(root, spec, out)


def check_lock(root: Path) -> list[str]:
    """Why the lock is stale (empty when it is current). With profiles, every profile's lock is checked."""
    spec = require_spec(root)
    now = ProjectInputs.read(root, spec, load_matrix()).hashes
    stale: list[str] = []
    for files in [StackFiles.for_profile(p.name) for p in spec.profiles] or [StackFiles()]:
        lock = read_lock(root / files.lock)
        then = lock.inputs
        over = then.get(BASE_OVERRIDE)
        current = {**now, BASE_OVERRIDE: over} if isinstance(over, str) and over else now
        for msg in _changed_inputs(spec, current, then) + _changed_lock_files(root, files, lock):
            if msg not in stale:
                stale.append(msg)
        if not lock.is_intact():
            stale.append(f"{files.lock} was edited by hand")
    return stale


def _changed_inputs(spec: ProjectSpec, now: dict[str, str], then: Mapping[str, Any]) -> list[str]:
    labels = {"spec": spec.source, "matrices": "envman's matrices (compatibility data)"}
    copied = {f"file:{f}" for f in spec.sources}
    out = []
    for k in sorted(set(now) | set(then)):
        if now.get(k) != then.get(k):
            msg = f"{labels.get(k, k.removeprefix('file:'))} changed since the lock"
            if k in copied:
                msg += f" (init copied its packages into {spec.source}: `envman init --force` reads it again)"
            out.append(msg)
    return out


def _changed_lock_files(root: Path, files: StackFiles, lock: Lock) -> list[str]:
    """The Python locks and the files the lock records, against what is on disk."""
    out = []
    pl = lock.python_lock
    recorded = lock.get("files")
    checks = [(str(pl[key]), pl.get(sha_key), True) for key, sha_key in
              (("requirements", "requirements_sha256"), ("framework", "framework_sha256")) if pl.get(key)]
    checks += [(name, digest, False) for name, digest in sorted(recorded.items() if isinstance(recorded, dict) else ())]
    for name, want, body_only in checks:
        text = read_text_or_none(root / name)
        if text is None:
            out.append(f"{name} is missing")
        elif (sha256(text.partition("\n")[2]) if body_only else body_digest(text)) != want:
            out.append(f"{name} differs from the one {files.lock} records")
    return out

"""``envman.lock``: the one model, reader, writer and digest of the whole-stack lock.

Nothing else parses envman.lock. The file is JSON (sorted keys, so the same lock is the same bytes); its
identity, ``lock_hash``, is the sha256 of its canonical JSON without ``lock_hash`` itself, without what a push
records afterwards (``pushed``: pushing never changes which image a lock names), and without the digests of
the files made from it (``files``: the Dockerfile names the lock hash, so the hash is final before they are
rendered; `lock --check` compares ``files`` with the disk), and without ``wheel_variants`` (PEP 825's
properties of the framework wheel, docs/variants.md: derived from the ``stack`` section alone, which the digest
covers, so adding them changed no existing lock's hash and a change to them changes ``stack`` anyway).

Compatibility (``lock_version``): a lock written by an older envman with the same major layout is read;
a lock from an older, incompatible layout, or from a newer envman, is refused with the command that fixes it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from envman import __version__
from envman.errors import LockError
from envman.files import sha256
from envman.lock.layout import LOCK_FILE, StackFiles
from envman.lockedstack import LockedStack

LOCK_VERSION = 1
READABLE_VERSIONS = (1,)  # lock_versions this envman reads unchanged
# outside the identity: what is recorded of a lock after it was made (a push's digest; the reproducible image
# `build --verify-repro` measured and the date it was built with, itself derived from the pylock the hash covers)
OUTSIDE_DIGEST = ("lock_hash", "pushed", "files", "wheel_variants", "reproducible")
REGENERATE = "regenerate it with `envman lock`"


def canonical_json(obj: object) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def lock_digest(data: Mapping[str, Any]) -> str:
    """The lock's identity: everything but the hash itself and what is recorded of it afterwards."""
    return sha256(canonical_json({k: v for k, v in data.items() if k not in OUTSIDE_DIGEST}))


@dataclass(frozen=True)
class Lock:
    """A parsed envman.lock. ``data`` is the whole document (read-only by convention: build a new Lock
    with ``with_changes``); the properties are the typed views the rest of envman uses."""

    data: Mapping[str, Any] = field(repr=False)

    # --- construction -------------------------------------------------------------------------------
    @classmethod
    def create(cls, body: Mapping[str, Any]) -> Lock:
        """A new lock from its body (everything but lock_hash): the hash is computed here, once."""
        data = {k: v for k, v in body.items() if k != "lock_hash"}
        data["lock_hash"] = lock_digest(data)
        return cls(data)

    def with_changes(self, **changes: Any) -> Lock:
        """A copy with keys replaced; the identity is recomputed unless only keys outside it changed."""
        data = {**self.data, **changes}
        if set(changes) - set(OUTSIDE_DIGEST):
            data["lock_hash"] = lock_digest(data)
        return replace(self, data=data)

    # --- identity -----------------------------------------------------------------------------------
    @property
    def lock_hash(self) -> str:
        return str(self.data.get("lock_hash") or "")

    @property
    def short_hash(self) -> str:
        return self.lock_hash[:12]

    def is_intact(self) -> bool:
        """True when lock_hash matches the content: envman wrote it and nobody edited it."""
        return self.lock_hash == lock_digest(self.data)

    # --- typed views --------------------------------------------------------------------------------
    def _section(self, key: str) -> Mapping[str, Any]:
        v = self.data.get(key)
        return v if isinstance(v, dict) else {}

    @property
    def name(self) -> Any:
        return self.data.get("name")

    @property
    def profile(self) -> Any:
        return self.data.get("profile")

    @property
    def inputs_hash(self) -> Any:
        return self.data.get("inputs_hash")

    @property
    def inputs(self) -> Mapping[str, Any]:
        return self._section("inputs")

    @property
    def stack(self) -> Mapping[str, Any]:
        return self._section("stack")

    @property
    def base_image(self) -> Mapping[str, Any]:
        return self._section("base_image")

    @property
    def python_lock(self) -> Mapping[str, Any]:
        return self._section("python_lock")

    @property
    def reproducible(self) -> Mapping[str, Any]:
        """``source_date_epoch`` (the date every build of this lock gives its files and config), where it came
        from, and ``images``: the image IDs two builds from scratch agreed on, per engine and Dockerfile."""
        return self._section("reproducible")

    @property
    def apt_pins(self) -> dict[str, str]:
        pins = self.data.get("apt_pins")
        return {str(k): str(v) for k, v in pins.items()} if isinstance(pins, dict) else {}

    @property
    def apt_snapshot(self) -> str | None:
        v = self.data.get("apt_snapshot")
        return v if isinstance(v, str) and v else None

    @property
    def source_date_epoch(self) -> int | None:
        v = self.reproducible.get("source_date_epoch")
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None

    def with_reproducible_image(self, record: Mapping[str, Any]) -> Lock:
        """A copy that records one reproducible image (replacing the record for the same engine and Dockerfile);
        the lock's identity does not change."""
        key = (record.get("engine"), record.get("dockerfile"))
        kept = [r for r in self.reproducible.get("images") or [] if (r.get("engine"), r.get("dockerfile")) != key]
        images = sorted([*kept, dict(record)], key=lambda r: (str(r.get("engine")), str(r.get("dockerfile"))))
        return self.with_changes(reproducible={**self.reproducible, "images": images})

    @property
    def dockerfile(self) -> Any:
        return self.data.get("dockerfile")

    @property
    def python(self) -> str | None:
        py = self.stack.get("python")
        return str(py) if py else None

    def stack_key(self) -> tuple:
        """What makes two locks the same stack: framework build, CUDA, Python and base image (tag and
        digest). Profiles with equal keys build identical dependency layers (they differ only in labels)."""
        fw = self.stack.get("framework")
        fw = fw if isinstance(fw, dict) else {}
        key = (fw.get("name"), fw.get("version"), fw.get("variant"), self.stack.get("cuda"), self.stack.get("python"),
               self.base_image.get("ref"), self.base_image.get("digest"))
        return tuple(None if v is None else str(v) for v in key)  # a hand-edited list is still a (hashable) key

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)

    # read-only mapping access to the document, for code and tests that address it by key
    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)


def build_lock(stack: LockedStack) -> Lock:
    """A new lock of the locked ``stack``: its body, in one place.

    ``python_lock`` names the Python locks (with the sha256 of their bodies), uv's platform, and the digest of
    the uv request they answer (``request``): a lock whose request is unchanged needs no uv run."""
    from envman.lock.uv import python_platform

    res, files, locked, base = stack.res, stack.files, stack.locked, stack.base
    req_text, fw_text = locked.req, locked.fw
    names = files or StackFiles()
    body: dict[str, Any] = {
        "lock_version": LOCK_VERSION,
        "envman_version": __version__,
        "name": stack.name,
        "profile": stack.profile,
        "inputs_hash": stack.inputs_hash,
        "stack": stack_data(res),
        "base_image": {
            "ref": base.ref,
            "kind": base.kind,
            "digest": base.digest,
            "note": None if base.digest else "digest unpinned: no registry answered when locking",
        },
        "system_packages": sorted(stack.apt),
        "python_lock": {
            "requirements": names.req if req_text is not None else None,
            "framework": names.fw if fw_text is not None else None,
            "pylock": names.pylock if locked.pylock is not None else None,
            "requirements_sha256": sha256(req_text) if req_text is not None else None,
            "framework_sha256": sha256(fw_text) if fw_text is not None else None,
            "platform": python_platform(res),
            "request": locked.request,
        },
    }
    if stack.inputs is not None:
        body["inputs"] = dict(stack.inputs)
    if files is not None:
        body["dockerfile"] = files.dockerfile
    # present only when asked for (`envman lock --pin-apt`, `--apt-snapshot`): a lock without them keeps its hash
    if stack.apt_pins:
        body["apt_pins"] = dict(sorted(stack.apt_pins.items()))
    if stack.apt_snapshot:
        body["apt_snapshot"] = stack.apt_snapshot
    from envman.matrix.variants import lock_section

    if (variants := lock_section(res)) is not None:
        body["wheel_variants"] = variants
    return Lock.create(body)


def stack_data(res: Any) -> dict:
    from envman.resolve.summary import resolution_dict

    d = resolution_dict(res)
    # the platform is python_lock.platform (aarch64-manylinux_2_28 for linux/arm64): said once
    for k in ("notes", "warnings", "driver", "driver_assumed", "driver_mode", "base_image", "base_kind", "platform"):
        d.pop(k, None)
    return d


def render_lock(lock: Lock) -> str:
    return json.dumps(lock.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def parse_lock(text: str, name: str = LOCK_FILE) -> Lock:
    """A Lock from the file's text; anything else is a LockError naming the file and what to do."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LockError(f"{name}: unreadable: {exc}", hint=REGENERATE) from None
    except RecursionError:  # a hand-edited lock nested 100 000 deep: no lock envman writes is
        raise LockError(f"{name}: nested too deeply to be a lock envman writes", hint=REGENERATE) from None
    if not isinstance(data, dict):
        raise LockError(f"{name}: not a JSON object", hint=REGENERATE)
    version = data.get("lock_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > LOCK_VERSION:
        raise LockError(f"{name}: lock_version {version} was written by a newer envman (this one reads {LOCK_VERSION})",
                         hint="upgrade envman (pip install -U envman), or regenerate the lock with this one")
    if not isinstance(version, int) or isinstance(version, bool) or version not in READABLE_VERSIONS:
        raise LockError(f"{name}: lock_version {version!r} is not {LOCK_VERSION}", hint=REGENERATE)
    check_recorded(data, name)
    return Lock(data)


# --- the sections outside the hash: hand-editable, so read as untrusted input ---------------------------------
_HEX64 = frozenset("0123456789abcdef")
_SECTION_HINTS = {
    "pushed": "it is what `envman build --push` recorded: delete the `pushed` section and push again",
    "reproducible": "it is what `envman lock` and `build --verify-repro` recorded: delete the `reproducible` "
                    "section and run `envman lock`",
    "files": f"it is what `envman lock` recorded: {REGENERATE}",
    "wheel_variants": f"it is what `envman lock` recorded: {REGENERATE}",
}
_IMAGE_RECORD = ("engine", "engine_version", "image_id", "dockerfile", "dockerfile_sha256", "lock_hash")


def check_recorded(data: Mapping[str, Any], name: str = LOCK_FILE) -> None:
    """The sections outside the lock's identity (``pushed``, ``reproducible``, ``files``, ``wheel_variants``)
    have the types envman writes: a hand edit there never changes the hash, so it is caught here, by name."""
    problems = _recorded_problems(data)
    if problems:
        (where, what), more = problems[0], len(problems) - 1
        raise LockError(f"{name}: {where}: {what}" + (f" (and {more} more)" if more else ""),
                        hint=_SECTION_HINTS[where.split(".")[0]])


def _one_line(v: Any) -> bool:
    return isinstance(v, str) and v.isprintable() and len(v) <= 4096


def _is_sha256(v: Any, prefix: str = "") -> bool:
    return isinstance(v, str) and v.startswith(prefix) and len(v) == len(prefix) + 64 and \
        set(v[len(prefix):]) <= _HEX64


def _recorded_problems(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    out = [(key, f"expected an object, got {type(data[key]).__name__}")
           for key in ("pushed", "reproducible", "files", "wheel_variants")
           if data.get(key) is not None and not isinstance(data[key], dict)]
    if out:
        return out
    return (_pushed_problems(data.get("pushed") or {}) + _files_problems(data.get("files") or {})
            + _reproducible_problems(data.get("reproducible") or {}))


def _pushed_problems(pushed: Mapping[str, Any]) -> list[tuple[str, str]]:
    out = [(f"pushed.{key}", f"{str(pushed[key])[:80]!r} is not one line of text")
           for key in ("ref", "pinned") if key in pushed and not _one_line(pushed[key])]
    if "digest" in pushed and not _is_sha256(pushed["digest"], "sha256:"):
        out.append(("pushed.digest", f"{str(pushed['digest'])[:80]!r} is not sha256:<64 hex digits>"))
    return out


def _files_problems(files: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [(f"files.{str(path)[:80]}", f"{str(digest)[:80]!r} is not a sha256 (64 hex digits)")
            for path, digest in files.items() if not _one_line(path) or not _is_sha256(digest)]


def _reproducible_problems(rep: Mapping[str, Any]) -> list[tuple[str, str]]:
    out = []
    sde = rep.get("source_date_epoch")
    if sde is not None and (not isinstance(sde, int) or isinstance(sde, bool) or sde < 0):
        out.append(("reproducible.source_date_epoch", f"{str(sde)[:80]!r} is not a whole number of seconds ≥ 0"))
    if "source_date_epoch_from" in rep and not _one_line(rep["source_date_epoch_from"]):
        out.append(("reproducible.source_date_epoch_from", "is not one line of text"))
    images = rep.get("images")
    if images is not None and not isinstance(images, list):
        return out + [("reproducible.images", f"expected a list, got {type(images).__name__}")]
    for i, r in enumerate(images or ()):
        if not isinstance(r, dict):
            out.append((f"reproducible.images[{i}]", f"expected an object, got {type(r).__name__}"))
            continue
        out += [(f"reproducible.images[{i}].{key}",
                 "missing" if key not in r else f"{str(r[key])[:80]!r} is not one line of text")
                for key in _IMAGE_RECORD if not _one_line(r.get(key))]
    return out


def read_lock(path: Path) -> Lock:
    from envman.files import finish_commit
    from envman.inputs import read_regular_text

    finish_commit(Path(path).parent)  # a run killed between its renames: completed before anything is read
    try:
        text = read_regular_text(path)
    except FileNotFoundError:
        raise LockError(f"{Path(path).name}: not found", hint="run `envman lock` (or `envman init`) first") from None
    except UnicodeDecodeError as exc:
        raise LockError(f"{Path(path).name}: unreadable: {exc}", hint=REGENERATE) from None
    except OSError as exc:
        raise LockError(f"{Path(path).name}: unreadable: {exc.strerror or exc}",
                        hint=f"replace it with the file envman writes: remove it and {REGENERATE}") from None
    return parse_lock(text, Path(path).name)


def try_read_lock(path: Path) -> Lock | None:
    """The lock at ``path``, or None when there is none or it cannot be read (for best-effort callers)."""
    try:
        return read_lock(path)
    except LockError:
        return None


def write_lock(path: Path, lock: Lock) -> None:
    from envman.files import write_atomic

    write_atomic(path, render_lock(lock))

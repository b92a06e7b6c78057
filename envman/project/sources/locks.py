"""The repository's own lock files — ``uv.lock``, ``poetry.lock``, ``pdm.lock``, ``Pipfile.lock`` — read as text
(TOML, or JSON for Pipfile.lock), never run.

What envman takes from them: the framework version (and CUDA variant) they locked, as the starting point of the
stack (``uv_lock.lock_constraints``), and their other pins as uv's preferences on a first lock (``preferences``):
uv keeps each pin that fits the image's Python and platform and resolves the rest anew. A repository lock is a
resolution for the author's Python and platforms, so its pins are never constraints; envman's lock is uv's, with
hashes the image checks (a pin the image must hold can go under ``packages:``). Without them a first lock takes
each package's newest release, which can break beside the older framework the repository locked (CoordFill:
kornia 0.8.3 with torch 2.1.2, where its pdm.lock held 0.7.1)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from envman import frameworks
from envman.errors import UsageError
from envman.inputs import read_regular_text

LOCK_FILES = ("uv.lock", "poetry.lock", "pdm.lock", "Pipfile.lock")
# each lock's tool, and the command that regenerates it
_TOOL = {"uv.lock": ("uv", "uv lock"), "poetry.lock": ("Poetry", "poetry lock"), "pdm.lock": ("PDM", "pdm lock"),
         "Pipfile.lock": ("Pipenv", "pipenv lock")}


@dataclass(frozen=True)
class LockedVersions:
    file: str
    framework: dict[str, list[str]]  # the framework's and its companions' distributions → every version locked
    count: int  # packages the lock pins in all

    def note(self, framework: str | None) -> str:
        """What the lock's pins become (one line)."""
        took = f"its {framework} version is the stack's starting point; " if framework and self.framework else ""
        return (f"{self.file}: {self.count} locked packages; {took}the other pins are not copied as pins: envman "
                "locks anew with uv for the image's Python and Linux platform, "
                "hash-checked, and a first lock prefers the pins that fit (name a pin under packages: in envman.yaml "
                "to hold it)")


def _entries(path: Path, name: str) -> list[tuple[str, str]]:
    """(distribution, version) for every package the lock pins."""
    from envman._compat import tomllib

    try:
        # a regular file (a FIFO is never waited on), bounded: a monorepo's lock can run to tens of MB
        text = read_regular_text(path, 64 << 20)
        if name == "Pipfile.lock":
            doc = json.loads(text)
            # "default" only: "develop" holds the dev packages, not the training environment
            return [(dist, e["version"].lstrip("=")) for dist, e in (doc.get("default") or {}).items()
                    if isinstance(e, dict) and isinstance(e.get("version"), str)]
        doc = tomllib.loads(text)
    except (OSError, ValueError, tomllib.TOMLDecodeError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError: ValueError
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise UsageError(f"{name}: not a readable {_TOOL[name][0]} lock ({why})",
                         hint=f"regenerate it with `{_TOOL[name][1]}`, or delete it (envman locks by itself)") from None
    packages = doc.get("package")
    return [(p["name"], p["version"]) for p in packages if isinstance(p, dict) and isinstance(p.get("name"), str)
            and isinstance(p.get("version"), str)] if isinstance(packages, list) else []


def read_locks(root: Path) -> list[LockedVersions]:
    """Every lock file of the repository, with the framework versions it holds."""
    dists = set(frameworks.by_distribution()) | set(frameworks.companions())
    out = []
    for name in LOCK_FILES:
        path = root / name
        if not path.is_file():
            continue
        entries = _entries(path, name)
        fw: dict[str, list[str]] = {}
        for dist, version in entries:
            d = dist.lower().replace("_", "-")
            if d in dists and version not in fw.get(d, []):
                fw.setdefault(d, []).append(version)
        out.append(LockedVersions(name, fw, len({d.lower() for d, _ in entries})))
    return out


_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?")


def preferences(root: Path) -> tuple[tuple[str, str], ...]:
    """(name, version) of every pin of the repository's first lock file (LOCK_FILES' order), valid names and
    versions only: what a first lock asks uv to prefer."""
    for name in LOCK_FILES:
        if (root / name).is_file():
            out: dict[str, str] = {}
            for dist, version in _entries(root / name, name):
                try:
                    Version(version)
                except InvalidVersion:
                    continue
                if _NAME.fullmatch(dist):
                    out.setdefault(dist.lower().replace("_", "-"), version)
            return tuple(sorted(out.items()))
    return ()


def preference_seed(pins: tuple[tuple[str, str], ...]) -> str | None:
    """A pylock.toml of names and versions only: uv reads an existing output file as its preferences."""
    if not pins:
        return None
    body = "".join(f"\n[[packages]]\nname = {json.dumps(n)}\nversion = {json.dumps(v)}\n" for n, v in pins)
    return 'lock-version = "1.0"\ncreated-by = "envman (the repository lock\'s pins, as preferences)"\n' + body

"""pylock.toml (PEP 751) as uv writes it → the packages envman locks. uv resolves ONCE, in this format
(it is the richer one: per-file URLs, sizes and hashes, sdists, markers); requirements.lock.txt is
derived from it here, so the two files cannot disagree."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from packaging.utils import canonicalize_name

from envman.errors import ToolError


@dataclass(frozen=True)
class LockedFile:
    url: str
    sha256: str
    kind: str  # "wheel" | "sdist" | "archive"
    uploaded: int | None = None  # its upload-time, in seconds since the epoch (lock/epoch.py dates the lock by it)

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1].split("#")[0]

    @property
    def is_wheel(self) -> bool:
        """A wheel: the index's, or a direct archive that is one (``name @ https://…/x.whl``)."""
        return self.kind == "wheel" or self.filename.endswith(".whl")

    @property
    def is_source(self) -> bool:
        """A source distribution a builder stage can fetch and build: the index's sdist, or a direct archive
        (``name @ https://…/x.tar.gz``, a GitHub archive of a commit) by an http(s) URL."""
        if self.is_wheel or not self.url:
            return False
        return self.kind == "sdist" or (self.kind == "archive" and self.url.startswith(("https://", "http://")))


@dataclass(frozen=True)
class PylockPackage:
    name: str
    version: str
    files: tuple[LockedFile, ...] = ()
    direct: str | None = None  # `name @ url` for VCS/archive packages

    @property
    def sdist_only(self) -> bool:
        return bool(self.files) and not any(f.is_wheel for f in self.files)


def parse_pylock(text: str) -> list[PylockPackage]:
    """The packages of a pylock.toml, by name. One lock parses the same text several times (the derived
    lock, the sdists, the user's own hashes): parsed once."""
    return list(_parse(text))


@lru_cache(maxsize=4)
def _parse(text: str) -> tuple[PylockPackage, ...]:
    from envman._compat import tomllib

    # uv's answer (or the pylock.toml a lock kept): truncated or garbage is a tool's failure, not envman's bug
    hint = "run `envman lock --upgrade` (a fresh uv answer); if it persists, run uv by hand to see what it writes"
    try:
        doc = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise ToolError(f"pylock.toml (uv's answer) does not parse: {exc}", hint=hint) from None
    packages = doc.get("packages", [])
    try:
        if not isinstance(packages, list):
            raise TypeError("packages is not an array of tables")
        return tuple(sorted((_package(p) for p in packages), key=lambda p: p.name))
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ToolError(f"pylock.toml (uv's answer) is not a lock uv writes: {exc.__class__.__name__}: {exc}",
                        hint=hint) from None


def _file(entry: dict, kind: str) -> LockedFile:
    return LockedFile(entry.get("url") or entry.get("path", ""), entry.get("hashes", {}).get("sha256", ""), kind,
                      _seconds(entry.get("upload-time")))


def _seconds(value: object) -> int | None:
    """A TOML datetime (or its text) in seconds since the epoch; a time without a zone is UTC's."""
    from datetime import datetime, timezone

    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    if isinstance(value, datetime):
        return int((value if value.tzinfo else value.replace(tzinfo=timezone.utc)).timestamp())
    return None


def _package(p: dict) -> PylockPackage:
    files = [_file(w, "wheel") for w in p.get("wheels", [])]
    direct = None
    if "sdist" in p:
        files.append(_file(p["sdist"], "sdist"))
    if "archive" in p:
        a = p["archive"]
        files.append(_file(a, "archive"))
        direct = a.get("url") or a.get("path")
    if "vcs" in p:
        v = p["vcs"]
        direct = f"{v.get('type', 'git')}+{v.get('url') or v.get('path')}@{v.get('commit-id')}"
    return PylockPackage(canonicalize_name(p["name"]), str(p.get("version", "")), tuple(files), direct)


def requirement_block(pkg: PylockPackage, via: list[str]) -> list[str]:
    """One package as uv's requirements.txt writes it: the pin, its hashes, the ``# via`` comments."""
    pin = f"{pkg.name} @ {pkg.direct}" if pkg.direct else f"{pkg.name}=={pkg.version}"
    hashes = sorted({f.sha256 for f in pkg.files if f.sha256})
    lines = [pin + (" \\" if hashes else "")]
    lines += [f"    --hash=sha256:{h}" + (" \\" if i < len(hashes) - 1 else "") for i, h in enumerate(hashes)]
    if len(via) == 1:
        lines.append(f"    # via {via[0]}")
    elif via:
        lines.append("    # via")
        lines.extend(f"    #   {v}" for v in via)
    return lines

"""PURE: a requirement line's own ``--hash`` options, held against the files the lock pins.

pip refuses to install a file whose hash the line does not list; the lock (uv's hashes of what the index
serves) must keep that promise, or a hash the user reviewed would be dropped silently."""

from __future__ import annotations

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envman.errors import LockError
from envman.lock.pylock import PylockPackage
from envman.project.req import Req


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def check_user_hashes(reqs: list[Req], locked: list[PylockPackage]) -> list[str]:
    """Raise a LockError naming the line when one of its hashes matches no file the lock pins for the
    version it names; notes for hashes the lock cannot check (it locked another version: the stack's build)."""
    by_name: dict[str, PylockPackage] = {canonicalize_name(p.name): p for p in locked}
    notes: list[str] = []
    for r in reqs:
        if not r.hashes:
            continue
        if r.req.url:
            _check_url_hashes(r, by_name.get(r.name))
            continue
        specs = list(r.req.specifier)
        pinned = specs[0].version if len(specs) == 1 and specs[0].operator in ("==", "===") else None
        pkg = by_name.get(r.name)
        if pinned is None or pkg is None:
            notes.append(f"{r.origin}: the --hash options of {r.req} are not checked: the lock holds no {r.name}"
                         if pkg is None else f"{r.origin}: the --hash options of {r.req} are not checked (no exact version)")
            continue
        if _version(pkg.version) != _version(pinned) or _version(pinned) is None:
            notes.append(f"{r.origin}: the --hash options of {r.req} are not checked: the lock holds "
                         f"{r.name} {pkg.version} (the stack's build)")
            continue
        have = {f.sha256.lower(): f for f in pkg.files if f.sha256}
        mine = _sha256s(r)
        # a line hashed for every platform (pip-compile --generate-hashes) lists more files than a Linux lock
        # pins: one of them must be a file the lock pins, and the lock's other files are named
        if not mine & set(have):
            raise LockError(f"{r.origin}: the --hash for {r.req} matches no file the index serves",
                            hint=f"the lock pins {len(have)} file(s) of {r.name} {pkg.version} for the image's platform; "
                                 "check the hash (a rebuilt or tampered file?) and the index, or remove the --hash "
                                 "options to accept what the lock records")
        other = sorted(f.filename for h, f in have.items() if h not in mine)
        if other:
            notes.append(f"warning: {r.origin}: the lock also pins files of {r.req} its --hash options do not list: "
                         + ", ".join(other))
    return notes


def _sha256s(r: Req) -> set[str]:
    mine = {v.lower() for a, _, v in (h.partition(":") for h in r.hashes) if a.lower() == "sha256"}
    if not mine:
        raise LockError(f"{r.origin}: the --hash options of {r.req} are not sha256; the lock records sha256 only",
                        hint="write sha256 hashes (pip hash -a sha256 FILE), or remove the line's --hash options")
    return mine


def _check_url_hashes(r: Req, pkg: PylockPackage | None) -> None:
    """``name @ URL --hash=sha256:…``: the line names one file, whose hash uv measured when it locked it."""
    mine = _sha256s(r)
    have = {f.sha256.lower() for f in pkg.files if f.sha256} if pkg is not None else set()
    if not have:
        raise LockError(f"{r.origin}: the --hash of {r.line} cannot be checked: the lock records no hash for it",
                        hint="a VCS URL has no file hash (the lock pins its commit): remove the --hash options, "
                             "or point the line at an archive (.whl, .tar.gz)")
    if not mine & have:
        raise LockError(f"{r.origin}: the --hash of {r.line} does not match the file at that URL "
                        f"(it has sha256:{sorted(have)[0]})",
                        hint="the file changed since the hash was written (a re-upload, or tampering): check it, "
                             "then update the hash or remove the --hash options")

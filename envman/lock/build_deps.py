"""Lock what the builder stage builds WITH, so a source-only package's wheel is as reproducible as the rest.

Each source-only package's sdist (hash-checked against the lock) is opened to read its
``[build-system] requires`` (PEP 518; setuptools when it has none, PEP 517's fallback); together with the
table's ``build_requires`` and nvcc they are resolved by uv with hashes, constrained to the main lock's
pins (a build that needs numpy or torch builds against the very versions the image runs), into
``requirements.build.lock.txt``. The builder installs that lock and builds with ``--no-build-isolation``:
no unpinned download at build time.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

from envman.errors import LockError, ToolError
from envman.lock.graph import ssl_context
from envman.lock.uv import PLATFORM, UvRequest, parse_uv_output, uv_answer, uv_compile_command
from envman.project.backend_requires import setup_requires

# PEP 517/518: a source tree without [build-system] builds as if it required setuptools and wheel (setuptools
# before 70.1 has no bdist_wheel of its own: a lock that pins an older setuptools needs wheel beside it)
LEGACY_BACKEND = ("setuptools>=40.8.0", "wheel")


def sdist_urls(pylock_text: str) -> dict[str, tuple[str, str]]:
    """name → (url, sha256) of the source distribution of every package of uv's pylock.toml that has one:
    the index's sdist, or a direct archive by URL (pylock.LockedFile.is_source)."""
    from envman.lock.pylock import parse_pylock

    out: dict[str, tuple[str, str]] = {}
    for p in parse_pylock(pylock_text):
        f = next((f for f in p.files if f.is_source and f.sha256 and "://" in f.url), None)
        if f is not None:
            out[p.name] = (f.url, f.sha256)
    return out


def _top_level_file(data: bytes, filename: str, name: str) -> str | None:
    """The text of ``<sdist>/<name>`` (top level), or None."""
    if filename.endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            names = [n for n in z.namelist() if n.count("/") == 1 and n.endswith("/" + name)]
            return z.read(names[0]).decode(errors="replace") if names else None
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as t:
        members = [m for m in t.getmembers() if m.name.count("/") == 1 and m.name.endswith("/" + name)]
        f = t.extractfile(members[0]) if members else None
        return f.read().decode(errors="replace") if f else None


def build_requires_of(data: bytes, filename: str) -> tuple[str, ...]:
    """``[build-system] requires`` of an sdist's top-level pyproject.toml (setuptools when there is none), and its
    setup.py's ``setup_requires``."""
    from envman._compat import tomllib

    try:
        text = _top_level_file(data, filename, "pyproject.toml")
        extra = setup_requires(_top_level_file(data, filename, "setup.py"))
        bs = tomllib.loads(text).get("build-system") if text is not None else None
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, tomllib.TOMLDecodeError, RecursionError) as exc:
        raise LockError(f"{filename}: cannot read its build requirements ({exc})",
                        hint="the source distribution is damaged or its pyproject.toml is not TOML: lock another "
                             "version of it, or a wheel") from None
    if not isinstance(bs, dict) or not isinstance(bs.get("requires"), list):
        return LEGACY_BACKEND + extra
    return tuple(str(r) for r in bs["requires"]) + extra


def fetch_sdist(url: str, sha256: str, timeout: float = 120) -> bytes:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout, context=ssl_context()) as r:  # noqa: S310 (https from the lock)
            data = r.read()
    except OSError as exc:
        raise ToolError(f"cannot download {url.rsplit('/', 1)[-1]} to read its build requirements: {exc}",
                        hint="check the network (PyPI) and retry `envman lock`") from None
    if hashlib.sha256(data).hexdigest() != sha256:
        raise LockError(f"{url.rsplit('/', 1)[-1]}: sha256 differs from the lock", hint="re-run `envman lock --upgrade`")
    return data


def compile_build_lock(requirements: list[str], constraints: dict[str, str], python: str,
                       index_urls: list[str], platform: str | None = None) -> str:
    """uv, with hashes, constrained to the main lock's pins; returns the requirements-format body."""
    cmd = uv_compile_command(Path("build.in"), Path("build.txt"), python, index_urls, platform=platform or PLATFORM,
                             constraints=Path("constraints.txt"))
    files = (("build.in", "\n".join(sorted(set(requirements))) + "\n"),
             ("constraints.txt", "".join(f"{n}=={v}\n" for n, v in sorted(constraints.items()))))
    text = uv_answer(cmd.args[0], UvRequest(files, tuple(cmd.args[1:]), "build.txt", tuple(cmd.secret_env.items())))
    parse_uv_output(text)  # the same shape as every other lock envman writes
    return text

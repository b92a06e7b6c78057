"""Which locked packages have no wheel for the target platform, read from uv's pylock.toml.

uv writes pylock.toml for ``--python-platform``/``--python-version``: each package lists its ``sdist`` and
only the ``wheels`` that fit that platform. A package with an sdist and no wheel there cannot be installed
with ``--only-binary=:all:``: the Dockerfile builds it in a builder stage instead (image/stages.py).
"""

from __future__ import annotations

from envman.errors import LockError
from envman.lock.pylock import parse_pylock


def source_only(pylock_text: str) -> list[tuple[str, str]]:
    """(name, version) of the packages with an sdist and no wheel for the target; a VCS, archive or directory
    entry is not envman's to build from the index."""
    return sorted((p.name, p.version) for p in parse_pylock(pylock_text)
                  if not any(f.kind == "wheel" for f in p.files) and any(f.kind == "sdist" for f in p.files))


def refuse_unbuildable(pylock_text: str, python: str) -> None:
    """A locked package with neither a wheel for the target nor an sdist (wheels for other platforms only)
    cannot be installed at all: say so at lock time, not in the middle of a build."""
    bad = [f"{p.name}=={p.version}" for p in parse_pylock(pylock_text) if not p.files and p.direct is None]
    if bad:
        raise LockError(f"{', '.join(bad)}: no wheel for Linux x86_64 / Python {python} and no sdist on the index",
                        hint="pin a version that ships a manylinux wheel (or an sdist), or drop the requirement")


def refuse_framework_build_without_framework(names: list[str], framework: str | None) -> None:
    """A source-only package that imports the framework while it builds needs the framework in the stack."""
    if names and framework is None:
        raise LockError(f"{', '.join(names)} imports the framework (torch) while it builds from source, "
                        "and this stack has no framework",
                        hint="add framework: torch to envman.yaml, or pin a version of it that ships a wheel")


def refuse_in_framework_closure(source: list[tuple[str, str]], closure: set[str], framework: str | None) -> None:
    """The framework's own layer installs wheels only and is the builder's first step: a source-only
    package inside it cannot be built there."""
    bad = [f"{n}=={v}" for n, v in source if n in closure]
    if bad:
        raise LockError(f"{', '.join(bad)} (needed by {framework or 'the framework'}) has no wheel for the target platform",
                        hint="pin a version that ships a manylinux x86_64 wheel, or choose another framework version")

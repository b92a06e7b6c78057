"""Which locked packages have no wheel for the target platform, read from uv's pylock.toml.

uv writes pylock.toml for ``--python-platform``/``--python-version``: each package lists its ``sdist`` and
only the ``wheels`` that fit that platform. A package with an sdist and no wheel there cannot be installed
with ``--only-binary=:all:``: the Dockerfile builds it in a builder stage instead (image/stages.py).
"""

from __future__ import annotations

from packaging.utils import canonicalize_name

from envman.errors import LockError


def source_only(pylock_text: str) -> list[tuple[str, str]]:
    from envman._compat import tomllib

    doc = tomllib.loads(pylock_text)
    out = []
    for p in doc.get("packages", []):
        if p.get("wheels"):
            continue
        if "sdist" in p:
            out.append((canonicalize_name(p["name"]), str(p["version"])))
        # neither (a VCS or directory entry): not envman's to build from the index
    return sorted(out)


def refuse_unbuildable(pylock_text: str, python: str) -> None:
    """A locked package with neither a wheel for the target nor an sdist (wheels for other platforms only)
    cannot be installed at all: say so at lock time, not in the middle of a build."""
    from envman._compat import tomllib

    bad = [f"{p['name']}=={p['version']}" for p in tomllib.loads(pylock_text).get("packages", [])
           if not p.get("wheels") and "sdist" not in p and not {"vcs", "directory", "archive"} & set(p)]
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

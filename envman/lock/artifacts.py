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


def refuse_in_framework_closure(source: list[tuple[str, str]], closure: set[str], framework: str | None) -> None:
    """The framework's own layer installs wheels only and is the builder's first step: a source-only
    package inside it cannot be built there."""
    bad = [f"{n}=={v}" for n, v in source if n in closure]
    if bad:
        raise LockError(f"{', '.join(bad)} (needed by {framework or 'the framework'}) has no wheel for the target platform",
                        hint="pin a version that ships a manylinux x86_64 wheel, or choose another framework version")

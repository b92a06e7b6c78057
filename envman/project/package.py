"""Is the project itself a Python package the image should install, and what does building it need?

A package: a pyproject.toml with ``[build-system]``, or a setup.py (PEP 517's fallback: setuptools).
Its build backend is added to the lock (hash-checked, installed with the locked layers), so the project
installs with ``--no-build-isolation --no-index``: offline, and with no unpinned download.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from envman.errors import UsageError
from envman.project.requirements import read_pyproject

# PEP 517: "If the pyproject.toml file is absent, or the build-backend key is missing, the source tree is
# not using this specification, and tools should revert to the legacy behaviour of running setup.py"
# (pip: setuptools>=40.8.0 through its __legacy__ backend).
LEGACY_BUILD_REQUIRES = ("setuptools>=40.8.0",)


@dataclass(frozen=True)
class ProjectPackage:
    kind: str  # "pyproject" | "setup.py"
    build_requires: tuple[str, ...]
    extras: tuple[str, ...]  # optional-dependencies asked for by envman.yaml
    extra_requires: tuple[str, ...]  # their requirements (locked like any other)
    files: tuple[str, ...]  # what decides it: part of the lock's inputs


def find_package(root: Path, extras: tuple[str, ...] = ()) -> ProjectPackage | None:
    doc = read_pyproject(root)
    has_setup = (root / "setup.py").is_file()
    files = tuple(f for f in ("pyproject.toml", "setup.py", "setup.cfg") if (root / f).is_file())
    if doc is not None and isinstance(doc.get("build-system"), dict):
        reqs = doc["build-system"].get("requires", [])
        if not isinstance(reqs, list) or not all(isinstance(r, str) for r in reqs):
            raise UsageError("pyproject.toml: build-system.requires: expected a list of requirements")
        kind = "pyproject"
    elif has_setup:
        reqs, kind = list(LEGACY_BUILD_REQUIRES), "setup.py"
    else:
        return None
    for r in reqs:
        try:
            Requirement(r)
        except InvalidRequirement as exc:
            raise UsageError(f"pyproject.toml: build-system.requires: {r!r} is not valid ({exc})") from None
    extra_reqs: list[str] = []
    optional = ((doc or {}).get("project") or {}).get("optional-dependencies") or {}
    for e in extras:
        if e not in optional:
            raise UsageError(f"install_project: extra {e!r} is not in pyproject.toml [project.optional-dependencies]",
                             hint="extras there: " + (", ".join(sorted(optional)) or "none"))
        extra_reqs.extend(optional[e])
    return ProjectPackage(kind, tuple(reqs), tuple(extras), tuple(extra_reqs), files)

"""A project that lists its own distribution among its requirements (``myproj`` in requirements.txt beside a
pyproject.toml named myproj): that line is the project itself, whose source the image already holds — locked from
PyPI it would be someone else's release, or none (issue 38). Its name is the one the project's files write down."""

from __future__ import annotations

from pathlib import Path

from packaging.utils import canonicalize_name

from envman.project.imports import distribution_name
from envman.project.req import Req


def without_own(root: Path, doc: dict | None, reqs: list[Req]) -> tuple[list[Req], list[str]]:
    """(the requirements without the project's own name, a warning per line left out). A line with a URL or
    extras of its own names something else (a fork, ``myproj[train]``) and is kept."""
    name = distribution_name(root, doc)
    if not name:
        return reqs, []
    own = canonicalize_name(name)
    kept, said = [], []
    for r in reqs:
        if r.name == own and r.req.url is None and not r.req.extras:
            said.append(f"{r.origin}: {r.req} is this project ({name}, its own name): not locked from PyPI; the "
                        "image has its source")
        else:
            kept.append(r)
    return kept, said

"""Readers for the dependency files real repositories use. Each reads one file statically (no code of the
repository is ever executed) and returns a ``Found``: the requirements it kept, the Python constraints
it states, index options, and the fate of every line it looked at, so nothing is dropped silently."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from packaging.specifiers import SpecifierSet

from envman.project.req import Req


@dataclass(frozen=True)
class Fate:
    """What happened to one input line: kept, rewrote (→ new text), dropped (why), or project."""

    origin: str
    text: str
    fate: str
    why: str = ""

    def describe(self) -> str:
        tail = f" ({self.why})" if self.why else ""
        return f"{self.origin}: {self.fate} {self.text!r}{tail}"


@dataclass
class Found:
    file: str
    reqs: list[Req] = field(default_factory=list)
    constraints: list[Req] = field(default_factory=list)  # from -c files: they narrow, they install nothing
    overrides: list[Req] = field(default_factory=list)  # [tool.uv] override-dependencies: replace what packages ask
    optional: list[Req] = field(default_factory=list)  # extras / groups not asked for: a framework hint only
    python: list[tuple[str, SpecifierSet]] = field(default_factory=list)  # (origin, constraint)
    variants: list[tuple[str, str]] = field(default_factory=list)  # (origin, "cu118" | "cpu") from conda pins
    index_urls: list[tuple[str, str]] = field(default_factory=list)  # (origin, url) honoured for other packages
    find_links: list[tuple[str, str]] = field(default_factory=list)
    install_project: bool = False
    includes: list[str] = field(default_factory=list)  # files read through -r/-c
    fates: list[Fate] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def merge(self, other: Found) -> None:
        """``other`` (a file this one includes) read into this one: every list extended."""
        self.includes.append(other.file)
        for f in fields(self):
            if isinstance(mine := getattr(self, f.name), list):
                mine += getattr(other, f.name)
        self.install_project = self.install_project or other.install_project

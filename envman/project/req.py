"""One requirement and where it was read."""

from __future__ import annotations

from dataclasses import dataclass

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


@dataclass(frozen=True)
class Req:
    req: Requirement
    origin: str  # "requirements.txt:3", "pyproject.toml [project] dependencies", "envman.yaml packages[0]"
    raw: str | None = None  # a URL line kept verbatim for uv (``git+https://…`` without a name)
    hashes: tuple[str, ...] = ()  # the line's own ``--hash=sha256:…`` options, checked against the lock

    @property
    def name(self) -> str:
        return canonicalize_name(self.req.name)

    @property
    def line(self) -> str:
        """The line handed to uv."""
        return self.raw or str(self.req)

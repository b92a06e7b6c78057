"""One requirement and where it was read."""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

# the image's platform, for evaluating environment markers
LINUX = {"sys_platform": "linux", "platform_system": "Linux", "os_name": "posix", "platform_machine": "x86_64",
         "implementation_name": "cpython", "platform_python_implementation": "CPython"}


def holds(marker: Marker | None, env: dict) -> bool:
    """``marker`` holds in ``env``; one packaging cannot evaluate is taken to hold (its line is kept)."""
    try:
        return marker is None or marker.evaluate(env)
    except Exception:
        return True


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


def pinned_in(said: str, reqs: list[Req]) -> str | None:
    """The project's lines behind the pins uv's refusal names (``you require scipy==1.8.1``): uv names the pin,
    not the file (issue 38, class 7: a hint followed ended in a pin nobody could find)."""
    named = {canonicalize_name(n) for n in re.findall(r"you require ([A-Za-z0-9][\w.-]*)", said)}
    hits = [f"{r.origin}: {r.req}" for r in reqs if r.name in named]
    return f"pinned in {'; '.join(hits)}: relax or drop it" if hits else None

"""The companions a lock really holds: those the project pins, not every companion of the build."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from packaging.utils import canonicalize_name as _canonical

from envman.app.generate import Outcome
from envman.project.spec import ProjectSpec

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def locked_companions(root: Path, spec: ProjectSpec, out: Outcome) -> Outcome:
    """``out`` with its resolution's companions cut to those the project pins: envman.yaml's ``companions``, its
    ``packages`` by name, and the framework lock's lines (a requirement file naming one)."""
    names = {_canonical(c) for c in spec.companions}
    names |= {_canonical(m.group(1)) for p in spec.packages if (m := _NAME.match(p))}
    framework_file = (out.lock.get("python_lock") or {}).get("framework") if hasattr(out.lock, "get") else None
    if isinstance(framework_file, str) and framework_file:
        try:
            from envman.inputs import read_regular

            text = read_regular(root / framework_file).decode("utf-8", errors="replace")  # bounded; a FIFO never blocks
        except OSError:
            text = ""
        names |= {_canonical(m.group(1)) for line in text.splitlines()
                  if not line.lstrip().startswith(("#", "-")) and (m := _NAME.match(line))}
    res = out.resolution
    kept = tuple((k, v) for k, v in res.companions if _canonical(k) in names)
    if kept != res.companions:
        out.resolution = replace(res, companions=kept)
    return out

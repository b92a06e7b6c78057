"""uv's own project data: ``[tool.uv.sources]`` / ``[[tool.uv.index]]`` in pyproject.toml (which index a
framework comes from: ``https://download.pytorch.org/whl/cu128`` is the CUDA variant cu128), ``[tool.uv]``
``constraint-dependencies`` and ``override-dependencies`` (the repository's resolution intent: passed to uv as
constraints and overrides, as ``uv lock`` would) and the framework version a lock file holds
(``lock_constraints``; the files are read by ``locks.py``). All read as text (TOML), never run."""

from __future__ import annotations

import re

from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version

from envman import frameworks
from envman.errors import UsageError
from envman.project.req import Req
from envman.project.sources import Fate, Found
from envman.project.sources.pyproject import add_requirement

FILE = "pyproject.toml"
LOCK = "uv.lock"
_VARIANT = re.compile(r"download\.pytorch\.org/whl/(?:(?:nightly|test)/)?(cu\d+|cpu|rocm[\d.]+)/?\Z")


def index_variant(url: str) -> str | None:
    """``https://download.pytorch.org/whl/cu128`` → ``cu128``; any other index → None."""
    m = _VARIANT.search(url.strip())
    return m.group(1) if m else None


def _entries(value: object) -> list[dict]:
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, dict)]
    return []


def _framework_indexes(sources: dict, indexes: dict) -> list[tuple[str, str, str]]:
    """(origin, variant, url) for every PyTorch index a framework (or companion) is taken from."""
    dists = set(frameworks.by_distribution()) | set(frameworks.companions())
    seen: list[tuple[str, str, str]] = []
    for dist, value in sorted(sources.items()):
        for i, entry in enumerate(_entries(value) if dist in dists else []):
            where = f"{FILE} tool.uv.sources.{dist}" + (f"[{i}]" if isinstance(value, list) else "")
            index = indexes.get(entry.get("index"))
            url = index["url"] if index else entry.get("url") if isinstance(entry.get("url"), str) else None
            variant = index_variant(url) if url else None
            if variant:
                when = ", ".join(f"{k} {entry[k]}" for k in ("extra", "group", "marker") if isinstance(entry.get(k), str))
                seen.append((where + (f" ({when})" if when else ""), variant, url or ""))
    # no source names the framework: a default (non-explicit) PyTorch index serves it
    return seen or [(f"{FILE} tool.uv.index {name}", v, index["url"]) for name, index in indexes.items()
                    if (v := index_variant(index["url"])) and not index.get("explicit", False)]


def read_uv_sources(doc: dict) -> Found:
    """The CUDA variant the repository's uv configuration installs its framework from. Several entries
    (``extra = "cpu"`` → the CPU index, ``extra = "gpu"`` → cu128) are alternatives: a GPU image takes the
    newest CUDA one; only a CPU index means a CPU stack."""
    found = Found(FILE)
    uv = ((doc.get("tool") or {}).get("uv") or {})
    if not isinstance(uv, dict):
        return found
    indexes = {i.get("name"): i for i in _entries(uv.get("index")) if isinstance(i.get("url"), str)}
    sources = uv.get("sources")
    seen = _framework_indexes(sources if isinstance(sources, dict) else {}, indexes)
    cuda = [s for s in seen if s[1].startswith("cu")]
    # [tool.uv] default-groups: the group `uv sync` installs unless told otherwise is the repository's choice
    defaults = [g for g in uv.get("default-groups") or [] if isinstance(g, str)] if isinstance(uv.get("default-groups"), list) else []
    chosen = [s for s in cuda if any(f"group {g})" in s[0] or f"group {g}," in s[0] for g in defaults)]
    picked = (max(chosen or cuda, key=lambda s: int(s[1][2:])) if cuda else (seen[0] if seen else None))
    for origin, variant, url in seen:
        if picked and variant == picked[1]:
            found.variants.append((origin, variant))
            found.fates.append(Fate(origin, url, "kept", f"the framework's index: variant {variant}"))
        else:
            why = (f"another variant's index; {picked[1]} is the starting point"
                   + (" ([tool.uv] default-groups)" if chosen else "")
                   + f" (pass --framework 'torch==X.Y.*+{variant}' to take this one)") if picked else ""
            found.fates.append(Fate(origin, url, "dropped", why))
    return found


def read_uv_resolution(doc: dict) -> Found:
    """``[tool.uv] constraint-dependencies`` / ``override-dependencies``: uv applies them to every resolution of the
    project (``uv lock``, ``uv sync``), and so does envman's lock."""
    found = Found(FILE)
    uv = (doc.get("tool") or {}).get("uv") or {}
    if not isinstance(uv, dict):
        return found
    for key, target in (("constraint-dependencies", found.constraints), ("override-dependencies", found.overrides)):
        lines = uv.get(key) or []
        if not isinstance(lines, list):
            raise UsageError(f"{FILE}: tool.uv.{key}: expected an array of requirements", hint="fix the file")
        kind = key.split("-")[0]
        for i, text in enumerate(lines):
            where = f"{FILE} tool.uv.{key}[{i}]"
            scratch = Found(FILE)
            add_requirement(scratch, text, where)  # validates, and keeps a URL line as written
            target.extend(scratch.reqs)
            found.fates.append(Fate(where, text, "kept", f"an uv {kind}: passed to uv as one ({kind}s: in envman.yaml)"))
    return found


def lock_constraints(locked: dict[str, list[str]], framework: str,
                     lock: str = LOCK) -> tuple[list[Req], list[tuple[str, str]], list[str]]:
    """Constraints on ``framework`` (and, for torch, its companions) from what ``uv.lock`` locked: the
    version(s) it holds, and its CUDA variant when it locked exactly one. Returns (reqs, variants, notes)."""
    reqs: list[Req] = []
    variants: list[tuple[str, str]] = []
    notes: list[str] = []
    names = [d for d, fw in frameworks.by_distribution().items() if fw == framework]
    if framework == "torch":
        names += list(frameworks.companions())
    for dist in names:
        try:
            versions = [Version(v) for v in locked.get(dist, [])]
        except InvalidVersion:
            continue
        if not versions:
            continue
        public = sorted({v.public for v in versions}, key=Version)
        spec = f"=={public[0]}" if len(public) == 1 else f">={public[0]},<={public[-1]}"
        origin = f"{lock} package {dist}"
        reqs.append(Req(Requirement(f"{dist}{spec}"), origin))
        cuda = sorted({v.local for v in versions if v.local and v.local.startswith("cu")})
        if dist in names[:1] or frameworks.by_distribution().get(dist) == framework:
            if len(cuda) == 1:
                variants.append((origin, cuda[0]))
            notes.append(f"{origin}: {dist} {', '.join(public)} locked"
                         + (f" ({cuda[0]})" if len(cuda) == 1 else "")
                         + f": the {framework} range is narrowed to it (pass --framework, or edit framework: in envman.yaml, to choose another)")
    return reqs, variants, notes

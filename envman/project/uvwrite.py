"""Writing envman's stack into a uv project's own pyproject.toml, so that the user's ``uv lock`` / ``uv sync``
installs the framework build envman chose: an explicit ``[[tool.uv.index]]`` for the variant's PyTorch index,
``[tool.uv.sources]`` entries for the framework and the companions the project uses, ``[tool.uv]
constraint-dependencies`` pinning their versions (the index alone would give its newest release, which the
matrix may not vouch for), and a ``requires-python`` the release has wheels for.

Text in, text out (tomlkit, which keeps every comment, blank line and quote style it does not touch); the
caller shows the diff and writes. Rules, so that a second run changes nothing:
- an index whose URL is the variant's is reused (made explicit); otherwise ``pytorch-<variant>`` is added;
- a source entry is replaced when it is unconditional or points at a CUDA PyTorch index (the GPU entry of a
  ``cpu``/``gpu`` extras pair); CPU/ROCm entries under an extra or group are the user's other alternatives and
  stay; a new entry gets ``marker = "sys_platform == 'linux'"``: the CUDA indexes serve Linux (and Windows)
  wheels only, so a Mac in the same universal lock takes the PyPI wheel, as uv's PyTorch guide does;
- when the chosen build is the plain PyPI wheel, those entries are removed instead;
- a download.pytorch.org index that no source names any more is removed (a non-explicit one would otherwise
  serve the framework to uv before PyPI does), unless it is the project's ``default`` index.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import tomlkit
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version
from tomlkit.exceptions import TOMLKitError

from envman.errors import UsageError
from envman.project.sources.uv import index_variant
from envman.project.tomllayout import Layout
from envman.project.uvshapes import check_shapes

FILE = "pyproject.toml"
LINUX = "sys_platform == 'linux'"
_CONDITIONS = ("extra", "group")
_NOT_INDEX = ("path", "git", "url", "workspace", "editable")


@dataclass(frozen=True)
class UvTarget:
    """What the project should install, from envman.lock (or the resolver)."""

    package: str  # the framework's distribution: torch, tensorflow
    version: str  # its public version: 2.14.1
    variant: str | None  # cu130, cpu; None for a framework without variants
    index_url: str | None  # the variant's own index; None: the plain PyPI wheel is this build
    companions: tuple[tuple[str, str], ...] = ()  # (distribution, public version) of every companion released
    python_floor: str | None = None  # the lowest Python the release has wheels for (3.10)
    python: str | None = None  # the stack's Python (3.12): requires-python must allow it


@dataclass(frozen=True)
class UvEdit:
    text: str
    changes: tuple[str, ...]  # one line per change, for the user


def edit_pyproject(text: str, target: UvTarget) -> UvEdit:
    """The pyproject.toml text with ``target`` written in, and what changed. Raises UsageError naming the
    table or key when the project cannot take it (no [project] table, a path/git source for the framework)."""
    crlf = "\r\n" in text  # a Windows file comes back with CRLF line ends only (tomlkit writes LF for new lines)
    try:
        doc = tomlkit.parse(text.replace("\r\n", "\n") if crlf else text)
    except TOMLKitError as exc:
        raise UsageError(f"{FILE}: not valid TOML ({exc})", hint="fix the file (uv cannot read it either)") from None
    project = doc.get("project")
    if not isinstance(project, dict):
        raise UsageError(f"{FILE}: no [project] table, so this is not a uv project",
                         hint="uv projects declare [project] (uv init writes it); envman init reads other layouts")
    check_shapes(doc)
    changes: list[str] = []
    lay = Layout()
    uv = _table(doc, "tool", "uv")
    dists = _managed(doc, uv, target)
    name, new_index = _choose_index(lay, uv, target, changes) if target.index_url else (None, None)
    for dist in dists:
        _set_sources(lay, uv, dist, name, target, changes)
    if new_index is not None:  # after the sources, which name it: the order uv's documentation shows
        _append_index(lay, uv, new_index)
    _drop_orphan_indexes(uv, changes)
    versions = {target.package: target.version, **dict(target.companions)}
    _set_constraints(lay, uv, {d: f"{d}=={versions[d]}" for d in dists}, changes)
    _set_requires_python(lay, project, target, changes)
    if not changes:
        return UvEdit(text, ())
    out = lay.apply(tomlkit.dumps(doc), text.replace("\r\n", "\n"))
    _verify(doc.unwrap(), out)
    return UvEdit(out.replace("\n", "\r\n") if crlf else out, tuple(changes))


def _verify(want: dict, out: str) -> None:
    """The written text must read back as the edited document: tomlkit renders some layouts (a ``[tool]`` table
    holding ``uv.package = true``) so that a new sub-table lands elsewhere (``[uv.sources]``)."""
    try:
        got: Any = tomlkit.parse(out).unwrap()
    except TOMLKitError:
        got = None
    if got != want:
        where = next((k for k in sorted(set(want) | set(got or {})) if (got or {}).get(k) != want.get(k)), "tool")
        raise UsageError(f"{FILE}: envman cannot add to the way this file lays out [{where}] without changing its "
                         "meaning; nothing was written",
                         hint="keep [tool.uv], [tool.uv.sources] and [[tool.uv.index]] together, as headers (not dotted "
                              "keys), then run it again (tomlkit 0.15 or newer edits tables split by others)")


# --- which distributions (each key below had its shape checked first: uvshapes.check_shapes) -------------


def _requirement_names(doc: Any) -> set[str]:
    proj = doc.get("project") or {}
    lists = [proj.get("dependencies") or []]
    lists += list((proj.get("optional-dependencies") or {}).values())
    lists += list((doc.get("dependency-groups") or {}).values())
    names: set[str] = set()
    for deps in lists:
        for d in deps:
            try:
                names.add(canonicalize_name(Requirement(str(d)).name))
            except InvalidRequirement:
                continue  # not envman's to judge here: uv says so when it reads the file
    return names


def _managed(doc: Any, uv: Any, target: UvTarget) -> list[str]:
    """The framework (always: a constraint reaches it even as a dependency of a dependency) and the
    companions the project names, in a dependency list or in its sources."""
    named = _requirement_names(doc) | {canonicalize_name(k) for k in (uv.get("sources") or {})}
    return [target.package] + [c for c, _ in target.companions if canonicalize_name(c) in named]


# --- tables ------------------------------------------------------------------------------------------


def _table(doc: Any, *path: str) -> Any:
    t = doc
    for key in path:
        if key not in t:
            t[key] = tomlkit.table(is_super_table=True)
        t = t[key]
    return t


def _put(lay: Layout, table: Any, key: str, value: Any) -> None:
    """Set ``key`` in place, or as a new key that ``lay`` moves up to the table's other keys (tomlkit alone
    would leave it under the comment that introduces the next table)."""
    if key in table:
        table[key] = value
        return
    item = tomlkit.item(value)
    lay.mark_key(item)
    table[key] = item


def _choose_index(lay: Layout, uv: Any, target: UvTarget, changes: list[str]) -> tuple[str, Any]:
    """The name of the variant's index, and the new ``[[tool.uv.index]]`` entry to append (None: reused)."""
    assert target.index_url is not None
    indexes = list(uv.get("index") or [])
    for entry in indexes:
        if str(entry.get("url", "")).strip().rstrip("/") == target.index_url.strip().rstrip("/"):
            if entry.get("explicit") is not True:
                _put(lay, entry, "explicit", True)
                changes.append(f"tool.uv.index {entry.get('name')}: explicit = true (it serves only what a source names)")
            return str(entry.get("name")), None
    taken = {str(e.get("name")) for e in indexes}
    base = f"pytorch-{target.variant}" if target.variant else f"{target.package}-index"
    name = next(n for n in (base, *(f"{base}-{i}" for i in range(2, 100))) if n not in taken)
    entry = tomlkit.table()
    entry.update({"name": name, "url": target.index_url, "explicit": True})
    changes.append(f"tool.uv.index {name}: {target.index_url} (explicit: only the packages sourced from it)")
    return name, entry


def _append_index(lay: Layout, uv: Any, entry: Any) -> None:
    if "index" not in uv:
        lay.mark_header(entry)  # tomlkit puts no blank line above a new [[array]] of tables
        uv["index"] = tomlkit.aot()
    uv["index"].append(entry)


def _index_urls(uv: Any) -> dict[str, str]:
    return {str(e.get("name")): str(e.get("url")) for e in uv.get("index") or [] if isinstance(e.get("url"), str)}


# --- sources -----------------------------------------------------------------------------------------


def _entries(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def _replaceable(entry: Any, ours: str | None, urls: dict[str, str]) -> bool:
    """The entry that stands for the GPU build: unconditional, or on a CUDA PyTorch index, or ours."""
    index = entry.get("index")
    if ours is not None and index == ours:
        return True
    variant = index_variant(urls.get(str(index), ""))
    return not any(k in entry for k in _CONDITIONS) or bool(variant and variant.startswith("cu"))


def _check_entries(dist: str, entries: list[Any]) -> None:
    for e in entries:
        kind = next((k for k in _NOT_INDEX if k in e), None)
        if kind is not None:
            raise UsageError(f"{FILE}: tool.uv.sources.{dist} is a {kind} source; envman writes index sources only",
                             hint="remove that source to let envman name the framework's index, or keep it and "
                                  "do not run `envman uv write` on this project")


def _set_sources(lay: Layout, uv: Any, dist: str, ours: str | None, target: UvTarget, changes: list[str]) -> None:
    current = (uv.get("sources") or {}).get(dist)
    entries = _entries(current) if current is not None else []
    _check_entries(dist, entries)
    urls = _index_urls(uv)
    hits = [e for e in entries if _replaceable(e, ours, urls)]
    if entries and not hits and ours is not None:
        raise UsageError(f"{FILE}: tool.uv.sources.{dist}: every entry is conditional and none is a CUDA index, so "
                         "envman cannot tell which one the GPU build replaces",
                         hint="add the GPU entry yourself (e.g. extra = \"gpu\") or remove the entries, then run it again")
    if ours is None:  # the plain PyPI wheel is the build: no source may send it elsewhere
        keep = [e for e in entries if e not in hits]
        if hits:
            changes.append(f"tool.uv.sources.{dist}: {len(hits)} entr{'y' if len(hits) == 1 else 'ies'} removed "
                           f"({target.package} {target.version} {target.variant or ''} is the plain PyPI wheel)".replace("  ", " "))
            _write_entries(uv, dist, keep)
        return
    stale = [e for e in hits if e.get("index") != ours]
    for e in stale:
        e["index"] = ours
    if stale:
        changes.append(f"tool.uv.sources.{dist}: index = \"{ours}\"")
    if not entries:
        # parsed rather than built, for the spacing uv's own documentation and most projects use: { a = 1 }
        entry = tomlkit.parse(f"x = {{ index = {tomlkit.string(ours).as_string()}, marker = \"{LINUX}\" }}\n")["x"]
        _put(lay, _table(uv, "sources"), dist, entry)
        changes.append(f"tool.uv.sources.{dist}: {{ index = \"{ours}\", marker = \"{LINUX}\" }}")


def _write_entries(uv: Any, dist: str, keep: list[Any]) -> None:
    sources = uv["sources"]
    if not keep:
        del sources[dist]
        if not sources:
            del uv["sources"]
    elif isinstance(sources[dist], list):
        arr = sources[dist]
        for e in [e for e in arr if e not in keep]:
            arr.remove(e)
        if len(arr) == 1 and len(keep) == 1:
            sources[dist] = keep[0]


def _drop_orphan_indexes(uv: Any, changes: list[str]) -> None:
    used = {str(e.get("index")) for value in (uv.get("sources") or {}).values() for e in _entries(value) if "index" in e}
    raw = uv.get("index")
    if raw is None:
        return
    for entry in list(raw):
        url = entry.get("url")
        if (isinstance(url, str) and index_variant(url) and str(entry.get("name")) not in used
                and entry.get("default") is not True):
            raw.remove(entry)
            changes.append(f"tool.uv.index {entry.get('name')}: removed ({url}: no source names it any more)")
    if not raw:
        del uv["index"]


# --- versions ----------------------------------------------------------------------------------------


def _set_constraints(lay: Layout, uv: Any, pins: dict[str, str], changes: list[str]) -> None:
    lines = [str(c) for c in (uv.get("constraint-dependencies") or [])]
    wanted = set(pins.values())
    kept: list[str] = []
    dropped: list[str] = []
    for line in lines:
        try:
            name = canonicalize_name(Requirement(line).name)
        except InvalidRequirement:
            kept.append(line)
            continue
        (dropped if name in pins and line not in wanted else kept).append(line)
    added = [p for p in pins.values() if p not in kept]
    if not added and not dropped:
        return
    arr = tomlkit.array()
    arr.extend(kept + added)
    if len(arr) > 2:
        arr.multiline(True)
    _put(lay, uv, "constraint-dependencies", arr)
    changes.append("tool.uv.constraint-dependencies: " + ", ".join(added)
                   + (f" (was {', '.join(dropped)})" if dropped else ""))


_LOWER = re.compile(r"^\s*(>=|>)\s*([0-9][0-9.]*)\s*\Z")


def _floor_below(clause: str, floor: Version) -> bool:
    """``>=3.8`` is a floor below 3.10 (replaced by the new floor); ``<4`` or ``!=3.11.0`` is not a floor."""
    m = _LOWER.match(clause)
    return m is not None and Version(m.group(2)) < floor


def _set_requires_python(lay: Layout, project: Any, target: UvTarget, changes: list[str]) -> None:
    """Raise the floor to the lowest Python the release has wheels for: uv locks for every Python the
    project allows, and a Python without a framework wheel would make it refuse (or pick an older release)."""
    if target.python_floor is None:
        return
    floor = Version(target.python_floor)
    raw = project.get("requires-python")
    if raw is None:
        _put(lay, project, "requires-python", f">={floor}")
        changes.append(f"project.requires-python: >={floor} ({target.package} {target.version} has wheels from Python {floor})")
        return
    try:
        spec = SpecifierSet(str(raw))
    except InvalidSpecifier:
        raise UsageError(f"{FILE}: project.requires-python {str(raw)!r} is not a version specifier",
                         hint="write it as e.g. \">=3.10\"") from None
    if target.python and not spec.contains(target.python, prereleases=True):
        raise UsageError(f"{FILE}: project.requires-python {str(raw)!r} excludes Python {target.python}, the stack's",
                         hint="widen requires-python, or set python: in envman.yaml and run `envman lock` again")
    below = [f"{floor.major}.{m}.{p}" for m in range(floor.minor) for p in (0, 99)]
    if not any(spec.contains(v, prereleases=True) for v in below):
        return
    rest = [str(s) for s in spec if not _floor_below(str(s), floor)]
    new = ",".join([f">={floor}"] + sorted(rest))
    project["requires-python"] = new
    changes.append(f"project.requires-python: {new} (was {str(raw)!r}; {target.package} {target.version} has no "
                   f"wheels below Python {floor})")

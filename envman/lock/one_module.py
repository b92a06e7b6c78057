"""One distribution per import package: a lock that holds two distributions installing the same module
(tensorflow beside tensorflow-cpu, opencv-python beside opencv-python-headless) gives an image whose module is a
mixture of two builds, file by file. matrices/one_module.yaml names the families (each verified from the wheels'
file lists). uv cannot see it — to uv they are unrelated names — so the lock is corrected after uv answers: the
distribution the project's inputs name is kept, the others are dropped (an override with a never-true marker, as
uv documents for removing a dependency) and what their dependents asked of them is asked of the kept one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envman.errors import DataError, LockError
from envman.matrix.load import load_tables

FILE = "one_module.yaml"
NEVER = 'sys_platform == "never"'  # an override's marker that no target holds: uv then drops the requirement


@dataclass(frozen=True)
class Family:
    module: str
    distributions: tuple[str, ...]
    interchangeable: bool
    source: str


@dataclass(frozen=True)
class Fix:
    """What a corrected lock asks uv for: overrides that drop distributions, constraints on the kept ones."""

    overrides: tuple[str, ...]
    constraints: tuple[str, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class LoadOrder:
    """``then`` crashes the process when it was loaded before ``first`` (in the versions measured)."""

    first: str
    then: str
    versions: tuple[tuple[str, str], ...]  # (distribution, specifier)
    source: str


def load_families(directory: Path | None = None) -> tuple[Family, ...]:
    return load_tables("one-module", (FILE,), _load, directory)[0]


def load_orders(directory: Path | None = None) -> tuple[LoadOrder, ...]:
    return load_tables("one-module", (FILE,), _load, directory)[1]


def _load(docs: dict[str, Any], digest: str) -> tuple[tuple[Family, ...], tuple[LoadOrder, ...]]:
    return _families(docs[FILE]), _orders(docs[FILE])


def _families(doc: Any) -> tuple[Family, ...]:
    """The validated families, every problem at once."""
    if not isinstance(doc, dict) or doc.get("schema") != 1 or not isinstance(doc.get("families"), dict):
        raise DataError(f"{FILE}: (top): expected schema: 1 and a mapping families: {{module: {{…}}}}",
                        hint="reinstall envman, or undo the local edit")
    problems: list[str] = []
    seen: dict[str, str] = {}
    out = [f for module, row in doc["families"].items() if (f := _family(str(module), row, seen, problems))]
    if problems:
        raise DataError(problems[0] if len(problems) == 1 else f"{len(problems)} problems: " + "; ".join(problems),
                        hint="reinstall envman, or undo the local edit")
    return tuple(out)


def _orders(doc: Any) -> tuple[LoadOrder, ...]:
    out, problems = [], []
    for i, row in enumerate(doc.get("load_order") or []):
        where = f"{FILE}: load_order[{i}]"
        ok = isinstance(row, dict) and all(isinstance(row.get(k), str) and row[k] for k in ("first", "then", "source")) \
            and isinstance(row.get("versions"), dict) and all(isinstance(v, str) for v in row["versions"].values())
        if not ok:
            problems.append(f"{where}: expected first, then, versions {{name: specifier}} and source")
            continue
        try:
            versions = tuple((str(canonicalize_name(k)), str(SpecifierSet(v))) for k, v in row["versions"].items())
        except InvalidSpecifier as exc:
            problems.append(f"{where}.versions: {exc}")
            continue
        out.append(LoadOrder(row["first"], row["then"], versions, row["source"]))
    if problems:
        raise DataError("; ".join(problems), hint="reinstall envman, or undo the local edit")
    return tuple(out)


def order_warnings(versions: dict[str, str], families: tuple[Family, ...], orders: tuple[LoadOrder, ...]) -> list[str]:
    """One line per load-order crash the lock's versions fall in (a family member stands for its module)."""
    alias = {n: f.module for f in families for n in f.distributions}
    held: dict[str, tuple[str, str]] = {}
    for name, version in versions.items():
        held.setdefault(alias.get(name, name), (name, version))
    out = []
    for o in orders:
        if o.first not in held or o.then not in held:
            continue
        if all(_within(held.get(alias.get(n, n), ("", ""))[1], spec) for n, spec in o.versions):
            (fn, fv), (tn, tv) = held[o.first], held[o.then]
            out.append(f"{tn} {tv} loaded before {fn} {fv} crashes the process (the reverse order works; "
                       f"matrices/{FILE}): import {fn} first (torch loads triton with torchvision and torch.compile)")
    return out


def _within(version: str, spec: str) -> bool:
    try:
        return Version(version) in SpecifierSet(spec, prereleases=True)
    except InvalidVersion:  # a URL or VCS pin's version: not what was measured
        return False


def _family(module: str, row: Any, seen: dict[str, str], problems: list[str]) -> Family | None:
    where = f"{FILE}: families.{module}"
    if not isinstance(row, dict):
        problems.append(f"{where}: expected a mapping")
        return None
    problems += [f"{where}.{k}: unknown key" for k in row if k not in ("distributions", "interchangeable", "source")]
    names = row.get("distributions")
    if not isinstance(names, list) or len(names) < 2 or not all(isinstance(n, str) for n in names):
        problems.append(f"{where}.distributions: expected two or more names")
        return None
    for n in names:
        if canonicalize_name(n) != n:
            problems.append(f"{where}.distributions: write the normalized name {canonicalize_name(n)!r}")
        if n in seen:
            problems.append(f"{where}.distributions: {n} is in {seen[n]} too")
        seen[n] = module
    if not isinstance(row.get("interchangeable"), bool):
        problems.append(f"{where}.interchangeable: expected true or false")
    if not isinstance(row.get("source"), str) or not row["source"].strip():
        problems.append(f"{where}.source: missing (every entry cites where it comes from)")
    return Family(module, tuple(names), bool(row.get("interchangeable")), str(row.get("source", "")))


def clashes(versions: dict[str, str], families: tuple[Family, ...]) -> list[tuple[Family, list[str]]]:
    """The families of which the lock (``{name: version}``) holds two or more, with the ones it holds."""
    return [(f, held) for f in families if len(held := [n for n in f.distributions if n in versions]) > 1]


def fix(versions: dict[str, str], via: dict[str, list[str]], inputs: list[str],
        requires: Callable[[str], list[str]], families: tuple[Family, ...]) -> Fix | None:
    """The correction for a lock's clashes, or None when it has none. ``via``: each locked package's parents;
    ``inputs``: the requirement lines asked of uv; ``requires(name)``: a locked package's Requires-Dist (asked
    of the dropped distributions' parents). A clash envman cannot settle — no distribution of the family named by the inputs,
    or several, or a family whose members differ in API — is a LockError naming them all."""
    found = clashes(versions, families)
    if not found:
        return None
    named = {str(canonicalize_name(r.name)) for r in _requirements(inputs)}
    overrides: list[str] = []
    constraints: list[str] = []
    notes: list[str] = []
    for family, held in found:
        kept = [n for n in held if n in named]
        who = "; ".join(f"{n} {versions[n]} ({_brought(n, via)})" for n in held)
        if len(kept) != 1 or not family.interchangeable:
            why = ("their modules differ in API: choose one for the project" if not family.interchangeable
                   else "the requirements name several of them" if kept else "the requirements name none of them")
            raise LockError(f"the lock holds {len(held)} distributions of the module {family.module!r}, which would "
                            f"overwrite each other in the image: {who}; {why}",
                            hint=f"name exactly one of {', '.join(held)} in the project's requirements (envman keeps "
                                 f"that one and drops the others), or pin the packages that pull the others to "
                                 f"releases that do not (matrices/{FILE})")
        for dropped in (n for n in held if n != kept[0]):
            overrides.append(f"{dropped} ; {NEVER}")
            asked = sorted({str(r.specifier) for p in via.get(dropped, []) for r in _requirements(requires(p))
                            if canonicalize_name(r.name) == dropped and str(r.specifier)})
            constraints += [f"{kept[0]}{s}" for s in asked]
            notes.append(f"{dropped} {versions[dropped]} ({_brought(dropped, via)}) installs the module "
                         f"{family.module!r}, as {kept[0]} does, which the project names: {dropped} dropped"
                         + (f", {kept[0]} held to {', '.join(asked)} as its dependents asked of it" if asked else "")
                         + f" (matrices/{FILE}); uv asked again")
    return Fix(tuple(overrides), tuple(constraints), tuple(notes))


def _brought(name: str, via: dict[str, list[str]]) -> str:
    parents = via.get(name) or []
    return "required by " + ", ".join(p if not p.startswith("-r ") else "the project's inputs" for p in parents[:3]) \
        if parents else "required by nothing envman could read"


def _requirements(lines: list[str]) -> list[Requirement]:
    out = []
    for line in lines:
        try:
            out.append(Requirement(line.split(" --hash")[0].strip()))
        except InvalidRequirement:
            continue
    return out

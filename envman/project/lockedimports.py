"""Does the lock provide what the project's code imports? Every module its ``.py`` files import (absolutely, at any
depth of the file) must be the standard library's, the project's own, or a locked distribution's; an image whose
lock misses one passes its smoke test and the training script still stops at its first line (issue 38, class 9:
``requests``, ``packaging``, ``pkg_resources`` after setuptools 82). Warnings only: the code is read, never run.

Which distribution provides a module whose import name is not its own (``yaml`` → pyyaml) is data:
matrices/import_names.yaml, and the frameworks' module lists."""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envman import frameworks
from envman.inputs import read_data
from envman.project.codeimports import module_names, project_sources
from envman.resources import matrix_file

FILE = "import_names.yaml"
SHOWN = 10  # warning lines at most; the rest are counted
_STDLIB = frozenset(sys.stdlib_module_names) | {"__future__", "__main__"}
# a handler that catches a failed import: the code has a fallback, the module is optional
_CATCHES = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
# files the training image does not run: tests (pytest), docs (sphinx), the build script (setuptools)
_NOT_RUN_DIRS = {"test", "tests", "testing", "doc", "docs"}
_NOT_RUN_FILES = {"setup.py", "conftest.py", "noxfile.py"}
_EXTENSION = re.compile(r"Extension\(\s*(?:name\s*=\s*)?[\"']([A-Za-z_][\w.]*)[\"']")


@dataclass(frozen=True)
class Provider:
    distributions: tuple[str, ...]
    removed_in: str | None = None  # the first release of distributions[0] without the module


@dataclass(frozen=True)
class Table:
    modules: dict[str, Provider]
    namespaces: frozenset[str]


def load_table(directory: Path | None = None) -> Table:
    """The table of the matrix in use; of the one envman ships when a matrix copy (ENVMAN_MATRIX_DIR) predates it."""
    return _load_table(matrix_file(FILE, directory))


@lru_cache(maxsize=4)
def _load_table(path: Path) -> Table:
    doc: dict[str, Any] = yaml.safe_load(read_data(path)) or {}
    mods = {str(k): Provider(tuple(canonicalize_name(d) for d in v.get("distributions") or ()),
                             str((v.get("removed_in") or {}).get("version") or "") or None)
            for k, v in (doc.get("modules") or {}).items()}
    for fw in frameworks.registered():  # what the framework plug-ins know (keras: keras, tf-keras or tensorflow)
        for module, dists in fw.modules:
            mods.setdefault(module, Provider(tuple(canonicalize_name(d) for d in dists)))
    return Table(mods, frozenset(doc.get("namespaces") or ()))


@dataclass(frozen=True)
class Import:
    module: str  # as written: a.b.c
    file: str  # relative to the project
    line: int


def project_imports(root: Path, keep) -> tuple[list[Import], set[str]]:
    """(the absolute imports of the project's code whose top-level name ``keep`` accepts — a cheap line scan picks
    the files, ``ast`` reads those — and the names the project's own files and folders make importable)."""
    found: list[Import] = []
    own: set[str] = set()
    for path, text in project_sources(root):
        rel = path.relative_to(root)
        own.update(rel.parts[:-1])
        own.add(path.stem)
        if path.name == "setup.py":
            own.update(m.split(".")[0] for m in _EXTENSION.findall(text))  # a compiled module it builds
        if path.name in _NOT_RUN_FILES or path.name.startswith("test_") or _NOT_RUN_DIRS & set(rel.parts[:-1]):
            continue
        if not any(keep(m) for m in module_names(text)):
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):  # Python 2, not Python, nested past ast's limit
            continue
        found += [Import(m, rel.as_posix(), n) for m, n in _absolute_imports(tree.body, False) if keep(m.split(".")[0])]
    return found, own


def _absolute_imports(nodes, guarded: bool):
    """(module, line) of each absolute import in ``nodes`` not guarded by a handler of ImportError (nor in that
    handler) or by TYPE_CHECKING / a Python-version or platform test."""
    for child in nodes:
        if isinstance(child, ast.Import) and not guarded:
            yield from ((a.name, child.lineno) for a in child.names)
        elif isinstance(child, ast.ImportFrom) and not guarded and child.level == 0 and child.module:
            yield child.module, child.lineno
        elif type(child).__name__ in ("Try", "TryStar"):  # TryStar: except* (Python 3.11)
            yield from _in_try(child, guarded)
        elif isinstance(child, ast.If) and _conditional(child.test):
            yield from _absolute_imports([*child.body, *child.orelse], True)
        else:  # never into an expression: no import is one, and 1+1+…+1 nests deeper than Python's stack
            yield from _absolute_imports([n for n in ast.iter_child_nodes(child) if not isinstance(n, ast.expr)], guarded)


def _in_try(node: Any, guarded: bool):
    # the handler's import is the fallback (``except ImportError: import tomli as tomllib``): optional too
    optional = guarded or any(_catches(h.type) for h in node.handlers)
    yield from _absolute_imports([*node.body, *node.handlers], optional)
    yield from _absolute_imports([*node.orelse, *node.finalbody], guarded)


def _catches(node: ast.expr | None) -> bool:
    if node is None:
        return True
    if isinstance(node, ast.Tuple):
        return any(_catches(e) for e in node.elts)
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return name in _CATCHES


def _conditional(test: ast.expr) -> bool:
    names = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)} | \
        {n.attr for n in ast.walk(test) if isinstance(n, ast.Attribute)}
    return bool(names & {"TYPE_CHECKING", "version_info", "platform", "system"})


def missing_imports(root: Path, locked: dict[str, str], add_to: str, table: Table | None = None) -> list[str]:
    """The warning lines for the modules the code imports and no locked distribution provides (``locked``:
    normalized name → version), at most ``SHOWN`` of them, by file and line. ``add_to``: where a requirement goes."""
    table = table or load_table()
    locked = {canonicalize_name(k): v for k, v in locked.items()}

    def maybe_missing(top: str) -> bool:
        # a leading underscore: a compiled or private module of the project or of a package (torch's _C), no
        # distribution's name
        return top not in _STDLIB and not top.startswith("_") and (top in table.namespaces or _verdict(top, locked, table) is not None)

    imports, own = project_imports(root, maybe_missing)
    first: dict[str, tuple[Import, str]] = {}
    for imp in sorted(imports, key=lambda i: (i.file, i.line, i.module)):
        if imp.module.split(".")[0] in own:
            continue
        key = _key(imp.module, table)
        said = _verdict(key, locked, table)
        if said is not None and key not in first:
            first[key] = (imp, said)
    lines = [f"warning: {imp.file}:{imp.line} imports {key}, {said.format(add_to=add_to)}"
             for key, (imp, said) in sorted(first.items(), key=lambda kv: (kv[1][0].file, kv[1][0].line, kv[0]))]
    if len(lines) > SHOWN:
        lines = lines[:SHOWN] + [f"warning: … and {len(lines) - SHOWN} more modules the code imports that nothing in "
                                 "the lock provides"]
    return lines


def _key(module: str, table: Table) -> str:
    """The name a module is looked up by: its top-level name, or its dotted name under a namespace (google.protobuf)."""
    parts = module.split(".")
    if parts[0] not in table.namespaces:
        return parts[0]
    for n in range(len(parts), 1, -1):
        if ".".join(parts[:n]) in table.modules:
            return ".".join(parts[:n])
    return ".".join(parts[:2])


def _verdict(key: str, locked: dict[str, str], table: Table) -> str | None:
    """None when a locked distribution provides ``key``; else what the warning says after the module's name."""
    top = key.split(".")[0]
    provider = table.modules.get(key)
    if provider is None and top in table.namespaces:
        if any(d.startswith(canonicalize_name(top) + "-") for d in locked):
            return None
        provider = Provider((canonicalize_name(key.replace(".", "-")),))
    if provider is None:
        name = canonicalize_name(key)
        # the usual spellings of a distribution around its module's name (pyyaml, python-dateutil, markdown-it-py):
        # one of them locked is taken to provide it, so a name the table lacks is not a false warning
        if any(n in locked for n in (f"py{name}", f"py-{name}", f"python-{name}", f"{name}-py", f"{name}-python")):
            return None
        provider = Provider((name,))
    if not provider.distributions:
        return None
    dist = provider.distributions[0]
    if provider.removed_in:
        have = locked.get(dist)
        if have is not None and _older(have, provider.removed_in):
            return None
        if have is None:
            return (f"which nothing in the lock provides ({dist} {provider.removed_in} removed it): add "
                    f"`{dist}<{provider.removed_in}` to " "{add_to}")
        return (f"which {dist} {provider.removed_in} removed (the lock holds {dist} {have}): pin "
                f"`{dist}<{provider.removed_in}` in " "{add_to}")
    if any(d in locked for d in provider.distributions):
        return None
    others = ", ".join(f"`{d}`" for d in provider.distributions[1:])
    return (f"which nothing in the lock provides: add `{dist}`" + (f" (or one of {others})" if others else "")
            + " to {add_to}")


def _older(version: str, bound: str) -> bool:
    try:
        return Version(version) < Version(bound)
    except InvalidVersion:
        return True  # a version envman cannot compare: no warning rather than a wrong one

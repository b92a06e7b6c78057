"""setup.py read with ``ast`` (never executed) and setup.cfg read with configparser: install_requires,
python_requires, extras_require. A value computed at run time is reported as unreadable, not guessed."""

from __future__ import annotations

import ast
import configparser
import re
from pathlib import Path

from envman.errors import UsageError
from envman.inputs import MAX_SPEC, read_input
from envman.project.sources import Fate, Found
from envman.project.sources.pyproject import add_python, add_requirement
from envman.project.sources.setup_eval import Unknowable, evaluate

KEYS = ("install_requires", "python_requires", "extras_require")


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(\[[\w,-]+\])?")


class _Unreadable(Exception):
    pass


def _literal(node: ast.AST, names: dict[str, ast.AST], depth: int = 0, lenient: bool = False):
    """A literal, or a module-level name bound to one; anything else is computed. ``lenient``: inside a list or
    dict, an item computed as ``"tensorflow" + version`` is read as its literal name (``tensorflow``: the
    package is known, its version is computed), and a computed item or value is left out."""
    if isinstance(node, ast.Name) and node.id in names and depth < 5:
        return _literal(names[node.id], names, depth + 1, lenient)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        try:
            return _literal(node.left, names, depth + 1) + _literal(node.right, names, depth + 1)
        except _Unreadable:
            left = node.left.value if isinstance(node.left, ast.Constant) else None
            if lenient and isinstance(left, str) and _NAME.fullmatch(left):
                return left
            raise
    if lenient and isinstance(node, (ast.List, ast.Tuple, ast.Dict)):
        return _lenient(node, names, depth)
    try:
        return evaluate(node, names)  # literals, and what the file computes from its own literals (setup_eval.py)
    except Unknowable as exc:
        raise _Unreadable(str(exc)) from None


def _lenient(node: ast.List | ast.Tuple | ast.Dict, names: dict[str, ast.AST], depth: int):
    def item(n: ast.AST):
        try:
            return _literal(n, names, depth + 1, True)
        except _Unreadable:
            return None

    if isinstance(node, ast.Dict):
        pairs = [(k.value, item(v)) for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant)]
        return {k: v for k, v in pairs if v is not None}
    return [v for v in (item(e) for e in node.elts) if v is not None]


def _source(project: Path, rel: str, found: Found) -> str | None:
    """The file's text, bounded (1 MB: a real setup.py or setup.cfg is a few KB), a regular UTF-8 file; else a
    warning that its requirements are not read."""
    try:
        return read_input(project / rel, rel, MAX_SPEC)
    except UsageError as exc:
        found.warnings.append(f"{exc.message}; its requirements are not read")
        return None


def read_setup_py(project: Path, rel: str = "setup.py", wanted: tuple[str, ...] = ()) -> Found:
    found = Found(rel)
    text = _source(project, rel, found)
    if text is None:
        return found
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        found.warnings.append(f"{rel}: cannot be parsed ({exc.__class__.__name__}); its requirements are not read")
        return found
    names: dict[str, ast.AST] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            names[stmt.targets[0].id] = stmt.value
    # setup(...) or setuptools.setup(...)
    call = next((n for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and getattr(n.func, "id", getattr(n.func, "attr", None)) == "setup"), None)
    if call is None:
        found.warnings.append(f"{rel}: no setup(...) call found; its requirements are not read")
        return found
    kw = {k.arg: k.value for k in call.keywords if k.arg in KEYS}
    if any(k.arg is None for k in call.keywords):
        found.warnings.append(f"{rel}: setup(**…) passes keywords computed at run time; only the literal ones are read")
    for key, node in kw.items():
        where = f"{rel} {key}"
        value = _read_keyword(found, node, names, where)
        if value is not None:
            _apply(found, key, value, where, wanted)
    return found


def _read_keyword(found: Found, node: ast.AST, names: dict[str, ast.AST], where: str):
    """The keyword's literal value; when something inside is computed, its literal entries (said); else None."""
    try:
        return _literal(node, names)
    except _Unreadable as exc:
        computed = str(exc)
    try:
        value = _literal(node, names, lenient=True)
    except _Unreadable:
        value = None
    if not value:
        found.fates.append(Fate(where, computed, "dropped", "computed when setup.py runs; envman never runs it — "
                                "list these packages under packages: in envman.yaml"))
        return None
    found.warnings.append(f"{where}: partly computed when setup.py runs ({computed}); its literal entries are read, "
                          "a computed version is left to uv")
    return value


def _apply(found: Found, key: str, value, where: str, wanted: tuple[str, ...]) -> None:
    if key == "python_requires" and isinstance(value, str):
        add_python(found, value, where)
    elif key == "install_requires":
        items = value.splitlines() if isinstance(value, str) else list(value or [])
        for i, d in enumerate(_uncommented(x) for x in items):
            if d:
                add_requirement(found, d, f"{where}[{i}]")
    elif key == "extras_require" and isinstance(value, dict):
        for extra, deps in sorted(value.items()):
            items = deps.splitlines() if isinstance(deps, str) else list(deps or [])
            for i, d in enumerate(_uncommented(x) for x in items):
                if d:
                    add_requirement(found, d, f"{where}.{extra}[{i}]", optional=extra not in wanted)


def _uncommented(item) -> str:
    """A requirement as setuptools reads it: a ``# …`` comment, whole-line or after the requirement, dropped
    (its requirement parser drops comments; CarperAI/trlx@3340c2f writes ``scipy  # fix(bnb): …`` in setup.cfg)."""
    return re.sub(r"(^|\s)#.*$", "", str(item)).strip()


def read_setup_cfg(project: Path, rel: str = "setup.cfg", wanted: tuple[str, ...] = ()) -> Found:
    found = Found(rel)
    cp = configparser.ConfigParser(interpolation=None)
    text = _source(project, rel, found)
    if text is None:
        return found
    try:
        cp.read_string(text)
    except configparser.Error as exc:
        found.warnings.append(f"{rel}: cannot be parsed ({exc.__class__.__name__}); its requirements are not read")
        return found
    if cp.has_option("options", "install_requires"):
        _apply(found, "install_requires", cp.get("options", "install_requires"), f"{rel} options.install_requires", wanted)
    if cp.has_option("options", "python_requires"):
        _apply(found, "python_requires", cp.get("options", "python_requires").strip(), f"{rel} options.python_requires", wanted)
    if cp.has_section("options.extras_require"):
        extras = {k: v for k, v in cp.items("options.extras_require")}
        _apply(found, "extras_require", extras, f"{rel} options.extras_require", wanted)
    return found

"""What of the project itself the image's smoke test imports and runs: its top-level packages (installed, or on
the work directory when it runs from its source) and its console scripts (``--help``). Read from the files, never
by running the project's code: ``[project.scripts]``, ``[tool.poetry.scripts]``, setup.py's
``entry_points={"console_scripts": [...]}`` (ast) and setup.cfg's ``[options.entry_points]``. And its own name,
which its requirements may list (``without_own``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from packaging.utils import canonicalize_name

from envman.project.files import setup_cfg, setup_py_tree
from envman.project.req import Req

# folders a project keeps beside its packages, never its importable code (setuptools' flat-layout exclusions
# hold the same names: matrices/build_backends.yaml)
_NOT_CODE = {"test", "tests", "doc", "docs", "example", "examples", "script", "scripts", "tool", "tools", "benchmark",
             "benchmarks", "build", "dist", "notebooks", "demo", "demos", "assets", "data", "configs", "ci", "bin"}


def top_level_packages(root: Path) -> list[str]:
    """The importable top-level packages of the source tree: folders with an ``__init__.py`` at the top or under
    ``src/``, without tests/docs/examples/tools. Sorted; empty when the project has none."""
    found: set[str] = set()
    for base in (root, root / "src"):
        if not base.is_dir():
            continue
        for p in base.iterdir():
            if p.is_dir() and p.name.isidentifier() and not p.name.startswith(("_", ".")) \
                    and p.name.lower() not in _NOT_CODE and (p / "__init__.py").is_file():
                found.add(p.name)
    return sorted(found)


def distribution_name(root: Path, doc: dict | None) -> str | None:
    """The project's distribution name: ``[project] name``, ``[tool.poetry] name``, setup.cfg's or setup.py's
    literal ``name=``; None when none is written down."""
    doc = doc or {}
    for name in ((doc.get("project") or {}).get("name"), (((doc.get("tool") or {}).get("poetry") or {}).get("name"))):
        if isinstance(name, str) and name.strip():
            return name.strip()
    cp = setup_cfg(root)
    if cp is not None and cp.has_option("metadata", "name"):
        return cp.get("metadata", "name").strip() or None
    tree = setup_py_tree(root)
    if tree is None:
        return None
    return next((n.value.value for n in ast.walk(tree) if isinstance(n, ast.keyword) and n.arg == "name"
                 and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)), None)


def without_own(root: Path, doc: dict | None, reqs: list[Req]) -> tuple[list[Req], list[str]]:
    """(the requirements without the project's own name, a warning per line left out). A project that lists its
    own distribution (``myproj`` in requirements.txt beside a pyproject.toml named myproj) names itself, whose
    source the image already holds: locked from PyPI it would be someone else's release, or none (issue 38). A line
    with a URL or extras of its own names something else (a fork, ``myproj[train]``) and is kept."""
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


def console_scripts(root: Path, doc: dict | None) -> list[str]:
    """The console scripts the project declares (sorted, unique)."""
    names: set[str] = set()
    doc = doc or {}
    for table in (((doc.get("project") or {}).get("scripts")), (((doc.get("tool") or {}).get("poetry") or {}).get("scripts"))):
        if isinstance(table, dict):
            names.update(k for k in table if isinstance(k, str))
    names.update(_setup_py_scripts(root))
    names.update(_setup_cfg_scripts(root))
    return sorted(n for n in names if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", n))


def _setup_py_scripts(root: Path) -> list[str]:
    tree = setup_py_tree(root)
    if tree is None:
        return []
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "entry_points":
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue
            lines = value.get("console_scripts", []) if isinstance(value, dict) else []
            lines = lines.splitlines() if isinstance(lines, str) else lines
            out += [str(x).split("=")[0].strip() for x in lines if "=" in str(x)]
    return out


def _setup_cfg_scripts(root: Path) -> list[str]:
    cp = setup_cfg(root)
    if cp is None or not cp.has_option("options.entry_points", "console_scripts"):
        return []
    return [ln.split("=")[0].strip() for ln in cp.get("options.entry_points", "console_scripts").splitlines() if "=" in ln]

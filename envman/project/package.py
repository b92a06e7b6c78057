"""Is the project itself a Python package the image should install, and what does building it need?

A package: a pyproject.toml with ``[build-system]``, or a setup.py (PEP 517's fallback: setuptools) — and a tree its
build backend will build. A setuptools project that names no packages is discovered by setuptools itself, which
refuses a "flat layout" with several top-level packages (a detection repository with ``models/``, ``data/``,
``cfg/`` beside ``train.py``); hatchling refuses a project with no folder named after it. Such a repository is
run from its source tree instead (``backend_refusal`` says why, from matrices/build_backends.yaml).
Its build backend is added to the lock (hash-checked, installed with the locked layers), so the project
installs with ``--no-build-isolation --no-index``: offline, and with no unpinned download.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from envman.errors import UsageError
from envman.inputs import read_data
from envman.project.backend_requires import backend_requires
from envman.project.compiled import Compiled, compiled_code
from envman.project.files import setup_cfg, setup_py_tree
from envman.project.sources.pyproject import read_pyproject
from envman.resources import matrix_dir

# PEP 517: "If the pyproject.toml file is absent, or the build-backend key is missing, the source tree is
# not using this specification, and tools should revert to the legacy behaviour of running setup.py"
# (pip: setuptools>=40.8.0 through its __legacy__ backend).
LEGACY_BUILD_REQUIRES = ("setuptools>=40.8.0", "wheel")  # PEP 518's default: setuptools < 70.1 needs wheel


@dataclass(frozen=True)
class ProjectPackage:
    kind: str  # "pyproject" | "setup.py"
    build_requires: tuple[str, ...]
    extras: tuple[str, ...]  # optional-dependencies asked for by envman.yaml
    extra_requires: tuple[str, ...]  # their requirements (locked like any other)
    files: tuple[str, ...]  # what decides it: part of the lock's inputs
    compiled: Compiled | None = None  # what it compiles when built (then built in the builder stage)
    # what its backend asks for beyond build_requires (setup_requires, hatch build-hook dependencies), and where said:
    # those the lock does not hold make the builder stage build it (envman/project/backend_requires.py)
    backend_requires: tuple[str, ...] = ()
    backend_source: str = ""


def _backends() -> dict:
    import yaml

    return yaml.safe_load(read_data(matrix_dir() / "build_backends.yaml")) or {}


def _setup_py_configures(root: Path) -> bool:
    """setup.py passes packages, py_modules, package_dir or ext_modules (any value: setuptools then does not
    discover), or keywords computed at run time (**kwargs: envman cannot tell, and trusts it)."""
    tree = setup_py_tree(root)
    if tree is None:
        return True
    keys = {"packages", "py_modules", "package_dir", "ext_modules"}
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and getattr(n.func, "id", getattr(n.func, "attr", None)) == "setup"]
    return not calls or any(k.arg is None or k.arg in keys for c in calls for k in c.keywords)


def _setup_cfg_configures(root: Path) -> bool:
    cp = setup_cfg(root)
    if cp is None:
        return True
    return any(cp.has_option("options", k) for k in ("packages", "py_modules", "package_dir"))


def _flat_layout_refusal(root: Path, rules: dict) -> str | None:
    def kept(name: str, excluded: list[str]) -> bool:
        return name.isidentifier() and not name.startswith((".", "_")) and not any(
            fnmatch.fnmatchcase(name, x) for x in excluded)

    dirs = sorted(p.name for p in root.iterdir() if p.is_dir() and kept(p.name, rules.get("excluded_packages", [])))
    if len(dirs) > 1:
        return f"setuptools refuses its flat layout: several top-level packages ({', '.join(dirs)})"
    if dirs:
        return None
    mods = sorted(p.stem for p in root.glob("*.py") if p.is_file() and kept(
        p.stem, rules.get("excluded_modules", []) + rules.get("excluded_module_patterns", [])))
    if len(mods) > 1:
        return f"setuptools refuses its flat layout: several top-level modules ({', '.join(mods[:6])}" + \
            (" …)" if len(mods) > 6 else ")")
    return None


def _hatch_refusal(root: Path, doc: dict) -> str | None:
    hatch = ((doc.get("tool") or {}).get("hatch") or {}).get("build") or {}
    wheel = (hatch.get("targets") or {}).get("wheel") or {}
    if any(table.get(k) for table in (wheel, hatch) for k in ("include", "packages", "only-include", "force-include")):
        return None
    name = str((doc.get("project") or {}).get("name") or "")
    names = {re.sub(r"[^\w\d.]+", "_", n) for n in (name, name.lower().replace("-", "_").replace(".", "_")) if n}
    for n in names:
        if (root / n / "__init__.py").is_file() or (root / "src" / n / "__init__.py").is_file() \
                or (root / f"{n}.py").is_file() or len(list(root.glob(f"*/{n}/__init__.py"))) == 1:
            return None
    return f"hatchling finds no folder or module named after the project ({' or '.join(sorted(names)) or 'no name'})"


def _backend(root: Path, doc: dict) -> str | None:
    """The PEP 517 backend that builds the project (setuptools' legacy one for a setup.py or a bare table)."""
    bs = doc.get("build-system") if isinstance(doc.get("build-system"), dict) else None
    has_setup = (root / "setup.py").is_file()
    return (bs or {}).get("build-backend") or ("setuptools.build_meta:__legacy__" if has_setup or bs else None)


def backend_refusal(root: Path, doc: dict | None = None) -> str | None:
    """Why the project's build backend will refuse to build it (None: it builds, or envman cannot tell)."""
    doc = doc if doc is not None else (read_pyproject(root) or {})
    has_setup = (root / "setup.py").is_file()
    backend = _backend(root, doc)
    rules = _backends()
    if backend in (rules.get("hatchling") or {}).get("backends", []):
        return _hatch_refusal(root, doc)
    if backend not in (rules.get("setuptools") or {}).get("backends", []):
        return None
    st = (doc.get("tool") or {}).get("setuptools") or {}
    if any(k in st for k in ("packages", "py-modules", "package-dir")) or (root / "src").is_dir():
        return None
    if has_setup and _setup_py_configures(root) or (root / "setup.cfg").is_file() and _setup_cfg_configures(root):
        return None
    return _flat_layout_refusal(root, rules["setuptools"])


def find_package(root: Path, extras: tuple[str, ...] = ()) -> ProjectPackage | None:
    """The project as a package its build backend builds; None when it is not a package, or when the backend
    would refuse its tree (``backend_refusal``): it then runs from its source."""
    doc = read_pyproject(root) or {}
    pyproject = isinstance(doc.get("build-system"), dict)
    if not (pyproject or (root / "setup.py").is_file()) or backend_refusal(root, doc):
        return None
    files = tuple(f for f in ("pyproject.toml", "setup.py", "setup.cfg") if (root / f).is_file())
    reqs, kind = (doc["build-system"].get("requires", []), "pyproject") if pyproject else (
        list(LEGACY_BUILD_REQUIRES), "setup.py")
    if not isinstance(reqs, list) or not all(isinstance(r, str) for r in reqs):
        raise UsageError("pyproject.toml: build-system.requires: expected a list of requirements",
                         hint='e.g. requires = ["setuptools>=61", "wheel"]')
    for r in reqs:
        try:
            Requirement(r)
        except InvalidRequirement as exc:
            raise UsageError(f"pyproject.toml: build-system.requires: {r!r} is not valid ({str(exc).splitlines()[0]})",
                             hint="one PEP 508 requirement per entry, e.g. setuptools>=61") from None
    extra_reqs: list[str] = []
    optional = (doc.get("project") or {}).get("optional-dependencies") or {}
    for e in extras:
        if e not in optional:
            raise UsageError(f"install_project: extra {e!r} is not in pyproject.toml [project.optional-dependencies]",
                             hint="extras there: " + (", ".join(sorted(optional)) or "none"))
        extra_reqs.extend(optional[e])
    backend, rules = _backend(root, doc), _backends()
    asked, where = backend_requires(root, doc, backend, rules)
    build = tuple(reqs)
    if any(r.get("builder_only") and backend in r.get("backends", []) for r in rules.values()
           if isinstance(r, dict)):  # a whole tool as the backend (poetry): the builder stage only, never the image
        build, asked, where = (), (*reqs, *asked), "its build backend, a whole tool (matrices/build_backends.yaml)"
    return ProjectPackage(kind, build, tuple(extras), tuple(extra_reqs), files, compiled_code(root, tuple(reqs)),
                          asked, where)

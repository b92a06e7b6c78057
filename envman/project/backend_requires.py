"""What the project's build backend asks for beyond ``[build-system] requires`` — PEP 517's
``get_requires_for_build_wheel`` — read from its files, never by running them.

setuptools returns ``setup_requires`` (setup.py's literal list, setup.cfg's ``[options] setup_requires``), and
its ``setup()`` fetches whichever of them is not installed, from an index, with easy_install; hatchling returns the
``dependencies`` of the wheel target and of its build hooks. envman installs the project ``--no-build-isolation
--no-index``, so the backend asks no frontend: a requirement the image's lock does not hold fails the build in the
image's last step (Real-ESRGAN: ``setup_requires=['cython', 'numpy']``, Cython not locked, no index there). Such a
project is built into a wheel in the builder stage with them (``unmet``); they never reach the image.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion

from envman.project.files import setup_cfg, small_text
from envman.project.req import holds


def setup_requires(text: str | None) -> tuple[str, ...]:
    """setup.py's literal ``setup_requires=[...]`` (read with ast, never run): setuptools' backend asks for them
    before it builds (get_requires_for_build_wheel), which a build without isolation must install beforehand
    (wavedrom versions itself with setuptools_scm this way: without it, its metadata says 0.0.0)."""
    try:
        tree = ast.parse(text or "")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "setup_requires":
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, RecursionError):
                return ()
            items = [value] if isinstance(value, str) else value if isinstance(value, (list, tuple)) else []
            return tuple(str(x).strip() for x in items if str(x).strip())
    return ()


def _setup_cfg_requires(root: Path) -> tuple[str, ...]:
    """setup.cfg ``[options] setup_requires``: one per line, or comma-separated on one (setuptools' list rule)."""
    cp = setup_cfg(root)
    if cp is None or not cp.has_option("options", "setup_requires"):
        return ()
    value = cp.get("options", "setup_requires")
    items = value.splitlines() if "\n" in value.strip() else value.split(",")
    return tuple(s.strip() for s in items if s.strip() and not s.strip().startswith("#"))


def _hatch_requires(doc: Mapping) -> tuple[str, ...]:
    """hatchling's WheelBuilder ``config.dependencies``: the wheel target's ``dependencies`` and those of the
    build hooks (``[tool.hatch.build.hooks.*]``, ``[tool.hatch.build.targets.wheel.hooks.*]``)."""
    build = ((doc.get("tool") or {}).get("hatch") or {}).get("build") or {}
    wheel = (build.get("targets") or {}).get("wheel") or {}
    tables = [wheel, *(build.get("hooks") or {}).values(), *(wheel.get("hooks") or {}).values()]
    out: list[str] = []
    for t in tables:
        deps = t.get("dependencies") if isinstance(t, dict) else None
        out += [str(d) for d in deps if isinstance(d, str)] if isinstance(deps, list) else []
    return tuple(out)


def backend_requires(root: Path, doc: Mapping, backend: str | None, rules: Mapping) -> tuple[tuple[str, ...], str]:
    """(what the backend asks for beyond [build-system] requires, where it is said); only valid requirements."""
    if backend in (rules.get("setuptools") or {}).get("backends", []):
        found = [(setup_requires(small_text(root, "setup.py")), "its setup.py's setup_requires"),
                 (_setup_cfg_requires(root), "its setup.cfg's setup_requires")]
    elif backend in (rules.get("hatchling") or {}).get("backends", []):
        found = [(_hatch_requires(doc), "its [tool.hatch.build] dependencies")]
    else:
        return (), ""
    reqs = tuple(r for rs, _ in found for r in rs if _valid(r))
    return reqs, " and ".join(where for rs, where in found if rs)


def unmet(reqs: tuple[str, ...], locked: Mapping[str, str], env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The requirements no locked version satisfies (name absent, or its version outside the specifier): the image
    installs the project offline, so those would be fetched, and fail. ``locked``: name → version; ``env``: the
    target's marker environment (a requirement whose marker is false there is not asked for)."""
    have = {canonicalize_name(n): v for n, v in locked.items()}
    out = []
    for r in reqs:
        req = Requirement(r)
        if env is not None and not holds(req.marker, dict(env)):
            continue
        v = have.get(canonicalize_name(req.name))
        try:
            ok = v is not None and req.specifier.contains(v, prereleases=True)
        except InvalidVersion:
            ok = False
        if not ok:
            out.append(r)
    return tuple(out)


def _valid(r: str) -> bool:
    try:
        Requirement(r)
    except InvalidRequirement:
        return False
    return True

"""pyproject.toml read once, with the tables envman reads checked (``read_pyproject``); its ``[project]``
(dependencies, optional-dependencies, requires-python) and PEP 735 ``[dependency-groups]``. Poetry's tables are
read by ``poetry.py``."""

from __future__ import annotations

from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from envman.errors import UsageError
from envman.inputs import MAX_SPEC, WrittenFloat, present, read_input
from envman.project.req import Req
from envman.project.sources import Fate, Found

FILE = "pyproject.toml"
OPTIONAL = "an optional extra or group; name it under packages: in envman.yaml to install it"
# the tables envman reads, and the shape each must have: `project = 'x'` is one error line, not a crash
_SHAPES = (("project", dict), ("tool", dict), ("tool.poetry", dict), ("tool.envman", dict),
           ("project.optional-dependencies", dict), ("dependency-groups", dict), ("project.dependencies", list))


def read_pyproject(project: Path) -> dict | None:
    """pyproject.toml as a dict; None when there is none; a UsageError naming the file when it is invalid."""
    pp = project / FILE
    if not present(pp):  # a FIFO or a link loop there is named as such (read_input), never "no pyproject"
        return None
    from envman._compat import tomllib

    text = read_input(pp, FILE, MAX_SPEC)
    try:
        # a number keeps its text: `python = 3.10` in [tool.envman] is refused as in envman.yaml, never read as 3.1
        doc = tomllib.loads(text, parse_float=lambda s: WrittenFloat(float(s), s))
    except RecursionError:
        raise UsageError("pyproject.toml: nested too deeply", hint="fix the file") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"pyproject.toml: invalid TOML: {exc}", hint="fix the file, or put envman's keys in envman.yaml") from None
    for dotted, shape in _SHAPES:
        node: object = doc
        for part in dotted.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None and not isinstance(node, shape):
            raise UsageError(f"pyproject.toml: {dotted}: expected {'a table' if shape is dict else 'an array'}, got "
                             f"{type(node).__name__}", hint="fix the file")
    return doc


def add_requirement(found: Found, text: str, where: str, *, optional: bool = False) -> None:
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise UsageError(f"{where}: {text!r} is not a valid requirement ({str(exc).splitlines()[0]})", hint="one PEP 508 requirement per entry") from None
    if optional:
        found.fates.append(Fate(where, text, "dropped", OPTIONAL))
        found.optional.append(Req(req, where))
        return
    found.reqs.append(Req(req, where, raw=text if req.url else None))
    found.fates.append(Fate(where, text, "kept"))


def add_python(found: Found, text: str, where: str) -> None:
    try:
        found.python.append((where, SpecifierSet(text)))
    except InvalidSpecifier:
        found.warnings.append(f"{where}: {text!r} is not a Python version specifier (ignored)")


def read_pyproject_project(doc: dict, wanted_groups: tuple[str, ...] = (), dynamic_read: list[str] | None = None) -> Found:
    """``dynamic_read``: the files [tool.setuptools.dynamic] names for the dependencies, read beside it."""
    found = Found(FILE)
    proj = doc.get("project") or {}
    for i, d in enumerate(proj.get("dependencies") or []):
        add_requirement(found, d, f"{FILE} project.dependencies[{i}]")
    for key, table in (("project.optional-dependencies", proj.get("optional-dependencies")),
                       ("dependency-groups", doc.get("dependency-groups"))):
        for name, deps in sorted((table or {}).items()):
            for i, d in enumerate(deps or []):
                if isinstance(d, dict) and key == "dependency-groups":  # {include-group = "…"}
                    found.fates.append(Fate(f"{FILE} {key}.{name}[{i}]", str(d), "kept",
                                            "an include of another group (read with it)"))
                else:
                    add_requirement(found, d, f"{FILE} {key}.{name}[{i}]", optional=name not in wanted_groups)
    if isinstance(proj.get("requires-python"), str):
        add_python(found, proj["requires-python"], f"{FILE} project.requires-python")
    if "dependencies" in (proj.get("dynamic") or []) and not dynamic_read:
        found.warnings.append(f"{FILE}: project.dependencies is dynamic (computed by the build backend); "
                              "envman reads the files it names only if they are requirements*.txt")
    return found

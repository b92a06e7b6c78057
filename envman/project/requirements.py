"""Read a project's Python requirements: requirements*.txt, pyproject.toml, environment.yml.

The framework (torch / tensorflow) and its companions are pulled out of the list: envman pins them to
the exact build the resolver chose; everything else goes to uv as written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from envman import frameworks
from envman.errors import UsageError
from envman.inputs import WrittenFloat, present
from envman.lock.layout import StackFiles
from envman.project.req import Req  # noqa: F401  (re-exported: the lock and pins read it from here)

OWN_FILES = (StackFiles().req, StackFiles().fw)  # envman's own, never read as requirements


def read_requirements_file(project: Path, rel: str, _seen: set[Path] | None = None) -> list[Req]:
    """pip's requirements format, read by envman.project.sources.requirements_txt (includes, VCS and
    editable lines, index options); the requirements to lock."""
    from envman.project.sources.requirements_txt import read_requirements

    return read_requirements(project, rel, _seen=_seen).reqs


def read_pyproject(project: Path) -> dict | None:
    """pyproject.toml as a dict; None when there is none; a UsageError naming the file when it is invalid."""
    from envman.inputs import MAX_SPEC, read_input

    pp = project / "pyproject.toml"
    if not present(pp):  # a FIFO or a link loop there is named as such (read_input), never "no pyproject"
        return None
    from envman._compat import tomllib

    text = read_input(pp, "pyproject.toml", MAX_SPEC)
    try:
        # a number keeps its text: `python = 3.10` in [tool.envman] is refused as in envman.yaml, never read as 3.1
        doc = tomllib.loads(text, parse_float=lambda s: WrittenFloat(float(s), s))
    except RecursionError:
        raise UsageError("pyproject.toml: nested too deeply", hint="fix the file") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"pyproject.toml: invalid TOML: {exc}", hint="fix the file, or put envman's keys in envman.yaml") from None
    _require_tables(doc, ("project", "tool", "tool.poetry", "tool.envman", "project.optional-dependencies",
                          "dependency-groups"))
    _require_lists(doc, ("project.dependencies",))
    return doc


def _walk(doc: dict, dotted: str):
    node: object = doc
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _require_tables(doc: dict, keys: tuple[str, ...]) -> None:
    """The tables envman reads must be tables: `project = 'x'` is one error line, not a crash."""
    for k in keys:
        v = _walk(doc, k)
        if v is not None and not isinstance(v, dict):
            raise UsageError(f"pyproject.toml: {k}: expected a table, got {type(v).__name__}", hint="fix the file")


def _require_lists(doc: dict, keys: tuple[str, ...]) -> None:
    for k in keys:
        v = _walk(doc, k)
        if v is not None and not isinstance(v, list):
            raise UsageError(f"pyproject.toml: {k}: expected an array, got {type(v).__name__}", hint="fix the file")


@dataclass(frozen=True)
class Discovered:
    requirement_files: tuple[str, ...]
    packages: tuple[str, ...]  # from pyproject / environment.yml (files are referenced, not copied)
    framework: str | None  # e.g. "torch>=2.3"
    companions: tuple[str, ...]
    python: str | None
    found_in: tuple[str, ...]


def discover(project: Path) -> Discovered:
    """What `envman init` learns from a repository without being told."""
    files = sorted(
        p.name for p in project.glob("requirements*.txt") if not p.is_dir() and p.name not in OWN_FILES
    )
    reqs: list[Req] = []
    for f in files:
        reqs.extend(read_requirements_file(project, f))
    packages: list[str] = []
    found = list(files)
    python = None
    doc = read_pyproject(project)
    if doc is not None:
        proj = doc.get("project", {})
        deps = proj.get("dependencies", []) or []
        for i, d in enumerate(deps):
            try:
                r = Req(Requirement(d), f"pyproject.toml dependencies[{i}]")
            except InvalidRequirement as exc:
                raise UsageError(f"pyproject.toml: project.dependencies[{i}]: {d!r} is not valid ({exc})") from None
            reqs.append(r)
            packages.append(d)
        if deps:
            found.append("pyproject.toml")
        rp = proj.get("requires-python")
        if isinstance(rp, str):
            python = rp
    env = project / "environment.yml"
    if not present(env):
        env = project / "environment.yaml"
    if present(env):
        from envman.project.sources.conda import conda_document

        doc = conda_document(project, env.name)
        for dep in doc.get("dependencies", []) or []:
            if isinstance(dep, dict) and isinstance(dep.get("pip"), list):
                for i, d in enumerate(dep["pip"]):
                    if isinstance(d, str) and not d.startswith("-"):
                        try:
                            reqs.append(Req(Requirement(d), f"{env.name} pip[{i}]"))
                            packages.append(d)
                        except InvalidRequirement:
                            raise UsageError(f"{env.name}: dependencies.pip[{i}]: {d!r} is not a valid requirement") from None
            elif isinstance(dep, str) and dep.split("=")[0].strip() == "python" and "=" in dep:
                python = python or dep.split("=", 1)[1].strip("= ")
        found.append(env.name)
    dists, companions = frameworks.by_distribution(), frameworks.companions()
    fw, comps = None, []
    for r in reqs:
        if r.name in dists:
            spec = str(r.req.specifier)
            fw_name = dists[r.name]
            fw = f"{fw_name}{spec}" if fw is None or fw == fw_name else fw
        elif r.name in companions and r.name not in comps:
            comps.append(r.name)
    rest = [p for p in packages if canonicalize_name(Requirement(p).name) not in dists and canonicalize_name(Requirement(p).name) not in companions]
    return Discovered(tuple(files), tuple(rest), fw, tuple(comps), python, tuple(found))

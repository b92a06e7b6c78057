"""pyproject.toml read once, with the tables envman reads checked (project/discover.py, the package's facts);
``OWN_FILES``, envman's own requirement files, which discovery never reads as the project's; ``Req`` re-exported.
"""

from __future__ import annotations

from pathlib import Path

from envman.errors import UsageError
from envman.inputs import WrittenFloat, present
from envman.lock.layout import StackFiles
from envman.project.req import Req  # noqa: F401  (re-exported: the lock and pins read it from here)

OWN_FILES = (StackFiles().req, StackFiles().fw)  # envman's own, never read as requirements


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

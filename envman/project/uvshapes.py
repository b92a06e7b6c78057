"""The shapes ``envman uv write`` reads in a pyproject.toml, checked before anything is edited.

pyproject.toml is the user's file: ``tool.uv.sources = [1, 2]`` or ``dependencies = 5`` parse as TOML, and an
edit that trusted them would write into a list or fail inside tomlkit. Each key the edit reads or writes has
the shape uv's settings reference gives it; one that has another is refused, naming the dotted key.
"""

from __future__ import annotations

from typing import Any, Callable

import tomlkit

from envman.errors import UsageError

FILE = "pyproject.toml"
HINT = "fix the file: uv reads the same keys (https://docs.astral.sh/uv/reference/settings/)"

# dotted key → its shape; "*" stands for every key of the table above it
SHAPES: tuple[tuple[str, str], ...] = (
    ("project", "table"),
    ("project.requires-python", "string"),
    ("project.dependencies", "array of strings"),
    ("project.optional-dependencies", "table"),
    ("project.optional-dependencies.*", "array of strings"),
    ("dependency-groups", "table"),
    ("dependency-groups.*", "array"),
    ("tool", "table"),
    ("tool.uv", "table"),
    ("tool.uv.sources", "table"),
    ("tool.uv.sources.*", "table or array of tables"),
    ("tool.uv.index", "array of tables"),
    ("tool.uv.index.*.name", "string"),
    ("tool.uv.index.*.url", "string"),
    ("tool.uv.index.*.explicit", "boolean"),
    ("tool.uv.index.*.default", "boolean"),
    ("tool.uv.constraint-dependencies", "array of strings"),
)


def _array_of(kind: type) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, list) and all(isinstance(x, kind) for x in v)


_IS: dict[str, Callable[[Any], bool]] = {
    "table": lambda v: isinstance(v, dict), "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool), "array": lambda v: isinstance(v, list),
    "array of strings": _array_of(str), "array of tables": _array_of(dict),
    "table or array of tables": lambda v: isinstance(v, dict) or _array_of(dict)(v),
}


def _values(doc: Any, path: list[str], at: str = "") -> list[tuple[str, Any]]:
    """(dotted key, value) of every value at ``path`` ('*': each key of a table, each entry of an array)."""
    if not path:
        return [(at, doc)]
    head, rest = path[0], path[1:]
    if head == "*":
        items = list(doc.items()) if isinstance(doc, dict) else list(enumerate(doc)) if isinstance(doc, list) else []
        return [v for k, sub in items for v in _values(sub, rest, f"{at}.{k}" if isinstance(k, str) else f"{at}[{k}]")]
    if not isinstance(doc, dict) or head not in doc:
        return []
    return _values(doc[head], rest, f"{at}.{head}" if at else head)


def _shown(value: Any) -> str:
    try:
        text = tomlkit.item(value).as_string()
    except Exception:  # noqa: BLE001 - what cannot be shown is described by its type
        text = type(value).__name__
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


def check_shapes(doc: Any) -> None:
    """Raise UsageError naming the first key whose value has another shape than uv gives it."""
    for key, shape in SHAPES:
        for where, value in _values(doc, key.split(".")):
            if _IS[shape](value):
                continue
            said = f"{where} is a table, not" if isinstance(value, dict) else f"{where} = {_shown(value)} is not"
            raise UsageError(f"{FILE}: {said} {'an' if shape[0] in 'aeiou' else 'a'} {shape}", hint=HINT)

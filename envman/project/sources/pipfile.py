"""Pipenv's ``Pipfile`` (TOML): ``[packages]`` are the project's requirements, ``[dev-packages]`` an optional group,
``[requires] python_version`` its Python, ``[[source]]`` its indexes (PyPI's is the default; a PyTorch index is
replaced by the chosen variant's, as in a requirements file). Pipenv's documented value forms: ``"*"``,
``"==1.2"``, ``{version = …, extras = […], markers = …, index = …}``, ``{git = …, ref = …}``, ``{path = …}``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from envman.errors import UsageError
from envman.inputs import MAX_SPEC, read_input
from envman.project.sources import Fate, Found
from envman.project.sources.pyproject import add_python, add_requirement
from envman.project.sources.requirements_txt import FRAMEWORK_INDEX_HOSTS

FILE = "Pipfile"


def _text(name: str, value) -> tuple[str | None, str]:
    """(PEP 508 text, or None when it cannot be locked by name; why)."""
    if isinstance(value, str):
        return (name if value.strip() in ("", "*") else f"{name}{value.strip()}"), ""
    if not isinstance(value, dict):
        return None, f"unreadable value {value!r}"
    if "path" in value or "file" in value:
        return None, f"local path {value.get('path') or value.get('file')}: part of the repository's source, not lockable"
    extras = f"[{','.join(value['extras'])}]" if isinstance(value.get("extras"), list) and value["extras"] else ""
    marker = f"; {value['markers']}" if isinstance(value.get("markers"), str) else ""
    if isinstance(value.get("git"), str):
        ref = f"@{value['ref']}" if isinstance(value.get("ref"), str) else ""
        return f"{name}{extras} @ git+{value['git'].removeprefix('git+')}{ref}{marker}", ""
    version = value.get("version", "*")
    spec = "" if not isinstance(version, str) or version.strip() in ("", "*") else version.strip()
    return f"{name}{extras}{spec}{marker}", ""


def read_toml_file(root: Path, name: str, shapes: dict[str, type] | None = None) -> Any:
    """A TOML dependency file at the repository's top (Pipfile, pixi.toml) as a document (None when absent), one error when it is
    not TOML, or a key of ``shapes`` is not of its type (a table: dict, an array: list)."""
    path = root / name
    if not path.is_file():
        return None
    from envman._compat import tomllib

    hint = "fix the file, or write envman.yaml with packages:"
    try:
        doc = tomllib.loads(read_input(path, name, MAX_SPEC))
    except (tomllib.TOMLDecodeError, RecursionError) as exc:  # RecursionError: arrays nested 50,000 deep
        raise UsageError(f"{name}: invalid TOML: {exc}", hint=hint) from None
    for key, shape in (shapes or {}).items():
        if doc.get(key) is not None and not isinstance(doc[key], shape):
            raise UsageError(f"{name}: {key}: expected {'a table' if shape is dict else 'an array'}, got "
                             f"{type(doc[key]).__name__}", hint=hint)
    return doc


def read_pipfile(root: Path, wanted: tuple[str, ...] = ()) -> Found | None:
    doc = read_toml_file(root, FILE, {"source": list})
    if doc is None:
        return None
    found = Found(FILE)
    _read_sections(doc, wanted, found)
    requires = doc.get("requires") or {}
    py = requires.get("python_version") if isinstance(requires, dict) else None
    full = requires.get("python_full_version") if isinstance(requires, dict) else None
    if isinstance(py, str) or isinstance(full, str):
        minor = ".".join(str(py or full).split(".")[:2])
        add_python(found, f"=={minor}.*", f"{FILE} requires.python_{'version' if py else 'full_version'}")
    _read_sources(doc, found)
    return found


def _read_sections(doc: dict, wanted: tuple[str, ...], found: Found) -> None:
    for section, optional in (("packages", False), ("dev-packages", "dev" not in wanted)):
        table = doc.get(section) or {}
        if not isinstance(table, dict):
            raise UsageError(f"{FILE}: [{section}]: expected a table of name = version", hint="fix the file")
        for name, value in table.items():
            where = f"{FILE} {section}.{name}"
            text, why = _text(name, value)
            if text is None:
                found.fates.append(Fate(where, str(value), "dropped", why))
            else:
                add_requirement(found, text, where, optional=bool(optional))


def _read_sources(doc: dict, found: Found) -> None:
    """[[source]]: PyPI is the default; a PyTorch index is replaced by the variant's; others are extra indexes."""
    for i, source in enumerate(doc.get("source") or []):
        url = source.get("url") if isinstance(source, dict) else None
        if not isinstance(url, str) or "pypi.org/simple" in url:
            continue
        where = f"{FILE} source[{i}]"
        if any(h in url for h in FRAMEWORK_INDEX_HOSTS):
            found.fates.append(Fate(where, url, "dropped", "replaced by envman's framework index for the chosen variant"))
        else:
            found.index_urls.append((where, url))
            found.fates.append(Fate(where, url, "kept", "extra index passed to uv for the other packages"))

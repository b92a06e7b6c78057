"""Reading a user's input file safely: a regular file only (a FIFO would block forever), within a size
bound, UTF-8; YAML through the C loader when there is one, refusing duplicate keys and nesting too deep to
build; JSON the same. Every refusal is one UsageError (or the caller's subclass) naming the file."""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path
from typing import Any

from envman.errors import UsageError

KIB = 1024
MIB = 1024 * KIB
MAX_SPEC = 1 * MIB  # envman.yaml, environment.yml, pyproject.toml
MAX_REQUIREMENTS = 5 * MIB  # a requirements file, each -r/-c include
MAX_FACTS = 5 * MIB  # a doctor facts file
MAX_VALUE = 4 * KIB  # one string value of envman.yaml (env values, command words, …)
MAX_DATA = 8 * MIB  # a matrix file (ENVMAN_MATRIX_DIR may name any folder); the biggest shipped is ~70 KB


NOT_REGULAR = "not a regular file (a FIFO, socket or device)"
MAX_GENERATED = 64 * MIB  # a file envman generated (a lock, a Dockerfile): far above any real one


def read_regular(path: Path | str, limit: int = MAX_GENERATED, *, follow: bool = True) -> bytes:
    """The bytes of a regular file. Opened with O_NONBLOCK, so a FIFO put in a file's place never blocks: it
    is an OSError (EINVAL, strerror NOT_REGULAR), as a folder (EISDIR) or a file over ``limit`` (EFBIG) is;
    without ``follow``, so is a symbolic link (ELOOP). Every file envman reads from a project or a cache goes
    through this or ``read_input``."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | (0 if follow else getattr(os, "O_NOFOLLOW", 0)))
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, NOT_REGULAR, str(path))
        if st.st_size > limit:
            raise OSError(errno.EFBIG, f"{_size(st.st_size)}, over envman's limit of {_size(limit)}", str(path))
        with os.fdopen(fd, "rb", closefd=False) as fh:  # read() of a regular file runs to the count or the end
            data = fh.read(limit + 1)
        if len(data) > limit:
            raise OSError(errno.EFBIG, f"over envman's limit of {_size(limit)}", str(path))
        return data
    finally:
        os.close(fd)


def read_regular_text(path: Path | str, limit: int = MAX_GENERATED) -> str:
    """``read_regular`` as UTF-8 text (UnicodeDecodeError when it is not)."""
    return read_regular(path, limit).decode("utf-8")


def _size(n: int) -> str:
    return f"{n / MIB:.1f} MB" if n >= MIB else f"{n} bytes"


def present(path: Path | str) -> bool:
    """Is there anything at ``path`` (a file, a FIFO, a folder, a link even to nowhere)? What a project file's
    reader asks instead of ``is_file()``: a FIFO, a dangling link or a link loop is then reported by name
    (``read_input``), never read as "no such file"."""
    return os.path.lexists(path)


def why_unreadable(path: Path | str, exc: OSError) -> tuple[str, str | None]:
    """(what is wrong with ``path``, a hint) for an OSError met reading it: a link loop, a link to nowhere,
    a permission refused, an I/O error … each in its own words."""
    if exc.errno == errno.ELOOP:
        return "a symbolic link loop", "point the link at a file, or replace it with the file"
    if isinstance(exc, FileNotFoundError) and os.path.islink(path):
        return (f"a symbolic link to {os.readlink(path)}, which does not exist",
                "point the link at a file, or replace it with the file")
    if isinstance(exc, FileNotFoundError):
        return "not found", None
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"cannot read: {exc.strerror}", "give your user read access to it (chmod u+r), or run as its owner"
    return f"cannot read: {exc.strerror or exc}", None


def read_data(path: Path | str) -> bytes:
    """A matrix file's bytes (YAML reads them as UTF-8): bounded, never a FIFO; else a DataError naming the file."""
    try:
        return read_regular(path, MAX_DATA)
    except OSError as exc:
        from envman.errors import DataError

        raise DataError(f"{path}: {why_unreadable(path, exc)[0]}",
                        hint="envman reads its matrix files as regular files: put a copy of the file from envman's "
                             "matrices/ there") from None


def read_input(path: Path | str, label: str, limit: int, *, error: type[UsageError] = UsageError,
               hint: str | None = None) -> str:
    """The text of ``path``; refused unless it is a regular file of at most ``limit`` bytes in UTF-8."""
    try:
        return read_input_bytes(path, label, limit, error=error, hint=hint).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{label}: not UTF-8 text (byte {exc.start})", hint="save it as UTF-8") from None


def read_input_bytes(path: Path | str, label: str, limit: int, *, error: type[UsageError] = UsageError,
                     hint: str | None = None) -> bytes:
    """The bytes of ``path``; refused unless it is a regular file of at most ``limit`` bytes. Each refusal names
    the file and why: absent, a link loop or to nowhere, not a regular file (never opened for reading, so a FIFO
    never blocks), unreadable, over the limit."""
    try:
        st = os.stat(path)
    except OSError as exc:
        why, own_hint = why_unreadable(path, exc)
        raise error(f"{label}: {why}", hint=hint or own_hint) from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else NOT_REGULAR
        raise error(f"{label}: {kind}", hint=hint or "point it at a regular file")
    if st.st_size > limit:
        raise error(f"{label}: {_size(st.st_size)}, over envman's limit of {_size(limit)} for this file",
                    hint=hint or "is this the right file? envman reads small text files here")
    try:
        return read_regular(path, limit)  # never blocks, even if a FIFO took the file's place since the stat
    except OSError as exc:
        if exc.errno == errno.EFBIG:  # it grew after stat
            raise error(f"{label}: over envman's limit of {_size(limit)} for this file", hint=hint) from None
        if exc.errno == errno.EINVAL:  # a FIFO took its place since the stat
            raise error(f"{label}: {NOT_REGULAR}", hint=hint or "point it at a regular file") from None
        why, own_hint = why_unreadable(path, exc)
        raise error(f"{label}: {why}", hint=hint or own_hint) from None


class WrittenFloat(float):
    """A number read from YAML or TOML that keeps the text it was written as: YAML reads ``python: 3.10`` as
    3.1, and a field that wants a string must be able to tell (project/spec.py ``_number_text``)."""

    written: str

    def __new__(cls, value: float, written: str | None = None) -> WrittenFloat:
        obj = super().__new__(cls, value)
        obj.written = str(float(value)) if written is None else written
        return obj


class WrittenInt(int):
    """As ``WrittenFloat``: YAML 1.1 reads ``010`` as 8 and ``1_000`` as 1000."""

    written: str

    def __new__(cls, value: int, written: str | None = None) -> WrittenInt:
        obj = super().__new__(cls, value)
        obj.written = str(int(value)) if written is None else written
        return obj


class Yaml11:
    """A plain scalar YAML 1.1 reads otherwise than YAML 1.2 and the eye: ``1:30`` as 90 (base 60), ``010`` as 8,
    ``0b11``, ``1_000``, ``no``/``on`` as booleans, ``.inf``, ``2024-01-01`` as a date. ``load_yaml(numbers_as_written=
    True)`` builds one in its place, ``text`` as written and ``value`` as YAML 1.1 read it, for the reader to refuse."""

    def __init__(self, text: str, value: Any) -> None:
        self.text, self.value = text, value

    def __str__(self) -> str:  # a mapping's key shows in a dotted path as written
        return self.text


# what YAML 1.2's core schema reads as the same int, float or bool as YAML 1.1 does (spec 1.2.2, 10.3.2), less
# .inf and .nan (the same in both, and a value no input of envman means); 1.2 has no timestamps
_SAME_IN_12 = {"int": re.compile(r"[-+]?(?:0|[1-9][0-9]*)|0x[0-9a-fA-F]+"),
               "float": re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"),
               "bool": re.compile(r"true|True|TRUE|false|False|FALSE"), "timestamp": re.compile(r"(?!)")}


def plain_numbers(v: Any) -> Any:
    """``v`` with every ``WrittenFloat``/``WrittenInt`` a plain number again: for values passed on as they are
    (a YAML dump, a JSON document, another module's checks see only what PyYAML itself builds)."""
    if isinstance(v, WrittenFloat):
        return float(v)
    if isinstance(v, WrittenInt):
        return int(v)
    if isinstance(v, dict):
        return {plain_numbers(k): plain_numbers(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain_numbers(x) for x in v]
    return v


def _loader(numbers_as_written: bool = False):
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C parser: a 1 MB file in well under a second

    class UniqueKeyLoader(base):  # type: ignore[misc, valid-type]
        def construct_mapping(self, node, deep=False):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # `<<: *defaults` (YAML merge keys): merged below; an explicit key overrides a merged one
                key = self.construct_object(key_node, deep=True)
                try:
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"duplicate key {key!r} (first on line {seen[key] + 1})", key_node.start_mark)
                    seen[key] = key_node.start_mark.line
                except TypeError:
                    pass  # an unhashable key: the base constructor says so
            if isinstance(node, yaml.MappingNode):
                self.flatten_mapping(node)  # what SafeLoader does first: the merge keys' pairs, then the node's own
            return super().construct_mapping(node, deep)

    if numbers_as_written:
        for kind, cls in {"int": WrittenInt, "float": WrittenFloat, "bool": None, "timestamp": None}.items():
            UniqueKeyLoader.add_constructor(f"tag:yaml.org,2002:{kind}", _as_written(kind, cls))
    return UniqueKeyLoader


def _as_written(kind: str, cls: Any) -> Any:
    """A constructor for YAML's ``kind`` scalars: a ``Yaml11`` where YAML 1.2 would read the text otherwise, else
    the value (a number keeping its text)."""
    def construct(ld: Any, node: Any) -> Any:
        value = getattr(ld, f"construct_yaml_{kind}")(node)
        if not _SAME_IN_12[kind].fullmatch(node.value):
            return Yaml11(node.value, value)
        return cls(value, node.value) if cls else value
    return construct


def load_yaml(text: str, label: str, *, error: type[UsageError] = UsageError, hint: str | None = None,
              numbers_as_written: bool = False) -> Any:
    """``numbers_as_written``: every number keeps its text (``WrittenFloat``/``WrittenInt``), for a file whose
    string fields a user may leave unquoted (envman.yaml), and a scalar YAML 1.1 changes is a ``Yaml11``."""
    import yaml

    try:
        return yaml.load(text, Loader=_loader(numbers_as_written))  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        raise error(f"{label}: {where}invalid YAML: {getattr(exc, 'problem', None) or exc}",
                    hint=hint or "fix the syntax") from None
    except RecursionError:
        raise error(f"{label}: nested too deeply", hint=hint or "a few levels of nesting is all envman reads") from None


def load_json(text: str, label: str, *, error: type[UsageError] = UsageError, hint: str | None = None,
              numbers_as_written: bool = False) -> Any:
    """``numbers_as_written``: every number with a fraction keeps its text (``WrittenFloat``)."""
    import json

    try:
        if numbers_as_written:
            return json.loads(text, parse_float=lambda s: WrittenFloat(float(s), s))
        return json.loads(text)
    except RecursionError:
        raise error(f"{label}: nested too deeply", hint=hint) from None
    except ValueError as exc:
        where = (f"line {exc.lineno}, column {exc.colno}: {exc.msg}" if isinstance(exc, json.JSONDecodeError)
                 else str(exc))
        raise error(f"{label}: not valid JSON ({where})", hint=hint) from None

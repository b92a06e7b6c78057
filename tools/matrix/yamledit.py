"""Text edits of torch.yaml that keep every comment and the file's layout (a YAML round trip would drop
the comments that carry half the provenance). Each edit inserts whole block-style items; the loader
validates the result before anything is written."""

from __future__ import annotations

import re

from packaging.version import Version  # noqa: F401 - add_patch takes one

from envman.errors import DataError


def _indent(ln: str) -> int:
    return len(ln) - len(ln.lstrip())


def _content(ln: str) -> bool:
    return bool(ln.strip()) and not ln.lstrip().startswith("#")


def _line_block(lines: list[str], key: tuple[int, int]) -> tuple[int, int]:
    """[start, end) of the ``- line: "X.Y"`` item; end is after its last content line."""
    pat = re.compile(rf"""^(\s*)-\s*line:\s*["']{key[0]}\.{key[1]}["']\s*$""")
    start = next((i for i, ln in enumerate(lines) if pat.match(ln)), None)
    if start is None:
        raise DataError(f"no block-style '- line: \"{key[0]}.{key[1]}\"' item to add to")
    item = _indent(lines[start])
    end = start + 1
    last = start
    while end < len(lines):
        ln = lines[end]
        if _content(ln):
            if _indent(ln) <= item:
                break
            last = end
        end += 1
    return start, last + 1


def add_patch(text: str, version: Version, rows: list[str]) -> str:
    lines = text.splitlines(keepends=True)
    start, end = _line_block(lines, (version.major, version.minor))
    pidx = next((i for i in range(start + 1, end) if re.match(r"^\s*patches:\s*\Z", lines[i])), None)
    if pidx is None:
        raise DataError(f"torch.yaml: line {version.major}.{version.minor} has no block-style 'patches:' list")
    key_ind = _indent(lines[pidx])
    item_ind = None
    last = pidx
    for i in range(pidx + 1, end):
        if not _content(lines[i]):
            continue
        ind = _indent(lines[i])
        if ind <= key_ind and not lines[i].lstrip().startswith("- "):
            break
        if item_ind is None:
            item_ind = ind
        if ind < item_ind:
            break
        last = i
    pad = " " * (item_ind if item_ind is not None else key_ind + 2)
    return "".join(lines[:last + 1] + [pad + r + "\n" for r in rows] + lines[last + 1:])


def add_variant(text: str, key: tuple[int, int], block: str) -> str:
    """Append a variant item (``block``, written at indent 0) at the end of the line's item (``variants:`` is
    its last key, see README), indented like the variants already there."""
    lines = text.splitlines(keepends=True)
    start, end = _line_block(lines, key)
    vidx = max((i for i in range(start, end) if re.match(r"^\s*variants:\s*\Z", lines[i])), default=None)
    if vidx is None or any(_content(lines[i]) and _indent(lines[i]) <= _indent(lines[vidx]) and not lines[i].lstrip().startswith("- ")
                           for i in range(vidx + 1, end)):
        raise DataError(f"torch.yaml: line {key[0]}.{key[1]} does not end with its 'variants:' list")
    first = next((i for i in range(vidx + 1, end) if _content(lines[i])), None)
    pad = " " * (_indent(lines[first]) if first is not None else _indent(lines[vidx]) + 2)
    if not lines[end - 1].endswith("\n"):
        lines[end - 1] += "\n"
    return "".join(lines[:end] + [pad + ln + "\n" for ln in block.splitlines()] + lines[end:])


def append_line(text: str, block: str) -> str:
    """Append a release item at the end of the file: ``releases:`` is torch.yaml's last top-level key."""
    tops = [ln.split(":", 1)[0] for ln in text.splitlines() if _content(ln) and _indent(ln) == 0]
    if not tops or tops[-1] != "releases":
        raise DataError("'releases:' is not the last top-level key of the matrix file; add the new line by hand")
    return text.rstrip("\n") + "\n" + block


def add_flow_item(text: str, key: tuple[int, int], field: str, item: str) -> str:
    """Add ``item`` to a one-line flow list (``patches: ["2.21.0"]``) of the ``- line: "X.Y"`` item."""
    lines = text.splitlines(keepends=True)
    start, end = _line_block(lines, key)
    pat = re.compile(rf"^(\s*{field}:\s*\[)(.*)(\]\s*)$", re.S)
    for i in range(start, end):
        m = pat.match(lines[i])
        if m:
            inner = m.group(2).strip()
            lines[i] = m.group(1) + (inner + ", " if inner else "") + item + m.group(3)
            return "".join(lines)
    raise DataError(f"line {key[0]}.{key[1]} has no one-line '{field}: [...]' list")



def set_item_key(text: str, list_key: str, item_id: str, key: str, rows: list[str] | None,
                 within: tuple[int, int] | None = None) -> str:
    """Replace (or add, or with ``rows=None`` remove) the block-style ``key:`` of the ``- <list_key>: <item_id>``
    item (the first one, or the first inside the line range ``within``); ``rows`` are written at the item's
    key indent (``rows[0]`` starts with ``key:``). Other keys, comments and the file's order stay."""
    lines = text.splitlines(keepends=True)
    lo, hi = within or (0, len(lines))
    pat = re.compile(rf"^(\s*)-\s*{re.escape(list_key)}:\s*[\"']?{re.escape(item_id)}[\"']?\s*$")
    start = next((i for i in range(lo, hi) if pat.match(lines[i])), None)
    if start is None:
        raise DataError(f"no block-style '- {list_key}: {item_id}' item to edit")
    item = _indent(lines[start])
    end, last = start + 1, start
    while end < len(lines):
        if _content(lines[end]):
            if _indent(lines[end]) <= item:
                break
            last = end
        end += 1
    pad = " " * (item + 2)
    key_re = re.compile(rf"^{pad}{re.escape(key)}:")
    kidx = next((i for i in range(start + 1, last + 1) if key_re.match(lines[i])), None)
    at = last + 1
    if kidx is not None:
        kend = kidx + 1
        while kend <= last and (not _content(lines[kend]) or _indent(lines[kend]) > item + 2):
            kend += 1
        while kend - 1 > kidx and not _content(lines[kend - 1]):
            kend -= 1
        del lines[kidx:kend]
        at = kidx
    if rows:
        if not lines[at - 1].endswith("\n"):
            lines[at - 1] += "\n"
        lines[at:at] = [pad + r + "\n" for r in rows]
    return "".join(lines)


def set_variant_key(text: str, line: tuple[int, int], variant: str, key: str, rows: list[str] | None) -> str:
    """``set_item_key`` for the ``- name: <variant>`` item of torch.yaml's ``- line: "X.Y"`` item."""
    start, end = _line_block(text.splitlines(keepends=True), line)
    return set_item_key(text, "name", variant, key, rows, within=(start, end))

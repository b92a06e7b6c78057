"""Where a key or table envman adds to a user's TOML file goes, on tomlkit's public API only.

tomlkit places a new key after the last item of its table that is not a blank line, which is a comment when
one introduces the next table (``# PyTorch wheels`` above ``[tool.uv.sources]``): the new key would land
between that comment and its table. And an array of tables added after key = value lines gets no blank line
before its header. Placing either by hand needs tomlkit's internals (``Container._insert_after``, gone in
0.15), so instead each item envman adds carries a marker comment, and the dumped text is laid out from the
markers: a new key moves above the comments and blank lines that sat above it, a new header gets a blank line
before it, every marker goes. The result is parsed again and must hold the same data as tomlkit's, or the
markers are only removed (tomlkit's own placement: valid, only less tidy).
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import tomlkit

_HOIST, _GAP = "hoist", "gap"


class Layout:
    """The markers of one edit: ``mark_key`` an item before it is set, ``mark_header`` a new table; ``apply``
    to the dumped text."""

    def __init__(self) -> None:
        self.tag = "envman-" + uuid.uuid4().hex
        self._extra: dict[str, int] = {}  # marker → lines the marked value spans below its first line
        self._pattern = re.compile(r"[ \t]*# " + self.tag + r"-(" + _HOIST + "|" + _GAP + r")-(\d+)[ \t]*$")

    def _mark(self, item: Any, kind: str, extra: int) -> None:
        n = str(len(self._extra))
        self._extra[n] = extra
        item.comment(f"{self.tag}-{kind}-{n}")

    def mark_key(self, item: Any) -> None:
        """``item``: a tomlkit item (``tomlkit.item(value)``) about to be set as a new key of a table."""
        self._mark(item, _HOIST, item.as_string().count("\n"))

    def mark_header(self, table: Any) -> None:
        self._mark(table, _GAP, 0)

    def apply(self, text: str, before: str) -> str:
        """``text`` (LF line ends) laid out from its markers, without them; ``before``: the text as the user
        wrote it."""
        if self.tag not in text:
            return text
        laid = "\n".join(self._lay(text.split("\n"), before))
        try:
            if tomlkit.parse(laid).unwrap() == tomlkit.parse(text).unwrap():
                return laid
        except tomlkit.exceptions.TOMLKitError:
            pass  # the caller checks what tomlkit wrote
        return "\n".join(self._pattern.sub("", line) for line in text.split("\n"))

    def _lay(self, lines: list[str], before: str) -> list[str]:
        while True:
            hit = next(((i, m) for i, line in enumerate(lines) if (m := self._pattern.search(line))), None)
            if hit is None:
                return lines
            end, m = hit
            lines[end] = lines[end][: m.start()] + lines[end][m.end():]
            if m.group(1) == _GAP:
                self._gap(lines, end)
                continue
            start = end - self._extra[m.group(2)]
            top = start
            while top > 0 and (not lines[top - 1].strip() or lines[top - 1].lstrip().startswith("#")):
                top -= 1
            if top > 0 and top < start:  # above the comments it sat under (at the top of a file: nothing to join)
                block = lines[top:start]
                lines[top:end + 1] = lines[start:end + 1] + block
                after = end + 1
                # tomlkit parted the new key from the header below it by a blank line: the comment that introduced
                # the header in the user's file (no blank line between them) introduces it again
                if (after + 1 < len(lines) and not lines[after].strip() and block[-1].strip()
                        and f"{block[-1]}\n{lines[after + 1]}" in before):
                    del lines[after]

    @staticmethod
    def _gap(lines: list[str], header: int) -> None:
        """A blank line above a new table's header, and between its last key and a header that follows it
        (tomlkit places a new table before a table that comes later in the file when its parent is split)."""
        nxt = next((i for i in range(header + 1, len(lines)) if lines[i].lstrip().startswith("[")), None)
        if nxt is not None and lines[nxt - 1].strip():
            lines.insert(nxt, "")
        if header > 0 and lines[header - 1].strip():
            lines.insert(header, "")

"""A dated copy of what a primary source said, kept as small text in ``matrices/sources/``.

These machines reach PyPI only, so every other source (NVIDIA's supported-GPU list, PyTorch's release build
matrices, NVIDIA's CUDA-to-driver table) is kept here as the rows envman parses from it, with the URL, the
revision read (a tag, a commit, a document version) and the date. The readers parse the source itself when
it is reachable (``python -m tools.matrix sync --live``) and write the same rows; offline they parse these files.

Format: ``# key: value`` header lines, then ``[section]`` lines each followed by tab-separated rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from envman.errors import DataError

HEADER_KEYS = ("source", "url", "revision", "read", "what")


@dataclass
class Snapshot:
    name: str  # file stem: "nvidia-gpus"
    meta: dict[str, str] = field(default_factory=dict)  # url, revision, read (YYYY-MM-DD), what, …
    sections: dict[str, list[list[str]]] = field(default_factory=dict)

    def rows(self, section: str) -> list[list[str]]:
        return self.sections.get(section, [])

    def render(self) -> str:
        head = [f"# {k}: {self.meta[k]}" for k in (*HEADER_KEYS, *sorted(set(self.meta) - set(HEADER_KEYS)))
                if k in self.meta]
        body = []
        for sec, rows in self.sections.items():
            body.append(f"[{sec}]")
            body += ["\t".join(r) for r in rows]
        return "\n".join(head + body) + "\n"


def parse_snapshot(name: str, text: str) -> Snapshot:
    snap = Snapshot(name)
    section: str | None = None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if line.startswith("#"):
            m = re.match(r"#\s*([a-z_]+):\s*(.*)\Z", line)
            if m and section is None:
                snap.meta[m.group(1)] = m.group(2).strip()
            continue
        m = re.fullmatch(r"\[([a-z0-9_.-]+)\]", line.strip())
        if m:
            section = m.group(1)
            snap.sections.setdefault(section, [])
            continue
        if section is None:
            raise DataError(f"matrices/sources/{name}.tsv: line {n}: a row before any [section]")
        if any(ch in line for ch in "\r\x00"):
            raise DataError(f"matrices/sources/{name}.tsv: line {n}: control characters in a row")
        snap.sections[section].append(line.split("\t"))
    for k in ("url", "revision", "read"):
        if k not in snap.meta:
            raise DataError(f"matrices/sources/{name}.tsv: header: missing '# {k}:'",
                            hint="every snapshot names its URL, the revision read and the date read")
    return snap


def snapshot_dir(matrix_dir: Path) -> Path:
    return matrix_dir / "sources"


def load_snapshot(matrix_dir: Path, name: str) -> Snapshot:
    path = snapshot_dir(matrix_dir) / f"{name}.tsv"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"{path}: cannot read the snapshot ({exc.strerror or exc})",
                        hint="run `python -m tools.matrix sync --live` where the source is reachable") from None
    return parse_snapshot(name, text)

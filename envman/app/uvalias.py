"""`envman uv write`'s own edit of pyproject.toml does not make the lock stale (docs/uv.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

RECORD = ".envman/uv-write.json"
MAX_RECORD = 64 * 1024
_DIGEST = re.compile(r"^[0-9a-f]{64}\Z")


def _read(root: Path) -> dict[str, dict[str, str]]:
    path = root / RECORD
    try:
        if not path.is_file() or path.stat().st_size > MAX_RECORD:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        return {}
    return {name: pair for name, pair in files.items() if isinstance(name, str) and isinstance(pair, dict)
            and all(isinstance(pair.get(k), str) and _DIGEST.match(pair[k]) for k in ("written", "stands_for"))}


def input_digest(root: Path, name: str, digest: str) -> str:
    """The digest a lock input ``name`` counts as: the one `uv write`'s edit stands for, else its own."""
    pair = _read(root).get(name)
    return pair["stands_for"] if pair is not None and pair["written"] == digest else digest


def record_write(root: Path, name: str, before: str, after: str) -> None:
    """After `uv write` replaced ``before`` with ``after``: the new file stands for what the old one did."""
    from envman.files import sha256, write_atomic

    if before == after:
        return
    files = _read(root)
    files[name] = {"written": sha256(after), "stands_for": input_digest(root, name, sha256(before))}
    (root / RECORD).parent.mkdir(exist_ok=True)
    write_atomic(root / RECORD, json.dumps({"files": files}, indent=2, sort_keys=True) + "\n")

"""Plain-text tables and JSON for the CLI. No rich: it costs ~100 ms of import per run."""

from __future__ import annotations

import json
import sys
from typing import Any


def table(rows: list[list[str]], header: list[str] | None = None) -> str:
    all_rows = ([header] if header else []) + rows
    if not all_rows:
        return ""
    widths = [max(len(r[i]) if i < len(r) else 0 for r in all_rows) for i in range(max(len(r) for r in all_rows))]
    lines = []
    for n, r in enumerate(all_rows):
        lines.append("  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip())
        if header and n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=False, ensure_ascii=False) + "\n")

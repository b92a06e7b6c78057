"""A ratchet on McCabe complexity (ruff's C901, limit 10 in pyproject.toml): no new function may pass the
limit, and a function already above it (tests/complexity_allowlist.txt, measured when the ratchet was
introduced) may not grow. The list holds no slack either (like mypy's warn_unused_ignores): a line for a
function that is gone or back under the limit, or a number above what is measured, fails until it is dropped
or lowered, so the ratchet only ever tightens."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ALLOW = ROOT / "tests" / "complexity_allowlist.txt"
_MSG = re.compile(r"`(?P<name>[^`]+)` is too complex \((?P<n>\d+) > \d+\)")


def measured() -> dict[str, int]:
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed (pip install -e '.[test]' installs it)")
    out = subprocess.run([ruff, "check", "envman", "tools", "--select", "C901", "--output-format", "json", "--exit-zero"],
                         capture_output=True, text=True, cwd=ROOT, check=True).stdout
    found = {}
    for d in json.loads(out):
        m = _MSG.search(d["message"])
        assert m, d["message"]
        found[f"{Path(d['filename']).relative_to(ROOT).as_posix()}::{m['name']}"] = int(m["n"])
    return found


def allowed() -> dict[str, int]:
    out = {}
    for line in ALLOW.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, n = line.rsplit(" ", 1)
            out[key] = int(n)
    return out


def test_no_function_grows_past_the_limit():
    now, allow = measured(), allowed()
    new = {k: n for k, n in now.items() if k not in allow}
    grown = {k: (allow[k], n) for k, n in now.items() if k in allow and n > allow[k]}
    assert not new, f"functions above complexity 10 (split them): {new}"
    assert not grown, f"functions that grew more complex (was, now): {grown}"


def test_the_allowlist_holds_no_slack():
    now, allow = measured(), allowed()
    stale = sorted(k for k in allow if k not in now)
    lower = {k: (n, now[k]) for k, n in allow.items() if k in now and now[k] < n}
    assert not stale, f"tests/complexity_allowlist.txt: drop these lines (gone, or at most 10 now): {stale}"
    assert not lower, f"tests/complexity_allowlist.txt: lower these numbers (listed, measured): {lower}"

"""A pattern that ends in ``$`` also matches before a trailing newline (``re.match(r"^gpu$", "gpu\\n")`` matches),
so a validator written that way lets ``partition: "gpu\\n"`` through to an sbatch line (issue 39, cause 11). The
rule: every pattern envman compiles or matches ends in ``\\Z`` (the end of the string, nothing after it), unless it
is compiled with MULTILINE, where ``$`` means a line's end on purpose."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CALLS = {"compile", "match", "fullmatch", "search"}  # the calls that validate (sub and split rewrite, where `$` is harmless)


def _multiline(call: ast.Call) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr in ("M", "MULTILINE") for n in ast.walk(call))


def dollar_anchored(path: Path, base: Path = ROOT) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        first = node.args[0]
        if (name in CALLS and isinstance(first, ast.Constant) and isinstance(first.value, str)
                and re.search(r"(?<!\\)\$\Z", first.value) and not _multiline(node)):
            out.append(f"{path.relative_to(base)}:{node.lineno}: {first.value[-40:]!r}")
    return out


def test_no_pattern_ends_in_a_dollar_that_lets_a_trailing_newline_through():
    found = [hit for folder in ("envman", "tools") for p in sorted((ROOT / folder).rglob("*.py"))
             for hit in dollar_anchored(p)]
    assert found == [], "end these patterns with \\Z (or compile them with re.MULTILINE):\n" + "\n".join(found)


def test_the_scan_sees_what_it_is_for(tmp_path):
    """The rule's own check: it finds a `$` pattern, and leaves `\\Z`, an escaped `\\$` and MULTILINE alone."""
    probe = tmp_path / "probe.py"
    probe.write_text('import re\nA = re.compile(r"^gpu$")\nB = re.compile(r"^gpu\\Z")\nC = re.compile(r"cost\\$")\n'
                     'D = re.compile(r"^x$", re.M)\nE = re.match("^y$", "y")\n')
    assert [h.split(": ", 1)[0] for h in dollar_anchored(probe, tmp_path)] == ["probe.py:2", "probe.py:6"]
    assert re.match(r"^gpu$", "gpu\n") and not re.match(r"^gpu\Z", "gpu\n")  # why the rule exists

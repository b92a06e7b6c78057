"""Issue 24: hostile text never reaches the terminal raw. Whatever envman echoes (a facts file's GPU name, an
index's metadata, a message) loses its control characters and escape sequences — OSC 52 writes the clipboard,
CSI sequences move the cursor or clear the screen — in one place, the output layer the CLI writes through."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envman.cli.main import main
from envman.cli.output import clean

FACTS = Path(__file__).resolve().parent.parent / "fixtures" / "facts" / "healthy_a100.json"
OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
HOSTILE = f"A100{OSC52}\x1b[2J\x1b[1;1H\x9b31m\r\x08\x00\x7f\u202e"


@pytest.mark.parametrize("text, want", [
    (HOSTILE, "A100"),
    ("two\nlines\tand a tab", "two\nlines\tand a tab"),
    ("café — ü ✓", "café — ü ✓"),
    ("\x1bPtmux;\x1b\x1b]52;c;eA==\x07\x1b\\ end", " end"),
])
def test_clean(text, want):
    assert clean(text) == want


def test_a_hostile_facts_file_is_printed_without_escapes(tmp_path, capsys):
    facts = json.loads(FACTS.read_text())
    facts["distro"] = HOSTILE
    for g in facts.get("gpus", []):
        g["name"] = HOSTILE
    f = tmp_path / "facts.json"
    f.write_text(json.dumps(facts))
    main(["doctor", "--facts", str(f)])
    out = capsys.readouterr()
    text = out.out + out.err
    assert "A100" in text
    assert not [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) < 0xa0 or c == "\u202e"], text


def test_an_error_message_is_printed_without_escapes(capsys):
    from envman.cli.main import report_error
    from envman.errors import UsageError

    report_error(UsageError(f"bad name {OSC52}x", hint="try \x1b[31mred\x1b[0m"))
    assert capsys.readouterr().err == "error: bad name x\nhint: try red\n"

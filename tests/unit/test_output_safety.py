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


# --- matrix refresh: what a hostile index writes never reaches YAML or the terminal raw ------------------------

META = """Metadata-Version: 2.1
Name: torch
Version: 2.99.0
Requires-Dist: nvidia-cudnn-cu13 ===9.1"
Requires-Dist: nvidia-nccl-cu13 ==2.30.7
Requires-Dist: not a requirement at all ((
"""


def test_a_hostile_wheel_version_py_is_refused_not_written():
    from envman.errors import ToolError
    from tools.matrix.wheel import facts_from_text

    for cuda in ("13.0\\nevil: true", f"13.0{OSC52}", "13.0 ; evil: 1"):
        with pytest.raises(ToolError) as exc:
            facts_from_text(META, f"cuda = '{cuda}'\n", "torch-2.99.0-cp311-cp311-manylinux_2_28_x86_64.whl")
        assert exc.value.message.startswith("torch-2.99.0-cp311-cp311-manylinux_2_28_x86_64.whl: torch/version.py: cuda = ")


def test_hostile_metadata_pins_are_dropped_and_a_bad_line_is_no_crash():
    from tools.matrix.wheel import facts_from_text

    facts = facts_from_text(META, "cuda = '13.0'\n", "torch.whl")
    assert facts.cudnn is None and facts.nccl == "2.30.7" and facts.cuda == "13.0"


def test_every_value_refresh_writes_into_yaml_is_escaped():
    import yaml

    from tools.matrix.discover import _q

    for s in ("plain", 'a "quoted" \\ back', "two\nlines", f"esc{OSC52}", "bidi\u202ereversed", "tab\there"):
        text = f"k: {_q(s)}\n"
        assert text.isascii() and "\n" not in text[:-1] and "\x1b" not in text
        assert yaml.safe_load(text) == {"k": s}

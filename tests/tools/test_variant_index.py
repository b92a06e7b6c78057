"""``python -m tools.matrix variants`` (was ``envman variants check``): an index's wheel-variant metadata (PEP 825,
draft) read from a loopback PEP 503 index or a file, checked against the matrix, and the command's exit codes."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

from tests.localindex import add_file, serve, stand_in_wheel

PYTORCH_280 = Path(__file__).resolve().parent.parent / "fixtures" / "variants" / "torch-2.8.0-variants.json"


def test_labels_in_wheel_names():
    from tools.matrix.variantindex import wheel_label

    assert wheel_label("torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64-cu128.whl", "torch", "2.8.0") == "cu128"
    assert wheel_label("torch-2.8.0-1-cp311-cp311-manylinux_2_28_x86_64-cu128.whl", "torch", "2.8.0") == "cu128"
    assert wheel_label("torch-2.8.0-1-cp311-cp311-manylinux_2_28_x86_64.whl", "torch", "2.8.0") is None  # build tag
    assert wheel_label("torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl", "torch", "2.8.0") is None
    assert wheel_label("torch-2.9.0-cp311-cp311-manylinux_2_28_x86_64-cu128.whl", "torch", "2.8.0") is None


def _index(tmp_path: Path, data: dict, labels=("cu126", "cu128", "cu129"), corrupt: bool = False) -> Path:
    root = tmp_path / "index"
    for label in labels:
        stand_in_wheel(root, "torch", "2.8.0", tag="cp311-cp311-manylinux_2_28_x86_64", label=label)
    body = json.dumps(data).encode()
    add_file(root, "torch", "torch-2.8.0-variants.json", body)
    if corrupt:  # the file changes after the index listed its hash
        (root / "torch" / "torch-2.8.0-variants.json").write_bytes(body + b" ")
    return root


def test_the_command_reads_a_loopback_index_and_checks_the_hash(tmp_path, capsys):
    from tools.matrix.__main__ import main

    data = json.loads(PYTORCH_280.read_text())
    with serve(_index(tmp_path, data, labels=("cu126", "cu128", "cu129", "cu130"))) as base:
        code = main(["variants", "torch", "--version", "2.8.0", "--index-url", base, "--json"])
    rep = json.loads(capsys.readouterr().out)
    assert code == 0 and rep["hashed"] is True and rep["status"].startswith("draft")
    assert rep["source"] == f"{base}/torch/torch-2.8.0-variants.json"
    assert [(f["severity"], f["label"]) for f in rep["findings"]] == [("warn", "cu130"), ("info", "cu126")]
    assert rep["expected"]["cu128"] == data["variants"]["cu128"]


def test_a_contradiction_exits_1(tmp_path, capsys):
    from tools.matrix.__main__ import main

    data = copy.deepcopy(json.loads(PYTORCH_280.read_text()))
    data["variants"]["cu128"]["nvidia"]["sm_arch"].append("61_real")
    with serve(_index(tmp_path, data)) as base:
        assert main(["variants", "torch", "--version", "2.8.0", "--index-url", base]) == 1
    out = capsys.readouterr().out
    assert "error: torch 2.8.0 cu128: the index says SASS for sm_61, envman measured none in the wheel" in out


def test_a_variants_json_whose_hash_differs_is_refused(tmp_path, capsys):
    from tools.matrix.__main__ import main

    data = json.loads(PYTORCH_280.read_text())
    with serve(_index(tmp_path, data, corrupt=True)) as base:
        assert main(["variants", "torch", "--version", "2.8.0", "--index-url", base]) == 1
    err = capsys.readouterr().err
    want = hashlib.sha256(json.dumps(data).encode()).hexdigest()
    assert f"does not match the index's {want}" in err and "hint: the file changed after the index listed it" in err


def test_a_local_file_and_the_usage_errors(tmp_path, capsys):
    from tools.matrix.__main__ import main

    assert main(["variants", "torch", "--version", "2.8.0", "--file", str(PYTORCH_280)]) == 0
    assert "info: torch 2.8.0 cu126" in capsys.readouterr().out
    assert main(["variants", "torch", "--version", "9.9.9", "--file", str(PYTORCH_280)]) == 1
    assert "error: torch 9.9.9: not in envman's matrix" in capsys.readouterr().err
    assert main(["variants", "torch"]) == 1
    assert "error: name one source: --index-url URL" in capsys.readouterr().err


# --- envman.lock -------------------------------------------------------------------------------------

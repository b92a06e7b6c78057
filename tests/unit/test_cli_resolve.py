"""`envman resolve` as scripts see it: the JSON contract, exit codes, one-line errors."""

from __future__ import annotations

import json

import pytest

from envman.cli.main import main


def run(capsys, *args) -> tuple[int, str, str]:
    rc = main(list(args))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_success_json_shape(capsys):
    rc, out, _ = run(capsys, "resolve", "--target", "h100", "--framework", "torch", "--json")
    assert rc == 0
    d = json.loads(out)
    assert set(d) >= {"framework", "companions", "cuda", "cudnn", "python", "base_image", "min_driver", "arch_list",
                      "targets", "notes", "warnings"}
    assert d["framework"] == {"name": "torch", "version": "2.14.1", "variant": "cu130", "index_url": None}
    assert d["targets"] == [{"name": "NVIDIA H100 SXM5 80GB", "compute_capability": "9.0", "sm": "sm_90", "id": "h100-sxm"}]
    assert isinstance(d["notes"], list) and d["notes"] and isinstance(d["warnings"], list)


def test_no_framework_gives_null(capsys):
    rc, out, _ = run(capsys, "resolve", "--target", "a100", "--json")
    assert rc == 0 and json.loads(out)["framework"] is None


def test_refusal_json_and_exit_3(capsys):
    rc, out, _ = run(capsys, "resolve", "--target", "rtx-5090", "--framework", "torch==2.5.*", "--json")
    assert rc == 3
    d = json.loads(out)
    assert set(d) == {"error", "conflicts", "alternatives", "hint", "exit_code"} and d["exit_code"] == 3
    assert d["alternatives"][0]["framework"]["variant"] == "cu128"


def test_human_refusal_names_block_and_alternatives(capsys):
    rc, _, err = run(capsys, "resolve", "--target", "rtx-5090", "--framework", "torch==2.5.*")
    assert rc == 3
    assert err.splitlines()[0] == "error: no torch stack satisfies 'torch==2.5.*' for 12.0 (sm_120, NVIDIA GeForce RTX 5090)"
    assert "blocked by:" in err and "nearest alternatives:" in err and "torch>=2.7 (2.7.0 cu128)" in err


def test_no_gpu_and_no_target_says_what_to_pass(capsys, monkeypatch):
    from envman.portable.facts import nvidia

    monkeypatch.setattr(nvidia, "scan_gpus", lambda: nvidia.GpuScan(error="NVML: Driver Not Loaded; nvidia-smi not found"))
    rc, _, err = run(capsys, "resolve", "--framework", "torch")
    assert rc == 1
    lines = err.splitlines()
    assert lines[0] == "error: no NVIDIA GPU detected on this machine (NVML: Driver Not Loaded; nvidia-smi not found)"
    assert lines[1].startswith("hint: pass --target GPU") and "--cpu" in lines[1] and len(lines) == 2


def test_detected_gpu_is_used_with_its_driver(capsys, monkeypatch):
    from envman.portable.facts import nvidia

    scan = nvidia.GpuScan(driver="535.104.05", gpus=[nvidia.LocalGpu(0, "NVIDIA A100-SXM4-80GB", "8.0", 81920)], source="nvml")
    monkeypatch.setattr(nvidia, "scan_gpus", lambda: scan)
    rc, out, _ = run(capsys, "resolve", "--framework", "torch", "--json")
    d = json.loads(out)
    assert rc == 0 and d["driver"] == "535.104.05" and not d["driver_assumed"]
    assert d["targets"][0]["compute_capability"] == "8.0"
    assert any(n.startswith("targets: detected via nvml") for n in d["notes"])


@pytest.mark.parametrize("args,first", [
    (["resolve", "--target", "h1000"], "error: unknown GPU 'h1000'"),
    (["resolve", "--target", "h100", "--framework", "pytorh"], "error: --framework: unknown framework 'pytorh'"),
    (["matrix", "show", "gpu"], "error: unknown matrix subject 'gpu'"),
])
def test_bad_input_is_one_error_line_and_a_hint(capsys, args, first):
    rc, _, err = run(capsys, *args)
    lines = err.splitlines()
    assert rc == 1 and lines[0] == first and lines[1].startswith("hint: ") and len(lines) == 2


def test_matrix_show_tables(capsys):
    for subject in ("torch", "tensorflow", "gpus", "cuda", "cudnn", "base-images"):
        rc, out, _ = run(capsys, "matrix", "show", subject)
        assert rc == 0 and len(out.splitlines()) > 5, subject

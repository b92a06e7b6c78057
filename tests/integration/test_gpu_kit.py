"""The GPU verification kit's dry run (bench/gpu_verify): it must not rot between the rare GPU runs.

It runs the kit as the GPU machine would, on this GPU-less machine: every step that needs no GPU really
runs (doctor, the matrix's stack for the installed torch, fit for every setup), the GPU steps are skipped
with their reason, and with torch + transformers + peft importable (.ci/run makes `.venv-kit`) the training
and roofline probes run at toy sizes on the CPU. The kit verifies the shipped matrix, not the frozen test
fixture, so ENVMAN_MATRIX_DIR is removed for it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KIT = ROOT / "bench" / "gpu_verify"
KIT_VENV_PYTHON = ROOT / ".venv-kit" / "bin" / "python"


def run_kit(tmp_path: Path, python: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "ENVMAN_MATRIX_DIR"}
    env["ENVMAN_KIT_PYTHON"] = python
    p = subprocess.run(["bash", str(KIT / "run.sh"), str(tmp_path), "--dry-run"], capture_output=True, text=True,
                       env=env, timeout=400)
    assert p.returncode == 0, p.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert (tmp_path / "summary.txt").read_text().startswith("envman GPU verification kit")
    return report


def check_common(report: dict) -> None:
    steps = report["steps"]
    assert report["dry_run"] is True and report["out_of_time"] is False
    assert steps["doctor"]["dump_rc"] == 0 and steps["doctor"]["verdict"]
    setups = json.loads((KIT / "setups.json").read_text())["setups"]
    # every setup is one envman fit understands: setups.json follows fit's flags and models.yaml's ids
    assert set(steps["fit"]) == {s["id"] for s in setups}
    broken = {k: v["error"] for k, v in steps["fit"].items() if "error" in v}
    assert not broken, broken
    assert all(v["peak_bytes"] > 0 for v in steps["fit"].values())
    skipped = {s["step"] for s in report["skipped"]}
    assert "doctor-vs-nvidia-smi" in skipped  # no GPU here: said, not silently passed
    assert not [f for f in report["findings"] if f["step"] in ("doctor", "fit", "train", "roofline")], report["findings"]


def test_the_dry_run_without_torch_runs_every_step_it_can_and_says_what_it_skipped(tmp_path):
    report = run_kit(tmp_path, sys.executable)
    check_common(report)
    if report["steps"]["env"].get("torch") is None:
        reasons = {s["step"]: s["reason"] for s in report["skipped"]}
        assert "torch" in reasons["train"] and "torch" in reasons["roofline"] and "torch" in reasons["smoke"]


@pytest.mark.slow
def test_the_dry_run_with_torch_trains_every_setup_on_the_cpu(tmp_path):
    if not KIT_VENV_PYTHON.exists():
        pytest.skip("no .venv-kit (torch CPU + transformers + peft): .ci/kit-venv.sh makes it")
    report = run_kit(tmp_path, str(KIT_VENV_PYTHON))
    check_common(report)
    train = report["steps"]["train"]
    trained = {k for k, v in train.items() if v.get("status") == "ok"}
    needs_torchvision = {"resnet50-bf16mixed"}
    assert trained | needs_torchvision >= set(report["steps"]["fit"]), train
    assert all(train[k]["throughput"] > 0 and train[k]["trainable_params"] > 0 for k in trained)
    lora = train["llama1b-lora-bf16mixed"]
    assert lora["trainable_params"] < lora["params"] / 10  # peft really froze the base
    smoke = report["steps"]["smoke"]
    assert smoke["rc"] == 0 and all(c["status"] == "pass" for c in smoke["checks"])
    assert set(report["steps"]["roofline"]["tflops"]) == {"bf16", "fp16", "tf32", "fp32"}

"""The per-node preflight (portable/preflight.py): its pure verdicts on recorded observations, and the real
program run from a kit copy (as the image runs it) on this GPU-less machine."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

from envman.app.smoke import write_kit
from envman.portable import preflight as pf


def test_the_driver_floor_is_inclusive_and_needs_a_driver():
    assert pf.evaluate_driver("580.65.06", "580.65.06")["status"] == "pass"
    assert pf.evaluate_driver("580.95.05", "580.65.06")["status"] == "pass"
    low = pf.evaluate_driver("570.124.06", "580.65.06")
    assert low["status"] == "fail" and low["observed"] == "570.124.06" and low["expected"] == ">= 580.65.06"
    assert "NVIDIA_REQUIRE_CUDA" in low["detail"]
    assert pf.evaluate_driver(None, "580.65.06")["detail"].startswith("no NVIDIA driver answers")
    assert pf.evaluate_driver("570.1", None) is None  # a CPU stack names no floor


def test_gpu_count_and_the_verdict():
    assert pf.evaluate_gpu_count(4, 8)["status"] == "fail"
    assert pf.evaluate_gpu_count(8, 8)["status"] == "pass" and pf.evaluate_gpu_count(0, 0) is None
    ok = {"status": "pass"}
    assert pf.decide(0, [ok, None], require_gpu=True) == 0
    assert pf.decide(6, [None], require_gpu=False) == 0  # passed without a GPU, and none is needed
    assert pf.decide(6, [None], require_gpu=True) == 1
    assert pf.decide(0, [{"status": "fail"}], require_gpu=False) == 1  # the driver floor fails a passing smoke
    assert pf.decide(1, [], require_gpu=False) == 1


def test_the_summary_names_the_node_and_each_failure():
    report = {"node": "gpu-a17", "exit_code": 1, "driver": "570.124.06", "gpu_count": 8, "smoke_status": "passed",
              "lock_hash": "0123456789abcdef", "checks": [pf.evaluate_driver("570.124.06", "580.65.06")]}
    lines = pf.summary_lines(report)
    assert lines[0].startswith("preflight gpu-a17: FAIL driver floor: 570.124.06 (expected >= 580.65.06)")
    assert lines[-1] == "preflight gpu-a17: NOT READY (driver 570.124.06, 8 GPU(s), smoke passed, lock 0123456789ab)"


@pytest.fixture
def kit(tmp_path):
    stack = {"schema": 1, "framework": None, "cuda": None, "cudnn": None, "nccl": None,
             "python": ".".join(platform.python_version_tuple()[:2]), "arch_list": [], "imports": [["json", "json"]],
             "lock_hash": "f" * 64}
    (tmp_path / "stack.json").write_text(json.dumps(stack))
    return write_kit(tmp_path / "kit"), tmp_path / "stack.json"


def run(kit, *args):
    k, stack = kit
    return subprocess.run([sys.executable, "-s", "-m", "envman_portable.preflight", "--expect", str(stack), *args],
                          capture_output=True, text=True, env={"PYTHONPATH": str(k), "PATH": "/usr/bin:/bin"}, timeout=120)


def test_the_kit_program_passes_a_cpu_stack_and_refuses_a_gpu_one_here(kit):
    ok = run(kit, "--json")
    assert ok.returncode == 0, ok.stderr
    report = json.loads(ok.stdout)
    assert report["tool"] == "envman-preflight" and report["smoke_exit_code"] == 6 and report["exit_code"] == 0
    assert set(report["network"]) >= {"interfaces", "memlock_kib"}
    assert "preflight " in ok.stderr and ": ready (" in ok.stderr
    gpu = run(kit, "--require-gpu", "--min-driver", "580.65.06", "--min-gpus", "1")
    assert gpu.returncode == 1 and gpu.stdout == ""
    assert "FAIL driver floor: None (expected >= 580.65.06) - no NVIDIA driver answers" in gpu.stderr
    assert "FAIL gpu required" in gpu.stderr and ": NOT READY (" in gpu.stderr

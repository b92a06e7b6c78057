"""Whole machines, recorded as facts files (tests/fixtures/facts/*.json): every finding, exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envman.app.doctor import knowledge_from_matrix, with_extensions
from envman.matrix.load import load_matrix
from envman.portable.doctor.checks import run_checks
from envman.portable.doctor.report import render_text, report_dict, verdict_line

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "facts"
K = with_extensions(knowledge_from_matrix(load_matrix(FIX.parent / "matrix")), FIX.parent / "matrix")


def load(name: str) -> dict:
    return json.loads((FIX / f"{name}.json").read_text(encoding="utf-8"))


EXPECTED = {
    # near-misses: a healthy H200 box, a container that has its GPU (driver under CUDA 12.6's full floor, above
    # the 12.x minor-compat floor), an sm_89 device on sm_86 SASS
    "h200_driver580_torch211_cu130": [],
    "container_a100_minor_compat": [],
    "rtx4090_on_sm86_sass": [],
    "rtx5090_torch251_cu124": [("error", "arch-not-covered")],
    "container_no_gpu": [("error", "container-no-gpu"), ("warn", "shm-small")],
    "wsl1": [("error", "wsl1")],
    "nvml_mismatch": [("error", "nvml-mismatch")],
    # whole-machine failure reports (issue #14)
    "rtx5090_flash_attn_no_sm120": [("error", "ext-arch-not-covered"), ("warn", "ext-no-cuda-home")],
    "hgx_h100_no_fabricmanager": [("error", "fabricmanager")],
    # one cause, one finding: flash-attn 2 has no build for 7.5 at all, so neither "rebuild it for this GPU"
    # (ext-arch-not-covered) nor "install a toolkit to rebuild it" (ext-no-cuda-home) is said
    "t4_flash_attn2_bf16": [("error", "gpu-too-old-bf16"), ("error", "gpu-too-old-flash-attn-2")],
    "ort_cuda11_beside_torch_cu124": [("error", "ext-cuda-libs")],
    "kernel_upgrade_no_dkms": [("error", "kernel-module-missing")],
    "apt_upgrade_driver_library_mismatch": [("error", "nvml-mismatch")],
    # near-miss: flash-attn with sm_80 SASS and bf16 on an A100 (8.0), a Jupyter kernel on this venv, 1.8 GiB held
    "healthy_a100": [],
}


def test_every_fixture_is_covered():
    assert sorted(p.stem for p in FIX.glob("*.json")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_findings(name):
    assert [(f.severity, f.check) for f in run_checks(load(name), K)] == EXPECTED[name]


def test_nvml_mismatch_verdict():
    (f,) = run_checks(load("nvml_mismatch"), K)
    assert f.verdict == ("NVIDIA driver/library version mismatch: kernel module 550.54.15 is loaded, user-space library "
                         "is 550.90.07; 'Failed to initialize NVML: Driver/library version mismatch'")
    assert f.remedy == ("reboot, or stop every GPU process and reload the kernel module: "
                        "sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia")


def test_container_without_gpu_verdicts():
    err, shm = run_checks(load("container_no_gpu"), K)
    assert err.verdict == "inside a Docker container with no GPU visible: torch 2.7.1+cu128 will run on the CPU"
    assert shm.verdict.startswith("/dev/shm is 64 MiB in this container")


def test_report_text_groups_by_severity_after_one_verdict_line():
    facts = load("container_no_gpu")
    text = render_text(run_checks(facts, K), facts)
    assert text.splitlines()[0] == ("verdict: training will NOT work here: 1 error, 1 warning "
                                    "(torch 2.7.1+cu128, no NVIDIA GPU, Python 3.11)")
    assert text.index("errors (1)") < text.index("warnings (1)")
    assert "      fix: restart it with GPU access: docker run --gpus all" in text


def test_verdict_line_of_a_healthy_box():
    facts = load("h200_driver580_torch211_cu130")
    assert verdict_line([], facts) == "ready (torch 2.11.0+cu130, 1× NVIDIA H200, driver 580.95.05, Python 3.12)"


def test_report_dict_is_json_ready():
    facts = load("rtx5090_torch251_cu124")
    d = report_dict(run_checks(facts, K), facts)
    assert json.loads(json.dumps(d)) == d
    assert d["status"] == "error" and d["counts"] == {"error": 1, "warn": 0, "info": 0}
    assert d["findings"][0]["check"] == "arch-not-covered"


def test_whole_machine_verdicts_name_what_users_search_for():
    (fm,) = run_checks(load("hgx_h100_no_fabricmanager"), K)
    assert fm.verdict == ("this NVSwitch system (4 NVSwitch devices, 8× NVIDIA H100 80GB HBM3) needs Fabric Manager of the "
                          "driver's version; nvidia-fabricmanager is inactive: CUDA init fails with error 802 'system not "
                          "yet initialized'")
    (ko,) = run_checks(load("kernel_upgrade_no_dkms"), K)
    assert ko.remedy == ("sudo apt-get install linux-headers-6.8.0-51-generic && sudo dkms autoinstall -k "
                         "6.8.0-51-generic && sudo modprobe nvidia (or boot the previous kernel)")
    (ort,) = run_checks(load("ort_cuda11_beside_torch_cu124"), K)
    assert "needs libcublas.so.11, libcublasLt.so.11, libcudart.so.11.0, libcudnn.so.8" in ort.verdict
    fa = run_checks(load("rtx5090_flash_attn_no_sm120"), K)[0]
    assert "the GPU 0 NVIDIA GeForce RTX 5090 is 12.0 (sm_120)" in fa.verdict


def test_healthy_a100_is_ready():
    facts = load("healthy_a100")
    assert run_checks(facts, K) == []
    assert verdict_line([], facts) == ("ready (torch 2.7.1+cu128, 1× NVIDIA A100-SXM4-80GB, driver 570.133.20, "
                                       "Python 3.11)")

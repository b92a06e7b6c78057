"""Whole machines, recorded as facts files (tests/fixtures/facts/*.json): every finding, exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envman.matrix.knowledge import knowledge_from_matrix, with_extensions
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
    # wheels that ship several builds of one library and load the one that fits (issue #20 pattern 7), read from
    # the real wheels: the others never load, so their sonames and arch lists are not this machine's problem
    "image_bnb_cuda_variants_l4": [],
    "v100_bnb_nocublaslt_variants": [],
    "t4_vllm_flash_attn_builds": [],
    "h100_bnb_cuda118_build_without_sm90": [("error", "ext-arch-not-covered")],  # the build that loads lacks sm_90
    # a healthy container whose NVIDIA probe timed out: unknown is not missing
    "container_gpu_list_not_recorded": [("info", "probe-failed")],
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


def test_a_package_with_one_build_per_cuda_release_is_judged_by_the_build_that_loads():
    facts = load("h100_bnb_cuda118_build_without_sm90")
    (f,) = run_checks(facts, K)
    assert f.verdict.startswith("libbitsandbytes_cuda118.so (bitsandbytes 0.43.1) carries sm_50 sm_52 sm_60 sm_61 "
                                "sm_70 sm_75 sm_80 sm_86 sm_89; the GPU 0 NVIDIA H100 80GB HBM3 is 9.0 (sm_90)")
    assert f.remedy.startswith("use a torch build for CUDA 12.4, whose libbitsandbytes_cuda124.so carries sm_90, or ")
    # BNB_CUDA_VERSION picks the build, as bitsandbytes does: its CUDA 12.1 build carries sm_90, but cannot load
    # beside torch's CUDA 11 libraries, so that is said instead
    env = dict(facts, env={"BNB_CUDA_VERSION": "121"})
    (libs,) = run_checks(env, K)
    assert libs.check == "ext-cuda-libs"


def test_no_cuda_build_of_a_multi_build_package_loads():
    """bitsandbytes 0.45.5 ships CUDA 11.7 … 12.8 builds; beside a CUDA 13 torch none of them is the one it looks
    for: one finding (bnb-cuda-binary), not also "needs libcudart.so.12" for each build."""
    facts = load("image_bnb_cuda_variants_l4")
    cu13 = dict(facts, torch=dict(facts["torch"], cuda="13.0", version="2.9.1+cu130"),
                pip={k: v for k, v in facts["pip"].items() if not k.startswith("nvidia-")})
    assert [(f.check, f.verdict.split(" because")[0]) for f in run_checks(cu13, K) if f.check.startswith(("ext", "bnb"))] \
        == [("bnb-cuda-binary", "bitsandbytes 0.45.5 looks for libbitsandbytes_cuda130.so")]

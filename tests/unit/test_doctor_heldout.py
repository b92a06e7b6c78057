"""A held-out evaluation (tests/fixtures/facts/heldout2/*.json): 33 real reports from public issue trackers that no
check was written for, recorded as the facts envman's probes would write on the reporter's machine (only what the
report says or a real wheel holds; ``_missing`` says what it does not tell, ``_assumed`` how its words were read
into a probe's form), each with the diagnosis a right answer gives (``_expect``; [] for a healthy near-miss).

As first scored, with the doctor unchanged since the round that wrote tests/fixtures/facts/reports: 17 of 33 right
(14 of 28 failures, 3 of 5 near-misses). That is the number nobody tuned for; what the doctor says on each report
today is below, the reports it still gets wrong with what it says instead."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envman.matrix.knowledge import knowledge_from_matrix, with_extensions
from envman.matrix.load import load_matrix
from envman.portable.doctor.checks import run_checks

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "facts"
K = with_extensions(knowledge_from_matrix(load_matrix(FIX.parent / "matrix")), FIX.parent / "matrix")
HELD = sorted((FIX / "heldout2").glob("*.json"))

# The misses as the unchanged doctor scored them (what it said instead of _expect). Kept as the record of the
# held-out figure; the reports fixed since are no longer held out.
FIRST_MISSES = {
    "docker_no_toolkit_4x4090": [("warn", "docker-no-nvidia")],
    "flash_attn_282_abi_vs_torch260": [],
    "geforce_image_cuda132_on_driver580": [],
    "jax0423_conda_beside_torch212_cudnn87": [],
    "kernel_update_no_module_runfile_driver": [("error", "nvidia-smi-failed")],
    "near_deepspeed_cuda111_torch_cu117_minor": [("warn", "ext-nvcc-mismatch")],
    "near_nightly_cu130_h100_toolkit128": [("warn", "ext-nvcc-mismatch")],
    "tf217_native_windows_rtx4050": [("error", "cpu-only-build"), ("error", "tf-windows-native")],
    "tf21_windows_wants_cuda101_has_102": [],
    "tf231_wants_cudnn7_has_cudnn8": [("error", "arch-not-covered"), ("error", "tf-cuda-libs")],
    "tf28_conda_env_cudnn_not_on_loader_path": [],
    "torch112_cu113_ld_library_path_cudnn803": [],
    "torch15_cu102_on_driver410_p100": [],
    "torch16_cu102_on_driver418_v100": [],
    "torch_compile_no_unversioned_libcuda": [],
    "wsl2_windows_19042_no_gpu_paravirtualization": [("warn", "ext-nvcc-mismatch")],
}

# What the doctor says today on the reports it still gets wrong (after the fixes of round three: 26 of 33, no longer
# a held-out figure), and why.
KNOWN_MISSES = {
    # the wheel flash-attn's setup.py fetched (GitHub, not PyPI) is not readable here: no file facts; the probes now
    # record both C++ ABIs (round four: ext-cxx11-abi), but this report's facts, written before, carry neither
    "flash_attn_282_abi_vs_torch260": [],
    # conda's cudnn package is no Python distribution, and a pre-plugin jaxlib says nothing of the cuDNN it wants
    "jax0423_conda_beside_torch212_cudnn87": [],
    # TensorFlow 2.1 keeps its build info in tensorflow_core/ in the old form, and the probes read no Windows DLL
    # directories: its CUDA 10.1 libraries are not judged (not-in-matrix says so)
    "tf21_windows_wants_cuda101_has_102": [],
    # on review the extra finding is right: TensorFlow 2.3.1's build info lists no SASS or PTX a 5.0 GPU runs
    # (sm_35 sm_37 sm_52 sm_60 sm_61 compute_70); the expectation, written from the report, named only the cuDNN
    "tf231_wants_cudnn7_has_cudnn8": [("error", "arch-not-covered"), ("error", "tf-cuda-libs")],
    # the report does not say what LD_LIBRARY_PATH held nor which CUDA directories the loader searched
    "tf28_conda_env_cudnn_not_on_loader_path": [],
    # the cuDNN torch 1.12's cu113 wheel bundles is named libcudnn.so.8 with no version: shadowed, but not provably older
    "torch112_cu113_ld_library_path_cudnn803": [("warn", "ld-library-path")],
    # no driver_cuda in the report, and the matrix's driver table starts at CUDA 11.0
    "torch15_cu102_on_driver410_p100": [],
}


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def serious(facts: dict) -> list[tuple[str, str]]:
    return [(f.severity, f.check) for f in run_checks(facts, K) if f.severity in ("error", "warn")]


def test_every_heldout_report_cites_a_new_issue():
    assert len(HELD) >= 30
    cited = {load(p)["_source"] for p in (FIX / "reports").glob("*.json")}
    sources = [load(p)["_source"] for p in HELD]
    assert len(set(sources)) == len(sources), "one report per issue thread"
    for p, src in zip(HELD, sources):
        facts = load(p)
        assert src.startswith("https://github.com/") and src not in cited, p.name
        assert facts["_report"] and isinstance(facts["_expect"], list) and facts["schema"] == 1, p.name
    near = [p for p in HELD if p.stem.startswith("near_")]
    assert len(near) >= 5 and all(load(p)["_expect"] == [] for p in near)
    assert len(HELD) - len(near) >= 25


@pytest.mark.parametrize("path", HELD, ids=lambda p: p.stem)
def test_heldout_report(path):
    facts = load(path)
    if path.stem in KNOWN_MISSES:
        assert serious(facts) == KNOWN_MISSES[path.stem] != [tuple(x) for x in facts["_expect"]]
    else:
        assert serious(facts) == [tuple(x) for x in facts["_expect"]]


def test_the_first_score_is_kept():
    """17 of 33 as first scored: the figure the fixtures were collected for; 26 of 33 after round three."""
    assert len(HELD) - len(FIRST_MISSES) == 17 and len(HELD) == 33
    assert len(HELD) - len(KNOWN_MISSES) == 26 and set(KNOWN_MISSES) <= set(FIRST_MISSES)

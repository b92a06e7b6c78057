"""The smoke program (envman/portable/smoke.py) on recorded observations: the GPU branch is tested on its
logic, without a GPU; the program itself runs from a kit copy as the image runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envman.app.smoke import write_kit
from envman.image.kit import SMOKE_MODULE
from envman.portable import smoke
from envman.portable.frameworks import torch as torch_smoke


def smoke_argv(tmp_path: Path) -> tuple[list[str], dict]:
    """The smoke program as the image runs it: ``python -m envman_portable.smoke`` from a kit copy."""
    kit = write_kit(tmp_path / "kit")
    return [sys.executable, "-s", "-m", SMOKE_MODULE], {**os.environ, "PYTHONPATH": str(kit)}

# Measured on this project's machines: torch 2.14.1+cu130 (ENVIRONMENT.md).
EXPECT_CU130 = smoke.load_expect({
    "schema": 1, "framework": {"name": "torch", "version": "2.14.1", "variant": "cu130"},
    "cuda": "13.0", "cudnn": "9.24.0.43", "nccl": "2.30.7", "python": "3.11",
    "arch_list": ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"],
    "imports": [["numpy", "numpy"], ["pyyaml", "yaml"]], "lock_hash": "ab" * 32,
})
ARCH = list(EXPECT_CU130["arch_list"])
NO_GPU_ENV = {"python": "3.11.7", "gpu_visible": False, "gpu_evidence": "no /dev/nvidia[0-9]* device nodes"}
GPU_ENV = {"python": "3.11.7", "gpu_visible": True, "gpu_evidence": "device nodes /dev/nvidia0"}
IMPORTS_OK = {"numpy": None, "yaml": None}
OPS_OK = {"matmul": {"rel_err": 1e-7}, "conv": {"rel_err": 2e-7}, "bf16": {"rel_err": 3e-3}}


def torch_obs(**over):
    """What observe_torch records for torch 2.14.1+cu130 on a CPU-only machine."""
    obs = {"version": "2.14.1+cu130", "cuda": "13.0", "cudnn": 92400, "nccl": "2.30.7", "arch_list": ARCH,
           "cuda_available": False, "gpu_visible": False}
    obs.update(over)
    return obs


def on_gpu(capability=(9, 0), name="NVIDIA H200", **over):
    obs = torch_obs(cuda_available=True, gpu_visible=True, gpu_evidence="device nodes /dev/nvidia0", device_count=1,
                    devices=[{"index": 0, "name": name, "capability": list(capability)}],
                    ops=[dict(OPS_OK, capability=list(capability), device=0)],
                    nccl_gpu={"available": True, "version": "2.30.7"})
    obs.update(over)
    return obs


def failed(report):
    return {c["name"]: c for c in report["checks"] if c["status"] == "fail"}


# ------------------------------------------------------------------------------------------ versions
@pytest.mark.parametrize("version,cuda,variant", [
    ("2.14.1+cu130", "13.0", "cu130"),
    ("2.5.1", "12.4", "cu124"),  # PyPI's default wheel: no local part, the CUDA it was built with decides
    ("2.13.0+cpu", None, "cpu"),
    ("2.4.0", None, "cpu"),
])
def test_torch_variant(version, cuda, variant):
    assert torch_smoke.torch_variant(version, cuda) == variant


@pytest.mark.parametrize("text,number", [("9.24.0.43", 92400), ("9.1.0.70", 90100), ("8.9.7.29", 8907),
                                         ("8.6.0", 8600)])
def test_cudnn_number_and_back(text, number):
    assert torch_smoke.cudnn_number(text) == number
    assert torch_smoke.cudnn_text(number) == ".".join(text.split(".")[:3])


@pytest.mark.parametrize("value,text", [((2, 30, 7), "2.30.7"), (21805, "2.18.5"), (2708, "2.7.8"), (None, None)])
def test_nccl_text(value, text):
    assert torch_smoke.nccl_text(value) == text


def test_release_matches_on_the_parts_both_give():
    assert smoke.release_matches("9.3.0.75", "9")  # TF's build info: major only
    assert smoke.release_matches("13.0", "13.0")
    assert not smoke.release_matches("12.8", "12.6")
    assert not smoke.release_matches("13.0", None)


# ------------------------------------------------------------------------------------------ arch coverage
@pytest.mark.parametrize("cc,arch,covered", [
    ((8, 9), ["sm_80", "sm_86"], True),  # sm_86 SASS runs on 8.9: same major, lower minor
    ((12, 0), ["sm_80", "sm_90"], False),  # sm_90 never runs on 12.0
    ((9, 0), ["sm_90a"], True),
    ((9, 1), ["sm_90a"], False),  # arch-specific SASS: that exact capability only
    ((7, 0), ["sm_75", "sm_80"], False),  # higher minor of the same major does not run
    ((12, 1), ARCH, True),  # DGX Spark's GB10 runs sm_120
    ((12, 0), ["sm_80", "compute_90"], True),  # PTX JIT-compiles forward
    ((8, 0), ["compute_90"], False),
    ((9, 0), [], False),
])
def test_arch_covers(cc, arch, covered):
    assert smoke.arch_covers(cc, arch)[0] is covered


def test_arch_covers_explains():
    assert smoke.arch_covers((8, 9), ["sm_80", "sm_86"]) == (True, "sm_86 SASS runs on 8.9 (same major, lower minor)")
    assert smoke.arch_covers((12, 0), ["sm_80", "sm_90"]) == (
        False, "no sm_12* SASS and no PTX <= 12.0: sm_80 sm_90 cannot run on compute capability 12.0")
    assert "JIT" in smoke.arch_covers((12, 0), ["compute_90"])[1]


# ------------------------------------------------------------------------------------------ GPU visibility
def test_gpu_visibility():
    assert smoke.gpu_visibility(["/dev/nvidia0", "/dev/nvidiactl"], None) == (True, "device nodes /dev/nvidia0")
    assert smoke.gpu_visibility([], 2) == (True, "nvidia-smi lists 2 GPU(s)")  # WSL2: no device nodes
    assert smoke.gpu_visibility(["/dev/nvidiactl", "/dev/nvidia-uvm"], None)[0] is False
    visible, why = smoke.gpu_visibility([], None, "all")
    assert not visible
    # CUDA base images set NVIDIA_VISIBLE_DEVICES=all even when the container got no GPU
    assert why == ("no /dev/nvidia[0-9]* device nodes, nvidia-smi absent (NVIDIA_VISIBLE_DEVICES=all, "
                   "but the container was not given GPUs)")
    assert smoke.gpu_visibility([], 0)[1] == "no /dev/nvidia[0-9]* device nodes, nvidia-smi lists no GPU"


# ------------------------------------------------------------------------------------------ expectations
def test_load_expect_reports_every_problem():
    with pytest.raises(ValueError) as ei:
        smoke.load_expect({"schema": 2, "framework": {"name": "torch"}, "arch_list": ["sm90"], "imports": [["x"]]})
    msg = str(ei.value)
    for part in ("schema: 2, this smoke script reads schema 1 (written by a newer envman)",
                 "framework.version: missing", "python: missing", "arch_list:", "imports:"):
        assert part in msg


def test_load_expect_defaults():
    e = smoke.load_expect({"schema": 1, "python": "3.12", "framework": None})
    assert (e["arch_list"], e["imports"], e["cuda"], e["cudnn"]) == ([], [], None, None)


# ------------------------------------------------------------------------------------------ verdicts
def test_cuda_stack_without_gpu_is_exit_6_and_says_so():
    r = smoke.evaluate(EXPECT_CU130, NO_GPU_ENV, torch_obs(), IMPORTS_OK)
    assert (r["exit_code"], r["status"]) == (6, "no-gpu")
    assert r["notes"] == ["GPU checks skipped: no GPU visible"]
    assert not failed(r) and not any(c["gpu"] for c in r["checks"])
    names = [c["name"] for c in r["checks"]]
    assert names == ["python", "framework version", "framework variant", "torch.version.cuda", "cudnn", "nccl",
                     "arch list", "import numpy", "import yaml"]


def test_require_gpu_turns_no_gpu_into_a_failure():
    r = smoke.evaluate(EXPECT_CU130, NO_GPU_ENV, torch_obs(), IMPORTS_OK, require_gpu=True)
    assert r["exit_code"] == 1 and list(failed(r)) == ["gpu required"]


def test_silent_cpu_fallback_on_a_gpu_machine_is_a_failure():
    obs = torch_obs(gpu_visible=True, gpu_evidence="device nodes /dev/nvidia0", cuda_available=False)
    r = smoke.evaluate(EXPECT_CU130, GPU_ENV, obs, IMPORTS_OK)
    assert r["exit_code"] == 1
    assert "silently run on the CPU" in failed(r)["cuda available"]["detail"]


def test_all_gpu_checks_pass_on_an_h200():
    r = smoke.evaluate(EXPECT_CU130, GPU_ENV, on_gpu(), IMPORTS_OK)
    assert (r["exit_code"], r["status"], r["notes"]) == (0, "passed", [])
    gpu = [c["name"] for c in r["checks"] if c["gpu"]]
    assert gpu == ["cuda available", "capability 9.0 (NVIDIA H200)", "matmul+backward on cc 9.0",
                   "cudnn conv fwd+bwd on cc 9.0", "bf16 matmul on cc 9.0", "nccl present"]


def test_device_not_covered_by_the_arch_list_fails():
    obs = on_gpu((12, 0), "NVIDIA RTX PRO 6000", arch_list=["sm_80", "sm_86", "sm_90"])
    r = smoke.evaluate(dict(EXPECT_CU130, arch_list=["sm_80", "sm_86", "sm_90"]), GPU_ENV, obs, IMPORTS_OK)
    assert r["exit_code"] == 1
    assert list(failed(r)) == ["capability 12.0 (NVIDIA RTX PRO 6000)"]


def test_bf16_skipped_below_ampere():
    r = smoke.evaluate(EXPECT_CU130, GPU_ENV, on_gpu((7, 5), "Tesla T4"), IMPORTS_OK)
    assert r["exit_code"] == 0
    (bf16,) = [c for c in r["checks"] if c["name"].startswith("bf16")]
    assert (bf16["status"], bf16["detail"]) == ("skip", "compute capability 7.5 has no native bf16")


@pytest.mark.parametrize("op,result", [("matmul", {"error": "RuntimeError: CUDA error: no kernel image"}),
                                       ("conv", {"error": "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED"}),
                                       ("bf16", {"rel_err": 0.5})])
def test_a_broken_gpu_op_fails(op, result):
    obs = on_gpu()
    obs["ops"][0][op] = result
    r = smoke.evaluate(EXPECT_CU130, GPU_ENV, obs, IMPORTS_OK)
    assert r["exit_code"] == 1 and len(failed(r)) == 1


def test_version_mismatches_fail_with_expected_and_observed():
    obs = torch_obs(version="2.14.0+cu128", cuda="12.8", cudnn=91002, nccl="2.27.3", arch_list=ARCH[:-1])
    imports = {"numpy": None, "yaml": "ModuleNotFoundError: No module named 'yaml'"}
    r = smoke.evaluate(EXPECT_CU130, NO_GPU_ENV, obs, imports)
    f = failed(r)
    assert r["exit_code"] == 1
    assert set(f) == {"framework version", "framework variant", "torch.version.cuda", "cudnn", "nccl", "arch list",
                      "import yaml"}
    assert (f["cudnn"]["expected"], f["cudnn"]["observed"]) == ("9.24.0.43 (92400)", "9.10.2 (91002)")
    assert f["arch list"]["detail"] == "missing sm_120"


def test_torch_that_does_not_import():
    r = smoke.evaluate(EXPECT_CU130, GPU_ENV, {"import_error": "ImportError: libcudnn.so.9: cannot open"}, IMPORTS_OK)
    assert r["exit_code"] == 1 and "torch does not import" in failed(r)["framework"]["detail"]


def test_cpu_stack_passes_without_gpu():
    exp = dict(EXPECT_CU130, framework={"name": "torch", "version": "2.13.0", "variant": "cpu"}, cuda=None,
               cudnn=None, nccl=None, arch_list=[])
    obs = {"version": "2.13.0+cpu", "cuda": None, "cudnn": None, "arch_list": [], "cuda_available": False}
    r = smoke.evaluate(exp, NO_GPU_ENV, obs, IMPORTS_OK)
    assert (r["exit_code"], r["notes"]) == (0, ["GPU checks not applicable: the expected stack is CPU-only"])


def test_no_framework_without_gpu_is_exit_6():
    exp = smoke.load_expect({"schema": 1, "framework": None, "python": "3.11", "imports": []})
    r = smoke.evaluate(exp, NO_GPU_ENV, {}, {})
    assert (r["exit_code"], r["notes"]) == (6, ["GPU checks skipped: no GPU visible"])


def test_nccl_unreadable_without_gpu_is_skipped_not_failed():
    obs = torch_obs(nccl=None, nccl_error="RuntimeError: NCCL not initialized")
    r = smoke.evaluate(EXPECT_CU130, NO_GPU_ENV, obs, IMPORTS_OK)
    assert r["exit_code"] == 6
    assert [c["status"] for c in r["checks"] if c["name"] == "nccl"] == ["skip"]


EXPECT_TF = smoke.load_expect({
    "schema": 1, "framework": {"name": "tensorflow", "version": "2.20.0", "variant": "cu125"}, "cuda": "12.5",
    "cudnn": "9.3.0", "nccl": None, "python": "3.11", "arch_list": [], "imports": [],
})
TF_OBS = {"version": "2.20.0", "built_with_cuda": True, "build_cuda": "12.5.1", "build_cudnn": "9", "gpus": []}


def test_tensorflow_build_info_without_gpu():
    r = smoke.evaluate(EXPECT_TF, NO_GPU_ENV, TF_OBS, {})
    assert r["exit_code"] == 6 and not failed(r)
    r = smoke.evaluate(EXPECT_TF, NO_GPU_ENV, dict(TF_OBS, build_cuda="12.3", built_with_cuda=True), {})
    assert list(failed(r)) == ["tf build cuda"]


def test_tensorflow_lists_no_gpu_on_a_gpu_machine_fails():
    r = smoke.evaluate(EXPECT_TF, GPU_ENV, dict(TF_OBS, gpu_evidence="device nodes /dev/nvidia0"), {})
    assert r["exit_code"] == 1 and "silently run on the CPU" in failed(r)["tf gpu listed"]["detail"]


def test_tensorflow_gpu_matmul():
    obs = dict(TF_OBS, gpus=["/physical_device:GPU:0"], matmul={"rel_err": 1e-6, "detail": "ran on GPU:0"})
    assert smoke.evaluate(EXPECT_TF, GPU_ENV, obs, {})["exit_code"] == 0
    obs["matmul"] = {"error": "the matmul ran on /job:localhost/device:CPU:0, not the GPU"}
    assert smoke.evaluate(EXPECT_TF, GPU_ENV, obs, {})["exit_code"] == 1


def test_unknown_framework_fails():
    exp = dict(EXPECT_TF, framework={"name": "mxnet", "version": "1.9.1", "variant": "cu112"})
    assert failed(smoke.evaluate(exp, NO_GPU_ENV, {}, {}))["framework"]["detail"] == \
        "the smoke test knows torch, tensorflow, jax"


# ------------------------------------------------------------------------------------------ the script
def run_script(tmp_path, expect, *args, env=None):
    f = tmp_path / "stack.json"
    f.write_text(json.dumps(expect))
    argv, kit_env = smoke_argv(tmp_path)
    if env is not None:
        kit_env = {**env, "PYTHONPATH": kit_env["PYTHONPATH"] + os.pathsep + env.get("PYTHONPATH", "")}
    return subprocess.run([*argv, "--expect", str(f), *args], capture_output=True, text=True,
                          timeout=60, env=kit_env, check=False)


def test_script_on_this_host_without_gpu(tmp_path):
    p = run_script(tmp_path, {"schema": 1, "framework": None, "python": "%d.%d" % sys.version_info[:2],
                              "imports": [["pyyaml", "yaml"]], "lock_hash": "x"})
    assert p.returncode == 6, p.stderr
    report = json.loads(p.stdout)
    assert (report["status"], report["exit_code"], report["lock_hash"]) == ("no-gpu", 6, "x")
    assert "GPU checks skipped: no GPU visible" in p.stderr.splitlines()
    assert p.stderr.splitlines()[-1] == "smoke test passed without GPU checks (exit 6)"


def test_report_is_the_only_thing_on_stdout(tmp_path):
    mod = tmp_path / "noisy.py"
    mod.write_text("import os\nprint('hello from noisy')\nos.write(1, b'C-level noise\\n')\n")
    p = run_script(tmp_path, {"schema": 1, "framework": None, "python": "3", "imports": [["noisy", "noisy"]]},
                   "--json", env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert json.loads(p.stdout)["exit_code"] == 6
    assert "hello from noisy" in p.stderr and "C-level noise" in p.stderr
    assert "PASS" not in p.stderr  # --json: no summary


def test_missing_expect_file_is_a_reported_failure(tmp_path):
    argv, env = smoke_argv(tmp_path)
    p = subprocess.run([*argv, "--expect", str(tmp_path / "nope.json")], capture_output=True,
                       text=True, timeout=60, check=False, env=env)
    assert p.returncode == 1
    (c,) = json.loads(p.stdout)["checks"]
    assert c["name"] == "expected stack" and "No such file" in c["detail"]


def test_null_module_imports_every_public_top_level_module_of_the_distribution():
    exp = smoke.load_expect({"schema": 1, "framework": None, "python": "3.11",
                             "imports": [["pyyaml", None], ["jinja2", None], ["no-such-dist", None]]})
    mods = smoke.expand_imports(exp)["imports"]
    assert ["pyyaml", "yaml"] in mods and ["jinja2", "jinja2"] in mods
    assert ["pyyaml", "_yaml"] not in mods  # private modules are not part of the contract
    assert ["no-such-dist", "no_such_dist"] in mods  # unknown: guessed, and the import then fails visibly


def test_doctor_findings_fail_the_smoke_except_gpu_visibility():
    f = [{"severity": "error", "check": "lock-drift", "verdict": "numpy 2.0.0 installed, 2.1.3 locked"},
         {"severity": "error", "check": "container-no-gpu", "verdict": "no GPU in this container"},
         {"severity": "warn", "check": "shm-small", "verdict": "/dev/shm is 64 MiB"}]
    [c] = smoke.evaluate_doctor(f)
    assert c["status"] == "fail" and c["observed"] == "1 error(s)" and "[lock-drift]" in c["detail"]
    [ok] = smoke.evaluate_doctor(f[1:])
    assert ok["status"] == "pass"
    assert smoke.evaluate_doctor(None) == []

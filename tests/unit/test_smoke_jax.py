"""The JAX smoke plug-in (envman/portable/frameworks/jax.py) on recorded observations: the four wheels that must
agree, the plugin that decides CPU or GPU, the cuDNN the plugin loads against the one jaxlib was built with, and
on a GPU the devices JAX lists with JAX_PLATFORMS=cuda and the ops it runs there."""

from __future__ import annotations

import pytest

from envman.portable import smoke
from envman.portable.frameworks import jax as jax_smoke

ARCH13 = ["sm_75", "sm_80", "sm_90", "sm_100", "sm_110", "sm_120"]
EXPECT = smoke.load_expect({
    "schema": 1, "framework": {"name": "jax", "version": "0.10.2", "variant": "cuda13"},
    "cuda": "13.0", "cudnn": "9.12", "nccl": "2.27", "python": "3.11", "arch_list": ARCH13,
    "imports": [["numpy", "numpy"]], "lock_hash": "cd" * 32,
})
NO_GPU_ENV = {"python": "3.11.2", "gpu_visible": False, "gpu_evidence": "no /dev/nvidia[0-9]* device nodes"}
GPU_ENV = {"python": "3.11.2", "gpu_visible": True, "gpu_evidence": "device nodes /dev/nvidia0"}
IMPORTS = {"numpy": None}
OPS_OK = {"matmul": {"rel_err": 2e-7}, "grad": {"rel_err": 1e-7}, "bf16": {"rel_err": 4e-3}}


def jax_obs(**over):
    """What observe_jax recorded for jax[cuda13]==0.10.2 on this CPU-only machine (pip install, 2026-12-01),
    with the lock's cuDNN/CUDA/NCCL (pip alone installed 9.28 / 13.5 / 2.32: the lock holds them to the build's)."""
    obs = {"gpu_visible": False, "version": "0.10.2", "jaxlib": "0.10.2",
           "plugins": {"cuda13": {"plugin": "0.10.2", "pjrt": "0.10.2"}},
           "cudnn": "9.12.0", "cudnn_error": None, "cuda_runtime": "13.0", "cuda_error": None, "nccl": "2.27.7",
           "build_cudnn": "9.12.0", "build_cuda": "13.0", "arch_list": list(ARCH13)}
    obs.update(over)
    return obs


def on_gpu(capability=(9, 0), name="NVIDIA H200", **over):
    obs = jax_obs(gpu_visible=True, gpu_evidence="device nodes /dev/nvidia0",
                  devices=[{"index": 0, "name": name, "capability": list(capability)}],
                  ops=[dict(OPS_OK, capability=list(capability), device=0)])
    obs.update(over)
    return obs


def checks(report):
    return {c["name"]: c for c in report["checks"]}


def failed(report):
    return {c["name"]: c for c in report["checks"] if c["status"] == "fail"}


def test_a_cuda13_stack_without_a_gpu_passes_its_cpu_checks_and_says_no_gpu():
    r = smoke.evaluate(EXPECT, NO_GPU_ENV, jax_obs(), IMPORTS)
    assert r["exit_code"] == smoke.EXIT_NO_GPU and not failed(r)
    assert [c["name"] for c in r["checks"]] == ["python", "framework version", "jaxlib/plugin/pjrt agree",
                                                "framework variant", "cudnn", "cuda runtime", "nccl", "arch list",
                                                "import numpy"]
    required = smoke.evaluate(EXPECT, NO_GPU_ENV, jax_obs(), IMPORTS, require_gpu=True)
    assert required["exit_code"] == smoke.EXIT_FAIL and list(failed(required)) == ["gpu required"]


def test_a_plugin_of_another_release_fails_the_agreement():
    obs = jax_obs(plugins={"cuda13": {"plugin": "0.10.1", "pjrt": "0.10.2"}})
    bad = failed(smoke.evaluate(EXPECT, NO_GPU_ENV, obs, IMPORTS))
    assert bad["jaxlib/plugin/pjrt agree"]["detail"].startswith("differ: jax-cuda13-plugin 0.10.1")
    assert "jax-cuda13-pjrt 0.10.2" in bad["jaxlib/plugin/pjrt agree"]["observed"]


def test_jax_without_its_cuda_extra_is_cpu_only():
    obs = jax_obs(plugins={})
    for k in ("cudnn", "cuda_runtime", "nccl", "build_cudnn", "arch_list"):
        obs.pop(k)
    bad = failed(smoke.evaluate(EXPECT, NO_GPU_ENV, obs, IMPORTS))
    assert bad["framework variant"]["detail"] == "no jax-cuda13-plugin installed: jax without jax[cuda13] runs on the CPU only"
    assert "cudnn" not in bad  # nothing to compare without the plugin: the variant check says why


def test_a_cudnn_older_than_jaxlibs_build_fails_even_when_the_lock_expects_it():
    obs = jax_obs(cudnn="9.8.0", build_cudnn="9.12.0")
    exp = dict(EXPECT, cudnn="9.8")
    bad = failed(smoke.evaluate(exp, NO_GPU_ENV, obs, IMPORTS))
    assert bad["cudnn"]["detail"] == "cuDNN 9.8.0 is older than the 9.12.0 jaxlib was built with: XLA refuses it at start-up"
    same_minor = smoke.evaluate(EXPECT, NO_GPU_ENV, jax_obs(cudnn="9.12.0", build_cudnn="9.12.1"), IMPORTS)
    assert "cudnn" not in failed(same_minor)  # a patch apart is compatible both ways


def test_unconstrained_nvidia_wheels_show_against_the_lock():
    """pip install jax[cuda13]==0.10.2 alone took cuDNN 9.28, CUDA 13.5, NCCL 2.32 (measured here). cuDNN and NCCL
    are held to floors (issue 38): newer in their major passes; the CUDA runtime is held to its X.Y."""
    obs = jax_obs(cudnn="9.28.1", cuda_runtime="13.5", nccl="2.32.3")
    assert set(failed(smoke.evaluate(EXPECT, NO_GPU_ENV, obs, IMPORTS))) == {"cuda runtime"}
    obs = jax_obs(cudnn="10.0.1", nccl="2.26.5")
    assert set(failed(smoke.evaluate(EXPECT, NO_GPU_ENV, obs, IMPORTS))) == {"cudnn", "nccl"}


def test_the_gpu_checks_pass_on_a_listed_gpu():
    r = smoke.evaluate(EXPECT, GPU_ENV, on_gpu(), IMPORTS)
    assert r["exit_code"] == 0, failed(r)
    c = checks(r)
    assert c["jax gpu listed"]["observed"] == 1 and c["capability 9.0 (NVIDIA H200)"]["status"] == "pass"
    assert {"jit matmul on cc 9.0", "jax.grad step on cc 9.0", "bf16 matmul on cc 9.0"} <= set(c)


def test_a_visible_gpu_that_jax_cannot_use_is_a_failure_not_a_cpu_run():
    obs = on_gpu(devices=[], ops=[], devices_error="RuntimeError: Unable to initialize backend 'cuda': "
                                                   "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH")
    bad = failed(smoke.evaluate(EXPECT, GPU_ENV, obs, IMPORTS))
    assert "JAX_PLATFORMS=cuda finds none (RuntimeError: Unable to initialize backend 'cuda'" in bad["jax gpu listed"]["detail"]
    assert "silently run on the CPU" in bad["jax gpu listed"]["detail"]


@pytest.mark.parametrize("cc, bf16", [((7, 5), "skip"), ((8, 0), "pass")])
def test_bf16_runs_where_the_capability_has_it(cc, bf16):
    r = smoke.evaluate(EXPECT, GPU_ENV, on_gpu(capability=cc, name="T4" if cc < (8, 0) else "A100"), IMPORTS)
    assert checks(r)["bf16 matmul on cc %d.%d" % cc]["status"] == bf16


def test_a_gpu_the_plugin_has_no_sass_for_fails_its_capability():
    obs = on_gpu(capability=(7, 0), name="Tesla V100")  # the cuda13 plugin starts at sm_75
    bad = failed(smoke.evaluate(EXPECT, GPU_ENV, obs, IMPORTS))
    assert "capability 7.0 (Tesla V100)" in bad


def test_a_wrong_op_result_fails():
    obs = on_gpu(ops=[dict(OPS_OK, matmul={"rel_err": 0.5}, capability=[9, 0], device=0)])
    assert "jit matmul on cc 9.0" in failed(smoke.evaluate(EXPECT, GPU_ENV, obs, IMPORTS))


def test_a_cpu_stack_passes_with_or_without_a_plugin():
    exp = dict(EXPECT, framework={"name": "jax", "version": "0.10.2", "variant": "cpu"}, cuda=None, cudnn=None,
               nccl=None, arch_list=[])
    plain = smoke.evaluate(exp, NO_GPU_ENV, jax_obs(plugins={}), IMPORTS)
    assert plain["exit_code"] == 0 and "cudnn" not in checks(plain)
    with_plugin = smoke.evaluate(exp, NO_GPU_ENV, jax_obs(), IMPORTS)
    assert with_plugin["exit_code"] == 0
    assert checks(with_plugin)["framework variant"]["detail"] == "a CUDA plugin also runs a CPU-only stack"


def test_jax_that_does_not_import_is_one_failure():
    r = smoke.evaluate(EXPECT, GPU_ENV, {"import_error": "ImportError: libstdc++.so.6: version GLIBCXX_3.4.30 not found"}, IMPORTS)
    assert failed(r)["framework"]["detail"].startswith("jax does not import: ImportError")


@pytest.mark.parametrize("n, text", [(91200, "9.12.0"), (90800, "9.8.0"), (8907, "8.9.7"), (None, None)])
def test_cudnn_numbers(n, text):
    assert jax_smoke.cudnn_text(n) == text


@pytest.mark.parametrize("n, text", [(13000, "13.0"), (12080, "12.8"), (12010, "12.1")])
def test_cuda_runtime_numbers(n, text):
    assert jax_smoke.cuda_text(n) == text

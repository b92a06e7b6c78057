"""The doctor on a JAX machine (tests/fixtures/facts_jax/): the generic checks judge JAX through its plug-in's
``installed`` record (driver, CPU-only build, cuDNN, LD_LIBRARY_PATH), and the checks only JAX needs come from the
plug-in (its four wheels of one release, XLA's preallocation beside TensorFlow, XLA_FLAGS, JAX_PLATFORMS).
Each broken machine is the healthy H200 with one edit; each check has a near-miss that stays quiet."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from envman.matrix.knowledge import knowledge_from_matrix, with_extensions
from envman.matrix.load import load_matrix
from envman.portable.doctor.checks import run_checks
from envman.portable.doctor.knowledge import Knowledge
from envman.portable.frameworks.jax_doctor import installed_jax, probe_jax

FIX = Path(__file__).resolve().parent.parent / "fixtures"
K = with_extensions(knowledge_from_matrix(load_matrix(FIX / "matrix")), FIX / "matrix")
HEALTHY = json.loads((FIX / "facts_jax" / "h200_jax072_cuda13.json").read_text())


def machine(**edits):
    f = copy.deepcopy(HEALTHY)
    for key, value in edits.items():
        if isinstance(value, dict) and isinstance(f.get(key), dict):
            f[key].update(value)
        else:
            f[key] = value
    return f


def findings(f):
    return [(x.severity, x.check) for x in run_checks(f, K)]


def one(f, check):
    (x,) = [x for x in run_checks(f, K) if x.check == check]
    return x


def test_the_healthy_h200_has_nothing_to_say():
    assert findings(HEALTHY) == []
    fw = installed_jax(HEALTHY)
    assert (fw.label, fw.cuda, fw.gpu, fw.cudnn) == ("jax 0.7.2 (cuda13 plugin)", "13.0", True, "9.12.0.46")


def test_jax_without_its_cuda_plugin_is_a_cpu_only_build_with_the_extra_as_remedy():
    pip = {k: v for k, v in HEALTHY["pip"].items() if "jax-cuda13" not in k}
    f = machine(pip=pip, jax={"plugins": {}, "cudnn": None, "cuda_runtime": None})
    x = one(f, "cpu-only-build")
    assert x.severity == "error" and x.verdict.startswith("jax 0.7.2 (no CUDA plugin) is a CPU-only build, but this machine has")
    assert "jax without jax[cuda12] or jax[cuda13] has no CUDA plugin: XLA runs on the CPU only" in x.verdict
    assert x.remedy.startswith("pip install 'jax[cuda13]==0.7.2'")


def test_a_driver_below_the_cuda_majors_floor():
    f = machine(driver="575.57.08", driver_cuda="12.9")  # 13.x needs >= 580.65.06
    x = one(f, "driver-too-old")
    assert x.verdict.startswith("driver 575.57.08 is too old for jax 0.7.2 (cuda13 plugin): CUDA 13.0 needs driver ≥ 580.95.05")
    assert "(≥ 580.65.06 with minor-version compatibility)" in x.verdict
    assert "pip install 'jax[cuda12]==0.7.2'" in x.remedy  # the cuda12 plugin runs on this driver
    assert findings(machine(driver="580.65.06", driver_cuda="13.0")) == []  # the floor itself: minor-version compat


def test_cudnn_older_than_jaxlibs_build():
    f = machine(pip={"nvidia-cudnn-cu13": "9.10.2.21"}, jax={"cudnn": "9.10.2.21"})
    x = one(f, "cudnn-too-old")
    assert x.verdict == "cuDNN 9.10.2.21 (nvidia-cudnn-cu13) is older than the cuDNN 9.12 jax 0.7.2 (cuda13 plugin) was built with"
    assert x.remedy == "pip install nvidia-cudnn-cu13==9.12"
    assert findings(machine(pip={"nvidia-cudnn-cu13": "9.19.0.56"}, jax={"cudnn": "9.19.0.56"})) == []  # newer is fine


def test_a_plugin_or_pjrt_of_another_release():
    plugin = machine(pip={"jax-cuda13-plugin": "0.7.1"},
                     jax={"plugins": {"cuda13": {"plugin": "0.7.1", "pjrt": "0.7.2", "arch_list": ["sm_90"]}}})
    got = {x.check: x for x in run_checks(plugin, K)}
    assert got["companion-mismatch"].verdict.startswith("jax-cuda13-plugin 0.7.1 does not pair with jax 0.7.2 (cuda13 plugin)")
    assert got["jax-parts-mismatch"].verdict.startswith("jax-cuda13-pjrt 0.7.2 beside jax-cuda13-plugin 0.7.1")
    pjrt = machine(pip={"jax-cuda13-pjrt": "0.7.0"},
                   jax={"plugins": {"cuda13": {"plugin": "0.7.2", "pjrt": "0.7.0", "arch_list": ["sm_90"]}}})
    x = one(pjrt, "jax-parts-mismatch")
    assert "XLA's CUDA backend of another release fails to load" in x.verdict
    assert x.remedy.startswith("pip install 'jax[cuda13]==0.7.2'")


def test_a_release_the_matrix_does_not_know_is_held_to_its_own_jaxlib():
    f = machine(pip={"jax": "0.13.0", "jaxlib": "0.13.1"},
                jax={"version": "0.13.0", "jaxlib": "0.13.1",
                     "plugins": {"cuda13": {"plugin": "0.13.1", "pjrt": "0.13.0", "arch_list": ["sm_90"]}}})
    verdicts = [x.verdict for x in run_checks(f, K) if x.check == "jax-parts-mismatch"]
    assert verdicts[0] == "jaxlib 0.13.1 is newer than jax 0.13.0: jax refuses a jaxlib newer than itself at import"
    assert verdicts[1].startswith("jax-cuda13-pjrt 0.13.0 beside jax-cuda13-plugin 0.13.1")


def test_two_cuda_plugins():
    plugins = {"cuda12": {"plugin": "0.7.2", "pjrt": "0.7.2", "arch_list": []},
               "cuda13": {"plugin": "0.7.2", "pjrt": "0.7.2", "arch_list": ["sm_90"]}}
    f = machine(pip={"jax-cuda12-plugin": "0.7.2", "jax-cuda12-pjrt": "0.7.2"}, jax={"plugins": plugins})
    assert one(f, "jax-two-plugins").remedy == "pip uninstall -y jax-cuda12-plugin jax-cuda12-pjrt"


TF_GPU = {"version": "2.20.0", "package": "tensorflow", "is_cuda_build": True, "cuda": "12.5.1", "cudnn": "9"}


def test_jax_and_a_gpu_tensorflow_fight_over_the_gpus_memory():
    f = machine(pip={"tensorflow": "2.20.0"}, tensorflow=TF_GPU)
    x = one(f, "jax-tf-gpu-memory")
    assert x.severity == "warn" and "XLA preallocates 75% of each GPU" in x.verdict
    assert "not set: XLA_PYTHON_CLIENT_PREALLOCATE=false, TF_FORCE_GPU_ALLOW_GROWTH=true" in x.verdict
    assert x.remedy.startswith("for tf.data input pipelines: pip uninstall -y tensorflow && pip install tensorflow-cpu==2.20.0")
    both = machine(pip={"tensorflow": "2.20.0"}, tensorflow=TF_GPU,
                   env={"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "TF_FORCE_GPU_ALLOW_GROWTH": "true"})
    assert "jax-tf-gpu-memory" not in [c for _, c in findings(both)]
    cpu_tf = machine(pip={"tensorflow-cpu": "2.20.0"},
                     tensorflow={"version": "2.20.0", "package": "tensorflow-cpu", "is_cuda_build": False})
    assert "jax-tf-gpu-memory" not in [c for _, c in findings(cpu_tf)]  # what envman locks beside jax


def test_xla_flags_and_jax_platforms_that_keep_jax_off_the_gpu():
    f = machine(env={"XLA_FLAGS": "--xla_dump_to=/tmp/hlo xla_gpu_autotune_level=0", "JAX_PLATFORMS": "cpu"})
    got = [(x.severity, x.check, x.verdict) for x in run_checks(f, K)]
    assert ("warn", "jax-platforms", "JAX_PLATFORMS=cpu: jax 0.7.2 (cuda13 plugin) will not use 1× NVIDIA H200") in got
    assert ("error", "xla-flags", "XLA_FLAGS holds xla_gpu_autotune_level=0, not a --flag: XLA aborts at start-up "
                                  "('Unknown flags in XLA_FLAGS')") in got
    assert any(c == "xla-flags" and v.startswith("XLA_FLAGS --xla_dump_to=/tmp/hlo dumps every compiled HLO") for _, c, v in got)
    quiet = machine(env={"XLA_FLAGS": "--xla_gpu_enable_latency_hiding_scheduler=true", "JAX_PLATFORMS": "cuda"})
    assert findings(quiet) == []


def test_ld_library_path_shadowing_the_wheels_cudnn():
    f = machine(env={"LD_LIBRARY_PATH": "/usr/local/cuda-13.0/lib64"},
                cuda_libs=[{"dir": "/usr/local/cuda-13.0/lib64", "from": "LD_LIBRARY_PATH", "libs": {"libcudnn": "9.1.0"}}])
    x = one(f, "ld-library-path")
    assert "shadows the pip CUDA libraries jax 0.7.2 (cuda13 plugin) loads with older ones" in x.verdict
    assert "libcudnn.so.9.1.0 < nvidia-cudnn-cu13 9.12.0.46" in x.verdict


def test_the_probe_reads_versions_and_the_plugins_sass_without_importing(tmp_path):
    from tests.unit.test_doctor_extensions import write_so

    site = tmp_path / "site-packages"
    for name, ver in (("jax", "0.7.2"), ("jaxlib", "0.7.2"), ("jax_cuda13_plugin", "0.7.2"), ("jax_cuda13_pjrt", "0.7.2"),
                      ("nvidia_cudnn_cu13", "9.12.0.46"), ("nvidia_cuda_runtime", "13.0.96")):
        (site / f"{name}-{ver}.dist-info").mkdir(parents=True)
    write_so(site / "jax_cuda13_plugin", "_prng.so", sass=(75, 80, 90, 100, 120), ptx=(120,))
    from envman.portable.facts.packages import scan_dists

    rec = probe_jax(scan_dists([str(site)]), lambda p, n: None)
    assert rec == {"version": "0.7.2", "jaxlib": "0.7.2", "cudnn": "9.12.0.46", "cuda_runtime": "13.0.96",
                   "plugins": {"cuda13": {"plugin": "0.7.2", "pjrt": "0.7.2",
                                          "arch_list": ["sm_75", "sm_80", "sm_90", "sm_100", "sm_120"]}}}
    assert probe_jax({}, lambda p, n: None) is None


def test_the_knowledge_carries_the_extra_that_installs_a_build_into_the_image():
    k = Knowledge.from_dict(json.loads(json.dumps(K.to_dict())))
    b = k.release("jax", "0.7.2").build("cuda13")
    assert b.extra == "cuda13" and k.release("torch", "2.14.1").builds[0].extra is None


def test_drift_from_a_jax_lock_names_the_plugin_and_reinstalls_through_the_extra():
    """The lock's framework is named as the plug-in names a build (no '+cuda13' local label JAX never has), and
    the remedy is the extra that installs that build, not a bare `pip install jax==V` (CPU only)."""
    lock = {"path": "/p/envman.lock", "python": "3.11",
            "framework": {"name": "jax", "version": "0.12.0", "variant": "cuda13", "index_url": None}}
    x = one(machine(lock=lock), "lock-drift")
    assert x.verdict == "envman.lock pins jax 0.12.0 (cuda13 plugin), installed is jax 0.7.2 (cuda13 plugin)"
    assert x.remedy == "pip install 'jax[cuda13]==0.12.0'"
    other_patch = one(machine(lock={**lock, "framework": {**lock["framework"], "version": "0.7.1"}}), "lock-drift")
    assert other_patch.remedy == "pip install 'jax[cuda13]==0.7.1'"  # a patch the matrix lacks: its line's extra
    assert [c for _, c in findings(machine(lock={**lock, "framework": {**lock["framework"], "version": "0.7.2"}}))
            if c.startswith("lock")] == []

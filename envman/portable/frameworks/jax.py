"""JAX in the smoke program: ``observe_jax`` records; the ``evaluate_*`` functions are pure."""

from __future__ import annotations

import ctypes
import glob
import os
import re
from typing import Any

from ..versions import split_local, vt
from .base import (
    Plugin,
    check,
    device_checks,
    error,
    import_observed,
    release_matches,
)
from .jax_doctor import BUILDS, CHECKS, installed_jax, plugin_archs, probe_jax
from .torch import cudnn_text as torch_cudnn_text


def cudnn_text(number: object) -> str | None:
    """cudnnGetVersion(): 91200 -> '9.12.0'; 8907 -> '8.9.7'; None -> None (as torch's, which packs it alike)."""
    return None if number is None else torch_cudnn_text(str(number))


def cuda_text(number: object) -> str | None:
    """cudaRuntimeGetVersion(): 13000 -> '13.0'; 12080 -> '12.8'."""
    if number is None:
        return None
    n = int(str(number))
    return "%d.%d" % (n // 1000, n % 1000 // 10)


def _build_of(obs: dict[str, Any]) -> str:
    plugins = obs.get("plugins") or {}
    found = [b for b in BUILDS if plugins.get(b)]
    return "+".join(found) or "cpu"


def _agreement(obs: dict[str, Any]) -> dict[str, Any]:
    """jaxlib, plugin and pjrt are one release: JAX refuses a plugin of another jaxlib at start-up."""
    jaxlib = obs.get("jaxlib")
    parts = ["jaxlib %s" % jaxlib]
    bad = []
    for b, vers in sorted((obs.get("plugins") or {}).items()):
        for kind in ("plugin", "pjrt"):
            v = vers.get(kind)
            parts.append("jax-%s-%s %s" % (b, kind, v))
            if v != jaxlib:
                bad.append("jax-%s-%s %s" % (b, kind, v or "missing"))
    return check("jaxlib/plugin/pjrt agree", not bad, "jaxlib " + str(jaxlib), ", ".join(parts),
                 ("differ: " + ", ".join(bad) + " (pin jaxlib, jax-cudaNN-plugin and jax-cudaNN-pjrt to one release)")
                 if bad else "one release")


def _variant_check(want: str, obs: dict[str, Any]) -> dict[str, Any]:
    got = _build_of(obs)
    if want == "cpu":
        return check("framework variant", True, "cpu", got,
                     "a CUDA plugin also runs a CPU-only stack" if got != "cpu" else "")
    if got == "cpu":
        return check("framework variant", False, want, "cpu",
                     "no jax-%s-plugin installed: jax without jax[%s] runs on the CPU only" % (want, want))
    return check("framework variant", got == want, want, got, "" if got == want else "another CUDA plugin is installed")


def _at_least(floor: str, got: object) -> bool:
    """cuDNN and NCCL are locked to the build's floors within their major (lock/pins.py): a newer one passes."""
    f, g = vt(floor), vt(got)
    return bool(f and g) and g[0] == f[0] and g[:len(f)] >= f


def _library_checks(expect: dict[str, Any], obs: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    if expect["cudnn"]:
        got, built = obs.get("cudnn"), obs.get("build_cudnn")
        # XLA compares major.minor: a cuDNN patch is compatible both ways
        older = built is not None and got is not None and vt(got)[:2] < vt(built)[:2]
        why = obs.get("cudnn_error") or ""
        if older:
            why = "cuDNN %s is older than the %s jaxlib was built with: XLA refuses it at start-up" % (got, built)
        out.append(check("cudnn", _at_least(expect["cudnn"], got) and not older,
                         expect["cudnn"], got, why or ("jaxlib built with %s" % built if built else "")))
    if expect["cuda"]:
        got = obs.get("cuda_runtime")
        out.append(check("cuda runtime", got is not None and release_matches(expect["cuda"], got), expect["cuda"], got,
                         obs.get("cuda_error") or "the nvidia-cuda-runtime wheel"))
    if expect["nccl"]:
        got = obs.get("nccl")
        out.append(check("nccl", _at_least(expect["nccl"], got), expect["nccl"], got,
                         "the nvidia-nccl wheel"))
    return out


def _arch_check(expect: dict[str, Any], obs: dict[str, Any]) -> list[dict[str, Any]]:
    if not expect["arch_list"]:
        return []
    got = obs.get("arch_list") or []
    missing = [a for a in expect["arch_list"] if a not in got]
    return [check("arch list", not missing, " ".join(expect["arch_list"]), " ".join(got),
                  ("missing " + " ".join(missing)) if missing else "SASS of the plugin's kernel libraries")]


def evaluate_jax(expect: dict[str, Any], obs: dict[str, Any]) -> list[dict[str, Any]]:
    """Checks without a GPU: versions, the plugin that decides CPU or GPU, the CUDA libraries it loads."""
    fw = expect["framework"]
    if obs.get("import_error"):
        return [check("framework", False, "jax " + fw["version"], None, "jax does not import: " + obs["import_error"])]
    version = obs.get("version")
    out = [check("framework version", split_local(version)[0] == split_local(fw["version"])[0], fw["version"], version)]
    out.append(_agreement(obs))
    out.append(_variant_check(fw["variant"], obs))
    if fw["variant"] != "cpu" and _build_of(obs) == fw["variant"]:
        out += _library_checks(expect, obs)
        out += _arch_check(expect, obs)
    return out


def evaluate_jax_gpu(expect: dict[str, Any], obs: dict[str, Any]) -> list[dict[str, Any]]:
    """Checks on a visible GPU: JAX lists it (never a CPU fallback), and runs on it."""
    if obs.get("import_error"):
        return []
    devices = obs.get("devices") or []
    if not devices:
        return [check("jax gpu listed", False, ">= 1 GPU", 0,
                      "a GPU is visible (%s) but JAX_PLATFORMS=cuda finds none (%s): without that setting this stack "
                      "would silently run on the CPU" % (obs.get("gpu_evidence", "?"), obs.get("devices_error") or
                                                          "no cuda device"), gpu=True)]
    out = [check("jax gpu listed", True, ">= 1 GPU", len(devices), " ".join(d.get("name", "?") for d in devices), gpu=True)]
    return out + device_checks(devices, obs.get("arch_list") or [], obs.get("ops") or [],
                               (("jit matmul", "matmul"), ("jax.grad step", "grad")))


# ============================================================================ observation (impure)
def _dist_version(name: str) -> str | None:
    try:
        from importlib import metadata

        return metadata.version(name)
    except Exception:
        return None


def _package_dir(module: str) -> str | None:
    try:
        import importlib.util

        spec = importlib.util.find_spec(module)
    except Exception:
        return None
    locs = list(spec.submodule_search_locations or []) if spec is not None else []
    return locs[0] if locs else None


def _lib_call(pattern: str, func: str) -> tuple[int | None, str | None]:
    """Load the newest library matching ``pattern`` and call ``func()`` -> int (no GPU needed)."""
    paths = sorted(glob.glob(pattern))
    if not paths:
        return None, "not found: " + pattern
    try:
        lib = ctypes.CDLL(paths[-1])
        if func == "cudaRuntimeGetVersion":
            out = ctypes.c_int(0)
            rc = lib.cudaRuntimeGetVersion(ctypes.byref(out))
            return (out.value, None) if rc == 0 else (None, "cudaRuntimeGetVersion returned %d" % rc)
        fn = getattr(lib, func)
        fn.restype = ctypes.c_size_t
        return int(fn()), None
    except (OSError, AttributeError) as exc:
        return None, error(exc)


def _observe_libraries(obs: dict[str, Any], build: str) -> None:
    """cuDNN, CUDA runtime and NCCL of the nvidia-* wheels the plugin loads (by RPATH, from site-packages)."""
    major = build[4:]
    nvidia = _package_dir("nvidia")
    if nvidia is None:
        obs["cudnn_error"] = obs["cuda_error"] = "no nvidia-* wheel installed (the nvidia namespace is missing)"
        return
    n, err = _lib_call(os.path.join(nvidia, "cudnn", "lib", "libcudnn.so.*"), "cudnnGetVersion")
    obs["cudnn"], obs["cudnn_error"] = cudnn_text(n), err
    for sub in ("cu%s" % major, "cuda_runtime"):  # CUDA 13 wheels: nvidia/cu13/lib; CUDA 12: nvidia/cuda_runtime/lib
        n, err = _lib_call(os.path.join(nvidia, sub, "lib", "libcudart.so.*"), "cudaRuntimeGetVersion")
        if n is not None:
            break
    obs["cuda_runtime"], obs["cuda_error"] = cuda_text(n), err
    obs["nccl"] = _dist_version("nvidia-nccl-cu%s" % major) or _dist_version("nvidia-nccl")


def _observe_build(obs: dict[str, Any], jax: Any) -> None:
    """What jaxlib was built with, from the plugin's own version module (no GPU needed)."""
    try:
        from jax._src.lib import cuda_versions

        if cuda_versions is not None:
            obs["build_cudnn"] = cudnn_text(cuda_versions.cudnn_build_version())
            obs["build_cuda"] = cuda_text(cuda_versions.cuda_runtime_build_version())
    except Exception as exc:
        obs["build_error"] = error(exc)


def _rel_err(np: Any, got: Any, ref: Any) -> float:
    got, ref = np.asarray(got, dtype="float64"), np.asarray(ref, dtype="float64")
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-12))


def _jax_ops(jax: Any, dev: Any) -> dict[str, Any]:
    import numpy as np

    res: dict[str, Any] = {}
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 512)).astype("float32")
    b = rng.standard_normal((512, 512)).astype("float32")
    ref = a.astype("float64") @ b.astype("float64")
    with jax.default_matmul_precision("highest"):  # fp32 against fp32, no TF32
        try:
            x, w = jax.device_put(a, dev), jax.device_put(b, dev)
            c = jax.jit(lambda p, q: p @ q)(x, w).block_until_ready()
            res["matmul"] = {"rel_err": _rel_err(np, c, ref), "detail": "ran on %s" % (list(c.devices())[0],)}
        except Exception as exc:
            res["matmul"] = {"error": error(exc)}
        try:  # d(sum(x @ w))/dx = ones @ w^T
            g = jax.jit(jax.grad(lambda p, q: (p @ q).sum()))(jax.device_put(a, dev), jax.device_put(b, dev))
            res["grad"] = {"rel_err": _rel_err(np, g.block_until_ready(), np.ones((512, 512)) @ b.astype("float64").T)}
        except Exception as exc:
            res["grad"] = {"error": error(exc)}
    try:
        import jax.numpy as jnp

        ab, bb = jnp.asarray(a[:256, :256], dtype=jnp.bfloat16), jnp.asarray(b[:256, :256], dtype=jnp.bfloat16)
        c16 = jax.jit(lambda p, q: p @ q)(jax.device_put(ab, dev), jax.device_put(bb, dev)).block_until_ready()
        ref16 = np.asarray(ab, dtype="float64") @ np.asarray(bb, dtype="float64")
        res["bf16"] = {"rel_err": _rel_err(np, c16, ref16)}
    except Exception as exc:
        res["bf16"] = {"error": error(exc)}
    return res


def _observe_devices(obs: dict[str, Any], jax: Any) -> None:
    try:
        devs = jax.devices("cuda")
    except Exception as exc:
        obs["devices"], obs["devices_error"] = [], error(exc)
        return
    obs["devices"], obs["ops"] = [], []
    seen = set()
    for d in devs:
        m = re.match(r"(\d+)\.(\d+)", str(getattr(d, "compute_capability", "") or ""))
        cc = [int(m.group(1)), int(m.group(2))] if m else None
        obs["devices"].append({"index": d.id, "name": getattr(d, "device_kind", str(d)), "capability": cc})
        if cc is not None and tuple(cc) not in seen:  # one set of ops per distinct capability
            seen.add(tuple(cc))
            obs["ops"].append(dict(_jax_ops(jax, d), capability=cc, device=d.id))


def observe_jax(gpu_visible: bool, gpu_evidence: str) -> dict[str, Any]:
    obs: dict[str, Any] = {"gpu_visible": gpu_visible, "gpu_evidence": gpu_evidence}
    if gpu_visible:
        # a CUDA backend that fails to start is an error then, not a quiet fall back to the CPU
        os.environ["JAX_PLATFORMS"] = "cuda"
    jax = import_observed("jax", obs)
    if jax is None:
        return obs
    obs["version"] = str(jax.__version__)
    obs["jaxlib"] = _dist_version("jaxlib")
    obs["plugins"] = {}
    for b in BUILDS:
        plugin = _dist_version("jax-%s-plugin" % b)
        if plugin:
            obs["plugins"][b] = {"plugin": plugin, "pjrt": _dist_version("jax-%s-pjrt" % b)}
    build = _build_of(obs)
    if build in BUILDS:
        _observe_libraries(obs, build)
        _observe_build(obs, jax)
        obs["arch_list"] = plugin_archs(_package_dir("jax_%s_plugin" % build))
    if gpu_visible:
        _observe_devices(obs, jax)
    return obs


def jax_label(name: str, version: str, variant: str | None) -> str:
    """'jax 0.7.2 (cuda13 plugin)', 'jax 0.7.2 (no CUDA plugin)': the plugin names the build."""
    base = split_local(version)[0]
    if not variant:
        return "%s %s" % (name, version)
    return "%s %s (%s)" % (name, base, "no CUDA plugin" if variant == "cpu" else "%s plugin" % variant)


PLUGIN = Plugin("jax", observe_jax, evaluate_jax, evaluate_jax_gpu, installed_jax, probe_jax, ("jax",), CHECKS,
                jax_label)

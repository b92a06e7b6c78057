"""TensorFlow in the smoke program: its build info and GPU list, and the pure checks on them."""

from __future__ import annotations

import ast
import os
from collections.abc import Callable, Mapping
from typing import Any, Optional, cast

from ..versions import major_minor, split_local, vt
from .base import (
    TOL_FP32,
    Installed,
    Plugin,
    check,
    error,
    import_observed,
    op_check,
    release_matches,
)

# The distributions that install TensorFlow, the first found wins; the -cpu/-intel ones are CPU-only builds.
TF_DISTS = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly", "tensorflow-intel")
CPU_DISTS = ("tensorflow-cpu", "tensorflow-intel")
# What a CUDA build of TensorFlow dlopens at start (tsl/platform/default/dso_loader.cc, and its own log: "Successfully
# opened dynamic library libcudart.so.11.0 … libcublas, libcublasLt, libcufft, libcurand, libcusolver, libcusparse,
# libcudnn"). A missing one makes TF list no GPU ("Cannot dlopen some GPU libraries").
NEEDS_LIBS = ("libcudart", "libcublas", "libcublasLt", "libcufft", "libcurand", "libcusolver", "libcusparse", "libcudnn")


def evaluate_tensorflow(expect: dict[str, Any], obs: dict[str, Any]) -> list[dict[str, Any]]:
    fw = expect["framework"]
    if obs.get("import_error"):
        return [check("framework", False, "tensorflow " + fw["version"], None,
                      "tensorflow does not import: " + obs["import_error"])]
    out = [check("framework version", split_local(obs.get("version"))[0] == split_local(fw["version"])[0],
                 fw["version"], obs.get("version"))]
    built = bool(obs.get("built_with_cuda"))
    if fw["variant"] == "cpu":
        out.append(check("framework variant", True, "cpu", "cuda" if built else "cpu",
                         "a CUDA-built TensorFlow also runs a CPU-only stack" if built else ""))
    else:
        out.append(check("framework variant", built, fw["variant"], "cuda" if built else "cpu",
                         "" if built else "this TensorFlow was built without CUDA"))
    if expect["cuda"]:
        got = obs.get("build_cuda")
        out.append(check("tf build cuda", release_matches(expect["cuda"], got), expect["cuda"], got))
    if expect["cudnn"]:
        got = obs.get("build_cudnn")
        out.append(check("tf build cudnn", release_matches(expect["cudnn"], got), expect["cudnn"], got,
                         "TensorFlow's build info gives cuDNN's major version only" if len(vt(got)) == 1 else ""))
    return out


def evaluate_tensorflow_gpu(expect: dict[str, Any], obs: dict[str, Any]) -> list[dict[str, Any]]:
    if obs.get("import_error"):
        return []
    gpus = obs.get("gpus") or []
    if not gpus:
        return [check("tf gpu listed", False, ">= 1 GPU", 0,
                      "a GPU is visible (%s) but TensorFlow lists none (%s): this stack would silently run on the "
                      "CPU" % (obs.get("gpu_evidence", "?"), obs.get("gpu_error") or "no GPU device"), gpu=True)]
    return [check("tf gpu listed", True, ">= 1 GPU", len(gpus), " ".join(gpus), gpu=True),
            op_check("tf matmul on GPU", obs.get("matmul"), TOL_FP32)]


def observe_tensorflow(gpu_visible: bool, gpu_evidence: str) -> dict[str, Any]:
    obs: dict[str, Any] = {"gpu_visible": gpu_visible, "gpu_evidence": gpu_evidence}
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    tf = import_observed("tensorflow", obs)
    if tf is None:
        return obs
    obs["version"] = str(tf.__version__)
    try:
        info = dict(tf.sysconfig.get_build_info())
        obs["built_with_cuda"] = bool(info.get("is_cuda_build", tf.test.is_built_with_cuda()))
        obs["build_cuda"], obs["build_cudnn"] = info.get("cuda_version"), info.get("cudnn_version")
    except Exception as exc:
        obs["built_with_cuda"], obs["build_error"] = False, error(exc)
    try:
        obs["gpus"] = [d.name for d in tf.config.list_physical_devices("GPU")]
    except Exception as exc:
        obs["gpus"], obs["gpu_error"] = [], error(exc)
    if gpu_visible and obs["gpus"]:
        try:
            import numpy as np

            a = np.random.default_rng(0).standard_normal((512, 512)).astype("float32")
            with tf.device("/GPU:0"):
                c = tf.linalg.matmul(tf.constant(a), tf.constant(a))
                where = c.device
            ref = a.astype("float64") @ a.astype("float64")
            err = float(np.linalg.norm(c.numpy() - ref) / np.linalg.norm(ref))
            obs["matmul"] = {"rel_err": err, "detail": "ran on " + where} if "GPU" in where.upper() else \
                {"error": "the matmul ran on %s, not the GPU" % where}
        except Exception as exc:
            obs["matmul"] = {"error": error(exc)}
    return obs


# --- the doctor's side: what the package probe records (docs/facts.md `tensorflow`) and how the checks read it

def parse_build_info(text: Optional[str]) -> Optional[dict[str, Any]]:
    """TF's generated ``build_info = {...}`` or ``build_info = collections.OrderedDict([...])``."""
    if not text:
        return None
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "build_info" for t in node.targets):
            val = node.value
            try:
                if isinstance(val, ast.Dict):
                    return cast("dict[str, Any]", ast.literal_eval(val))
                if isinstance(val, ast.Call) and val.args:
                    return dict(ast.literal_eval(val.args[0]))
            except (ValueError, TypeError, SyntaxError):
                return None
    return None


def probe_tensorflow(dists: Mapping[str, Any], read: Callable[[str, int], Optional[str]]) -> Optional[dict[str, Any]]:
    """tensorflow/python/platform/build_info.py, a generated literal: its CUDA, cuDNN and arch list."""
    name = next((n for n in TF_DISTS if n in dists), None)
    if name is None:
        return None
    loc, ver, _ = dists[name]
    t: dict[str, Any] = {"version": ver, "package": name}
    info = parse_build_info(read(os.path.join(loc, "tensorflow", "python", "platform", "build_info.py"), 1 << 16))
    if info:
        cuda, cudnn = str(info.get("cuda_version") or ""), str(info.get("cudnn_version") or "")
        if cuda:
            t["cuda"] = cuda.split("_")[-1] if "_" in cuda else cuda  # Windows writes '64_112'
        if cudnn:
            t["cudnn"] = cudnn.split("_")[-1]
        if "is_cuda_build" in info:
            t["is_cuda_build"] = bool(info["is_cuda_build"])
        caps = info.get("cuda_compute_capabilities")
        if isinstance(caps, list):
            t["arch_list"] = [str(c) for c in caps]
    elif name == "tensorflow-cpu":
        t["is_cuda_build"] = False
    return t


def installed_tensorflow(facts: Mapping[str, Any]) -> Optional[Installed]:
    t = facts.get("tensorflow")
    t = t if isinstance(t, dict) else {}
    version = str(t.get("version") or "").strip()
    if not version or isinstance(t.get("version"), (dict, list)):
        return None
    pip = facts.get("pip") if isinstance(facts.get("pip"), dict) else {}
    cpu_dist = next((d for d in CPU_DISTS if d in pip), None)  # type: ignore[operator]
    built = t.get("is_cuda_build")
    cuda = str(t.get("cuda") or "").strip()
    arch = t.get("arch_list")
    return Installed(
        "tensorflow", version, None, major_minor(cuda),
        gpu=built if isinstance(built, bool) else None,
        cpu_only=built is False or cpu_dist is not None,
        arch_list=tuple(str(a) for a in arch) if isinstance(arch, list) else (),
        cudnn=str(t["cudnn"]) if t.get("cudnn") else None,
        cpu_undo=f"pip uninstall -y {cpu_dist} &&" if cpu_dist else None,
        ptx_everywhere=True, pins_cuda_wheels=False, needs_libs=NEEDS_LIBS, tag="tf",
    )


PLUGIN = Plugin("tensorflow", observe_tensorflow, evaluate_tensorflow, evaluate_tensorflow_gpu, installed_tensorflow,
                probe_tensorflow, TF_DISTS)

"""TensorFlow in the smoke program: its build info and GPU list inside the image (on a visible GPU, a matmul
against numpy) and the pure checks on those observations."""

from __future__ import annotations

import os
from typing import Any

from .base import TOL_FP32, Plugin, check, error, import_observed, op_check, release, release_matches, split_local


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
                         "TensorFlow's build info gives cuDNN's major version only" if len(release(got)) == 1 else ""))
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
            obs["matmul"] = {"rel_err": err, "detail": "ran on " + where}
            if "GPU" not in where.upper():
                obs["matmul"] = {"error": "the matmul ran on %s, not the GPU" % where}
        except Exception as exc:
            obs["matmul"] = {"error": error(exc)}
    return obs


PLUGIN = Plugin("tensorflow", observe_tensorflow, evaluate_tensorflow, evaluate_tensorflow_gpu)
